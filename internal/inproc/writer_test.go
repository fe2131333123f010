package inproc_test

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// The in-process kernel stamps each record with the writer's thread and
// CPU (internal/stamp, not a system call each): a thread pinned to each
// allowed CPU in turn writes, and every trace line names that thread and
// that CPU, as the kernel's would.
func TestWriterThreadAndCPU(t *testing.T) {
	k := inproc.New(subsys.New(subsys.Options{NumCPU: runtime.NumCPU()}))
	f, err := userevents.Open(k.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("stamp_writer u32 n", 0)
	if err != nil {
		t.Fatal(err)
	}
	fs := k.Tracefs()
	if err := fs.WriteFile("events/user_events/stamp_writer/enable", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}

	// Two writer threads, the second started while the first holds its
	// thread locked: they are different threads, so at most one of them is
	// the main thread, whose id is the pid (a backend reporting the pid as
	// the thread would pass with one writer on the main thread).
	type writer struct{ tid, cpu int }
	want := map[uint32]writer{} // payload n → who wrote it where
	var mu sync.Mutex
	write := func(base uint32, then func()) error {
		// The thread's affinity is changed: the thread dies with the
		// goroutine (locked, never unlocked) rather than going back to the
		// runtime pinned.
		runtime.LockOSThread()
		var all unix.CPUSet
		if err := unix.SchedGetaffinity(0, &all); err != nil {
			return err
		}
		tid := unix.Gettid()
		for c := range runtime.NumCPU() {
			if !all.IsSet(c) {
				continue
			}
			var set unix.CPUSet
			set.Set(c)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return fmt.Errorf("sched_setaffinity to CPU %d: %w", c, err)
			}
			deadline := time.Now().Add(time.Minute)
			for cpuNow() != c {
				if time.Now().After(deadline) {
					return fmt.Errorf("thread still not on CPU %d a minute after sched_setaffinity", c)
				}
				runtime.Gosched()
			}
			for i := range 3 {
				n := base + uint32(c*10+i)
				if err := ev.Write(binary.LittleEndian.AppendUint32(nil, n)); err != nil {
					return err
				}
				mu.Lock()
				want[n] = writer{tid, c}
				mu.Unlock()
			}
		}
		if then != nil {
			then()
		}
		return nil
	}
	errs := make(chan error, 2)
	go func() {
		errs <- write(0, func() {
			done := make(chan struct{})
			go func() { errs <- write(100000, nil); close(done) }()
			<-done
		})
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	trace, err := fs.ReadFile("trace")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^ *\S+-(\d+) +\[(\d+)\] .* stamp_writer: n=0x[0-9a-f]+ \((\d+)\)$`)
	got := line.FindAllStringSubmatch(string(trace), -1)
	if len(got) != len(want) {
		t.Fatalf("%d stamp_writer lines in trace, want %d:\n%s", len(got), len(want), trace)
	}
	for _, m := range got {
		pid, _ := strconv.Atoi(m[1])
		cpu, _ := strconv.Atoi(m[2])
		n, _ := strconv.Atoi(m[3])
		if w, ok := want[uint32(n)]; !ok || pid != w.tid || cpu != w.cpu {
			t.Errorf("line for n=%d says thread %d CPU %d, written by thread %d on CPU %d", n, pid, cpu, w.tid, w.cpu)
		}
	}
}

func cpuNow() int {
	var c uint32
	unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0)
	return int(c)
}
