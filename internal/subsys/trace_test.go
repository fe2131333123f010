package subsys

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// clockAt returns a settable clock.
func clockAt(ns *uint64) func() uint64 { return func() uint64 { return *ns } }

func newTraceEnv(t *testing.T, now *uint64) *tenv {
	s := New(Options{NumCPU: 2, Clock: clockAt(now)})
	mem := newMem()
	return &tenv{t: t, s: s, mem: mem, p: s.NewProcess(mem)}
}

func TestTraceFile(t *testing.T) {
	now := uint64(1_492_780_000)
	e := newTraceEnv(t, &now)
	if got := e.read(FileBufferSizeKB); got != "7 (expanded: 1408)\n" {
		t.Errorf("fresh buffer_size_kb %q", got)
	}
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "__t u8 a; s16 b; u32 c; s64 d; char[6] e; __rel_loc char[] f; __data_loc char[] g; struct s h 3; char i", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.enable("__t", true)
	if got := e.read(FileBufferSizeKB); got != "1410\n" {
		t.Errorf("buffer_size_kb after the first enable %q", got)
	}
	payload := []byte{65, 0xfe, 0xff, 0xef, 0xbe, 0xad, 0xde, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	payload = append(payload, "hello\x00"...)
	payload = append(payload, le32(4<<16|8)...)  // f: "abc\0" at 41, 8 bytes past the end of f
	payload = append(payload, le32(3<<16|45)...) // g: "xy\0" at record offset 45
	payload = append(payload, 1, 2, 3, 7)
	payload = append(payload, "abc\x00xy\x00"...)
	if _, err := f.Writev(Writer{PID: 48, TGID: 48, Comm: "emit", CPU: 0}, le32(idx), payload); err != nil {
		t.Fatal(err)
	}
	want := `# tracer: nop
#
# entries-in-buffer/entries-written: 1/1   #P:2
#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
            emit-48      [000] .....     1.492780: __t: a='A'(65) b=0xfffe (65534) c=0xdeadbeef (-559038737) d=0xfffffffffffffffb (-5) e=hello f=abc g=xy h=<INVALID-SIZE> i=(7)
`
	if got := e.read(FileTrace); got != want {
		t.Errorf("trace:\n%s\nwant (spec §9):\n%s", got, want)
	}
}

func TestTracePipe(t *testing.T) {
	now := uint64(5_000_000_000)
	e := newTraceEnv(t, &now)
	f := e.s.Open()
	defer f.Close()
	idx, _ := e.reg(f, "p u32 n", 0, 0)
	e.enable("p", true)
	write := func(n uint32, cpu int) {
		now += 1000
		if _, err := f.Writev(Writer{PID: 7, Comm: "w", CPU: cpu}, le32(idx), le32(n)); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 0)
	write(2, 1)

	// Recording goes on while trace is open (pause-on-trace is 0 on 6.12,
	// checked in the VM), but resizing is EBUSY.
	h, err := e.s.FS().Open(FileTrace, os.O_RDONLY, root)
	if err != nil {
		t.Fatal(err)
	}
	write(3, 0)
	if err := e.write(FileBufferSizeKB, "8"); !errors.Is(err, unix.EBUSY) {
		t.Errorf("resize while trace is open: %v, want EBUSY", err)
	}
	text, _ := io.ReadAll(h)
	h.Close()
	if !strings.Contains(string(text), "entries-in-buffer/entries-written: 3/3") || !strings.Contains(string(text), "n=0x3 ") {
		t.Errorf("trace opened before the third write:\n%s", text)
	}
	write(4, 0)

	// trace_pipe consumes, in time order across CPUs; one reader at a time.
	pipe, err := e.s.FS().Open(FileTracePipe, os.O_RDONLY, root)
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Close()
	if _, err := e.s.FS().Open(FileTracePipe, os.O_RDONLY, root); !errors.Is(err, unix.EBUSY) {
		t.Errorf("second trace_pipe reader: %v, want EBUSY", err)
	}
	buf := make([]byte, 4096)
	n, err := pipe.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	got := string(buf[:n])
	if strings.Count(got, "\n") != 4 || !strings.Contains(got, "[001]") ||
		strings.Index(got, "n=0x1 ") > strings.Index(got, "n=0x2 ") || strings.Index(got, "n=0x3 ") > strings.Index(got, "n=0x4 ") {
		t.Errorf("trace_pipe:\n%s", got)
	}
	if got := e.read(FileTrace); !strings.Contains(got, "entries-in-buffer/entries-written: 0/0") {
		t.Errorf("trace after trace_pipe consumed it:\n%s", got)
	}
	// A blocked read returns when a record arrives.
	go func() { time.Sleep(20 * time.Millisecond); write(5, 1) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // generous: a loaded machine can stall the writer
	defer cancel()
	n, err = pipe.ReadContext(ctx, buf)
	if err != nil || !strings.Contains(string(buf[:n]), "n=0x5 ") {
		t.Errorf("blocked trace_pipe read: %q, %v", buf[:n], err)
	}
}

func TestTraceDeletedEvents(t *testing.T) {
	now := uint64(1_000_000_000)
	e := newTraceEnv(t, &now)
	if err := e.write(FileDynamicEvents, "u:gone u32 v\nu:keep u8 k"); err != nil {
		t.Fatal(err)
	}
	f := e.s.Open()
	defer f.Close()
	gone, _ := e.reg(f, "gone u32 v", 0, 0)
	e.enable("gone", true)
	if _, err := f.Writev(w0, le32(gone), le32(42)); err != nil {
		t.Fatal(err)
	}
	e.enable("gone", false)
	e.unreg(0)
	f.Close()
	id := strings.TrimSuffix(e.read("events/user_events/gone/id"), "\n")
	if err := e.s.Delete("gone", root); err != nil {
		t.Fatal(err)
	}
	// The record stays, but its event is gone: the kernel prints the type.
	if got := e.read(FileTrace); !strings.Contains(got, ": Unknown type "+id+"\n") {
		t.Errorf("record of a deleted event:\n%s", got)
	}
	// Its removal armed a clear: the next dynamic_events delete, even one
	// that fails, empties the buffer.
	if err := e.write(FileDynamicEvents, "!u:nothing"); !errors.Is(err, unix.ENOENT) {
		t.Fatalf("delete of nothing: %v", err)
	}
	if got := e.read(FileTrace); !strings.Contains(got, "entries-in-buffer/entries-written: 0/0") {
		t.Errorf("trace not cleared by the armed clear:\n%s", got)
	}
}

func TestTracingOn(t *testing.T) {
	now := uint64(1)
	e := newTraceEnv(t, &now)
	f := e.s.Open()
	defer f.Close()
	idx, _ := e.reg(f, "t u8 x", 0, 0)
	e.enable("t", true)
	if err := e.write(FileTracingOn, "0"); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Writev(w0, le32(idx), []byte{1}); err != nil || n != 5 {
		t.Fatalf("write with tracing off: %d, %v (it succeeds, and is dropped)", n, err)
	}
	if got := e.read(FileTracingOn); got != "0\n" {
		t.Errorf("tracing_on %q", got)
	}
	wantErrno(t, "tracing_on abc", e.write(FileTracingOn, "abc"), unix.EINVAL)
	wantErrno(t, "a 7 GB buffer", e.write(FileBufferSizeKB, "7000000"), unix.ENOMEM)
	wantErrno(t, "buffer_size_kb 0", e.write(FileBufferSizeKB, "0"), unix.EINVAL)
	wantErrno(t, "buffer_size_kb 8", e.write(FileBufferSizeKB, "8"), 0)
	e.write(FileTracingOn, "5")
	if got := e.read(FileTracingOn); got != "1\n" {
		t.Errorf("tracing_on after 5: %q", got)
	}
	f.Writev(w0, le32(idx), []byte{2})
	if got := e.read(FileTrace); !strings.Contains(got, "1/1") || !strings.Contains(got, "x=(2)") {
		t.Errorf("trace:\n%s", got)
	}
	// O_TRUNC on trace empties it; writing to it does nothing else.
	if err := e.s.FS().WriteFile(FileTrace, []byte("\n"), os.O_TRUNC, root); err != nil {
		t.Fatal(err)
	}
	if got := e.read(FileTrace); !strings.Contains(got, "0/0") {
		t.Errorf("trace after O_TRUNC:\n%s", got)
	}
}

// ReadAt is how a FUSE server reads: by offset. Reading at 0 makes the text
// anew, as a fresh open of a seq_file would; trace_pipe reads on.
func TestHandleReadAt(t *testing.T) {
	now := uint64(5_000_000_000)
	e := newTraceEnv(t, &now)
	h, err := e.s.FS().Open(FileStatus, os.O_RDONLY, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, 4096)
	n, err := h.ReadAt(buf, 0)
	if got := string(buf[:n]); got != "\nActive: 0\nBusy: 0\n" || err != io.EOF {
		t.Fatalf("ReadAt 0: %q, %v", got, err)
	}
	f := e.s.Open()
	defer f.Close()
	if _, err := e.reg(f, "x u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	// Past the start: the text made before.
	n, _ = h.ReadAt(buf, 1)
	if got := string(buf[:n]); got != "Active: 0\nBusy: 0\n" {
		t.Errorf("ReadAt 1: %q, want the old text from offset 1", got)
	}
	n, _ = h.ReadAt(buf[:3], 0)
	if got := string(buf[:n]); got != "x\n\n" {
		t.Errorf("ReadAt 0 again: %q, want the new text", got)
	}
	if n, err := h.ReadAt(buf, 100); n != 0 || err != io.EOF {
		t.Errorf("ReadAt past the end: %d, %v", n, err)
	}
	if !h.Poll(nil) || h.Pipe() {
		t.Error("a regular file polls not ready, or says it is a pipe")
	}

	p, err := e.s.FS().Open(FileTracePipe, os.O_RDONLY|unix.O_NONBLOCK, Cred{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !p.Pipe() || p.Poll(nil) {
		t.Error("trace_pipe: not a pipe, or ready while empty")
	}
	if _, err := p.ReadAt(buf, 0); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("empty non-blocking trace_pipe: %v", err)
	}
}

// README is the kernel's own mini-HOWTO, cut to the files this tree has:
// each of its lines is a line of 6.12.117's (testdata/kernel-README.txt,
// cat of /sys/kernel/tracing/README in the VM), in the same order.
func TestREADMEIsTheKernels(t *testing.T) {
	kernel, err := os.ReadFile("testdata/kernel-README.txt")
	if err != nil {
		t.Fatal(err)
	}
	e := newTraceEnv(t, new(uint64))
	ours := strings.Split(strings.TrimSuffix(e.read(FileREADME), "\n"), "\n")
	theirs := strings.Split(string(kernel), "\n")
	j := 0
	for _, l := range ours {
		for j < len(theirs) && theirs[j] != l {
			j++
		}
		if j == len(theirs) {
			t.Fatalf("README line %q is not the kernel's, or not in its order", l)
		}
		j++
	}
}
