package fusefs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
)

// rawHelperEnv makes this test binary the reader TestHelperRawReader
// describes, on the tree at its value.
const rawHelperEnv = "UETRACE_TEST_RAW_TREE"

// TestHelperRawReader is not a test of its own: TestTracePipeRawThroughFUSE
// runs it in a process of its own (this one serves the tree), where it
// reads per_cpu/cpu0/trace_pipe_raw as trace-cmd's recorder does: poll,
// read a page, then fcntl O_NONBLOCK and read until EAGAIN.
func TestHelperRawReader(t *testing.T) {
	dir := os.Getenv(rawHelperEnv)
	if dir == "" {
		t.Skip("run by TestTracePipeRawThroughFUSE")
	}
	fd, err := unix.Open(filepath.Join(dir, "per_cpu/cpu0/trace_pipe_raw"), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Seek(fd, 0, 0); !errors.Is(err, unix.ESPIPE) {
		fmt.Printf("lseek: %v\n", err)
	}
	// buffer_percent is 0 (set by the test): poll waits for a record,
	// which a thread of this process writes once the poll has begun.
	go func() {
		// On CPU 0, whose buffer is read: the tree takes the writer's CPU
		// from /proc.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(100 * time.Millisecond) // not needed for correctness: the poll waits either way
		data, err := unix.Open(filepath.Join(dir, "user_events_data"), unix.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		word := new(uint32)
		r := abi.UserReg{Size: abi.UserRegSize, EnableBit: 0, EnableSize: 4, EnableAddr: uint64(uintptr(unsafe.Pointer(word)))}
		if err := abi.RegisterName(data, &r, "raw_ev u32 n"); err != nil {
			t.Error(err)
			return
		}
		rec := binary.NativeEndian.AppendUint32(binary.NativeEndian.AppendUint32(nil, r.WriteIndex), 7)
		if _, err := unix.Write(data, rec); err != nil {
			t.Error(err)
		}
		runtime.KeepAlive(word)
	}()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 60_000)
	fmt.Printf("poll: %d %v %#x\n", n, err, fds[0].Revents)
	page := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, page)
		if err != nil {
			fmt.Printf("read: %v\n", unix.ErrnoName(err.(unix.Errno)))
			break
		}
		fmt.Printf("read: %d commit %d\n", n, binary.LittleEndian.Uint64(page[8:]))
		if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl|unix.O_NONBLOCK)
		}
	}
}

// TestTracePipeRawThroughFUSE: trace_pipe_raw through the FUSE tree is a
// stream (no lseek), its poll waits for buffer_percent, a read gets a page,
// and O_NONBLOCK set after the open (as trace-cmd sets it before its last
// reads) makes an empty one EAGAIN instead of blocking.
func TestTracePipeRawThroughFUSE(t *testing.T) {
	_, dir := mount(t)
	sh(t, dir, `cd $T && echo 'u:raw_ev u32 n' >> dynamic_events && echo 1 > events/user_events/raw_ev/enable && echo 0 > buffer_percent`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRawReader$")
	cmd.Env = append(os.Environ(), rawHelperEnv+"="+dir)
	cmd.WaitDelay = 10 * time.Second
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "poll: 1 <nil> 0x1\nread: 4096 commit 16\nread: EAGAIN\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the reader said:\n%s\nwant:\n%s", out, want)
	}
}
