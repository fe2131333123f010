package fusefs_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// mount serves a fresh subsystem's tree on a temporary directory. This
// process never touches the mount itself — a FUSE server that blocks on its
// own mount cannot be ended — so the tests look at it through sh and cat.
func mount(t *testing.T) (*subsys.Subsystem, string) {
	t.Helper()
	testutil.NeedFUSE(t, "mounting FUSE")
	s := subsys.New(subsys.Options{NumCPU: 2})
	dir := filepath.Join(t.TempDir(), "tracing")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := fusefs.Mount(dir, s, fusefs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return s, dir
}

// sh runs script with $T the tree, and returns its output.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "T="+dir)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c %q: %v\n%s", script, err, out)
	}
	return string(out)
}

// The spec's shell examples, through the files.
func TestShell(t *testing.T) {
	_, dir := mount(t)
	got := sh(t, dir, `cd $T
echo 'u:shell_ev u32 count; char[16] name' >> dynamic_events
cat dynamic_events
cat user_events_status
cat events/user_events/shell_ev/id
echo 1 > events/user_events/shell_ev/enable
cat events/user_events/shell_ev/enable
cat user_events_status
echo 0 > events/user_events/shell_ev/enable
echo '!u:shell_ev' 2>/dev/null >> dynamic_events || echo 'ENOENT: a delete names the fields too'
echo '!u:shell_ev u32 count; char[16] name' >> dynamic_events
cat user_events_status`)
	want := `u:shell_ev u32 count; char[16] name
shell_ev

Active: 1
Busy: 0
32767
1
shell_ev # Used by ftrace

Active: 1
Busy: 1
ENOENT: a delete names the fields too

Active: 0
Busy: 0
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestModes(t *testing.T) {
	_, dir := mount(t)
	got := sh(t, dir, `cd $T && stat -c '%n %a %u %g %F' . events user_events_data user_events_status trace trace_pipe dynamic_events`)
	want := `. 700 0 0 directory
events 755 0 0 directory
user_events_data 640 0 0 regular empty file
user_events_status 440 0 0 regular empty file
trace 640 0 0 regular empty file
trace_pipe 440 0 0 regular empty file
dynamic_events 640 0 0 regular empty file
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if got := sh(t, dir, `ls $T/events`); got != "enable\nftrace\nheader_event\nheader_page\n" {
		t.Errorf("events/ of an empty subsystem: %q", got)
	}
}

// '>' truncates: on dynamic_events it deletes every event (EBUSY while one
// is in use), on trace it clears the buffer.
func TestTruncate(t *testing.T) {
	s, dir := mount(t)
	sh(t, dir, `cd $T && echo 'u:a u32 x' >> dynamic_events && echo 'u:b u32 x' >> dynamic_events`)
	if got := sh(t, dir, `cat $T/dynamic_events`); got != "u:a u32 x\nu:b u32 x\n" {
		t.Fatalf("dynamic_events: %q", got)
	}
	sh(t, dir, `echo 'u:c u64 y' > $T/dynamic_events`)
	if got := sh(t, dir, `cat $T/dynamic_events`); got != "u:c u64 y\n" {
		t.Errorf("after '>': %q", got)
	}
	sh(t, dir, `echo 1 > $T/events/user_events/c/enable`)
	if got := sh(t, dir, `echo 'u:d u32 x' > $T/dynamic_events 2>&1 || echo refused`); !strings.Contains(got, "refused") {
		t.Errorf("'>' with an event in use: %q, want EBUSY", got)
	}
	if s.Lookup("user_events", "c") == nil {
		t.Error("the refused truncate deleted an event")
	}
}

// trace_pipe blocks until a record comes, and a reader interrupted by
// SIGINT goes away cleanly.
func TestTracePipe(t *testing.T) {
	s, dir := mount(t)
	sh(t, dir, `cd $T && echo 'u:tp u32 n' >> dynamic_events && echo 1 > events/user_events/tp/enable`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := exec.CommandContext(ctx, "cat", filepath.Join(dir, "trace_pipe"))
	out, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cat.WaitDelay = 10 * time.Second
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	f := s.Open()
	defer f.Close()
	ev := s.Lookup("user_events", "tp")
	_ = ev
	p := s.NewProcess(nopMem{})
	idx, err := f.Register(p, subsys.Cred{PerfmonCapable: true}, regArgs("tp u32 n"))
	if err != nil {
		t.Fatal(err)
	}
	w := subsys.Writer{PID: 77, TGID: 77, Comm: "writer", CPU: 1}
	if _, err := f.Write(w, []byte{byte(idx), 0, 0, 0, 42, 0, 0, 0}, 0); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(line, "tp: n=0x2a (42)\n") || !strings.Contains(line, "writer-77") {
		t.Errorf("trace_pipe line %q", line)
	}
	// Blocked again on an empty buffer: Ctrl-C ends it.
	cat.Process.Signal(syscall.SIGINT)
	err = cat.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Errorf("cat after SIGINT: %v, want killed by SIGINT", err)
	}
	// The pipe is free again: another reader may open it.
	if got := sh(t, dir, `timeout -s INT 1 cat $T/trace_pipe; echo done`); !strings.HasSuffix(got, "done\n") {
		t.Errorf("second reader: %q", got)
	}
}

type nopMem struct{}

func (nopMem) SetBit(addr uint64, bit uint, on bool) error { return nil }

// regArgs is a DIAG_IOCSREG of cmd with an 8-byte enable word at 0x1000.
func regArgs(cmd string) subsys.RegisterArgs {
	reg := make([]byte, 28)
	reg[0] = 28
	reg[4] = 0 // enable_bit
	reg[5] = 8 // enable_size
	reg[8+1] = 0x10
	return subsys.RegisterArgs{Reg: reg, Name: cmd}
}

// poll(2) on trace_pipe: not ready while empty, woken by a record.
func TestTracePipePoll(t *testing.T) {
	s, dir := mount(t)
	bin := testutil.BuildC(t, "", "testdata/pollpipe.c", "-O1", "-Wall")
	sh(t, dir, `cd $T && echo 'u:pp u32 n' >> dynamic_events && echo 1 > events/user_events/pp/enable`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, filepath.Join(dir, "trace_pipe"))
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil || line != "empty: 0 revents=0x0\n" {
		t.Fatalf("poll of an empty trace_pipe: %q, %v", line, err)
	}
	// Once it waits in poll(2) — the FUSE request answered "not ready" and
	// a wake-up armed — a record must wake it.
	for {
		c, err := procfs.ReadSyscall(cmd.Process.Pid)
		// Its first poll returned before it printed: this is the second.
		// (amd64 has poll(2) itself, 7; every architecture ppoll.)
		if err == nil && (c.Nr == unix.SYS_PPOLL || runtime.GOARCH == "amd64" && c.Nr == 7) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("pollpipe never waited in poll(2)")
		case <-time.After(5 * time.Millisecond):
		}
	}
	f := s.Open()
	defer f.Close()
	idx, err := f.Register(s.NewProcess(nopMem{}), subsys.Cred{PerfmonCapable: true}, regArgs("pp u32 n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(subsys.Writer{PID: 5, TGID: 5, Comm: "w"}, []byte{byte(idx), 0, 0, 0, 7, 0, 0, 0}, 0); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pollpipe: %v\n%s", err, rest)
	}
	if !strings.HasPrefix(string(rest), "poll: 1 revents=0x1\n") || !strings.HasSuffix(string(rest), "pp: n=0x7 (7)\n") {
		t.Errorf("after a record:\n%s", rest)
	}
}
