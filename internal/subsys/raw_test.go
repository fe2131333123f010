package subsys

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// per_cpu/cpuN/trace_pipe_raw reads the CPU's buffer a page at a time, as
// the ring's pages; it waits while the buffer is empty, or is EAGAIN when
// the read is non-blocking, and polls readable at buffer_percent.
func TestTracePipeRaw(t *testing.T) {
	e := newTraceEnv(t, new(uint64))
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "r u32 n", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.enable("r", true)
	tree := e.s.FS()
	h, err := tree.Open("per_cpu/cpu1/trace_pipe_raw", os.O_RDONLY, root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Pipe() {
		t.Error("trace_pipe_raw is not read as a stream")
	}
	page := make([]byte, ftrace.PageSize)
	if _, err := h.ReadStream(context.Background(), page, true); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("empty, non-blocking: %v, want EAGAIN", err)
	}
	// A blocking read waits for the record.
	got := make(chan int, 1)
	go func() {
		n, err := h.ReadContext(context.Background(), page)
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	if err := h.WaitRead(context.Background(), true); err != nil {
		t.Errorf("WaitRead, non-blocking: %v", err)
	}
	if _, err := f.Writev(Writer{PID: 9, TGID: 9, Comm: "w", CPU: 0}, le32(idx), le32(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Writev(Writer{PID: 9, TGID: 9, Comm: "w", CPU: 1}, le32(idx), le32(2)); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != ftrace.PageSize {
		t.Fatalf("read %d bytes, want a page", n)
	}
	// One event: its header, then the record [type pid n], 16 bytes.
	if commit := binary.LittleEndian.Uint64(page[8:]); commit != 16 {
		t.Errorf("commit %d, want one 16-byte event", commit)
	}
	rec := page[ftrace.PageHeaderSize+4 : ftrace.PageHeaderSize+16]
	if binary.NativeEndian.Uint32(rec[4:]) != 9 || binary.NativeEndian.Uint32(rec[8:]) != 2 {
		t.Errorf("record %x, want pid 9 and n 2", rec)
	}
	// CPU 0's record is still in its buffer.
	if s := e.read("per_cpu/cpu0/stats"); !strings.HasPrefix(s, "entries: 1\n") {
		t.Errorf("cpu0 stats %q", s)
	}

	// Poll: buffer_percent 0 is any record; 50 needs half the pages.
	e.write(FileBufferPercent, "0")
	if h.Poll(nil) {
		t.Error("empty CPU 1 polls readable")
	}
	woke := make(chan struct{})
	if h.Poll(func() { close(woke) }) {
		t.Fatal("empty CPU 1 polls readable")
	}
	if _, err := f.Writev(Writer{PID: 9, TGID: 9, Comm: "w", CPU: 1}, le32(idx), le32(3)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(time.Minute):
		t.Fatal("a record did not wake the poll")
	}
	if !h.Poll(nil) {
		t.Error("a record, buffer_percent 0: not readable")
	}
	e.write(FileBufferPercent, "50")
	if h.Poll(nil) {
		t.Error("one record, buffer_percent 50: readable")
	}
	// A read of 31 bytes is too short for the page header and the
	// 16-byte event: 0, nothing consumed. One of 32 takes both; the rest
	// of the page comes in the next reads.
	short := make([]byte, 32)
	if n, err := h.Read(short[:31]); n != 0 || err != io.EOF {
		t.Errorf("a 31-byte read: %d, %v; want 0 and end of file", n, err)
	}
	if n, err := h.Read(short); n != 32 || err != nil || binary.LittleEndian.Uint64(short[8:]) != 16 {
		t.Errorf("a 32-byte read: %d, %v, %x", n, err, short)
	}
	rest, err := io.ReadAll(io.LimitReader(h, ftrace.PageSize-32))
	if len(rest) != ftrace.PageSize-32 || err != nil {
		t.Errorf("the rest of the page: %d bytes, %v", len(rest), err)
	}
}

// The per_cpu files: each CPU's trace, trace_pipe, stats and
// buffer_size_kb are that CPU's buffer alone.
func TestPerCPUFiles(t *testing.T) {
	now := uint64(1_000_000_000)
	e := newTraceEnv(t, &now)
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "c u32 n", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.enable("c", true)
	for cpu := range 2 {
		if _, err := f.Writev(Writer{PID: int32(10 + cpu), TGID: 10, Comm: "w", CPU: cpu}, le32(idx), le32(uint32(cpu))); err != nil {
			t.Fatal(err)
		}
	}
	tree := e.s.FS()
	if err := tree.WriteFile("per_cpu/cpu1/trace", nil, os.O_TRUNC, root); err != nil {
		t.Fatal(err)
	}
	if s0, s1 := e.read("per_cpu/cpu0/stats"), e.read("per_cpu/cpu1/stats"); !strings.HasPrefix(s0, "entries: 1\n") || !strings.HasPrefix(s1, "entries: 0\n") {
		t.Errorf("O_TRUNC of cpu1's trace: cpu0 %q, cpu1 %q", s0, s1)
	}
	if txt := e.read("per_cpu/cpu0/trace"); !strings.Contains(txt, "entries-in-buffer/entries-written: 1/1") || !strings.Contains(txt, "c: n=0") {
		t.Errorf("cpu0's trace:\n%s", txt)
	}
	p, err := tree.Open("per_cpu/cpu0/trace_pipe", os.O_RDONLY|unix.O_NONBLOCK, root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Open(FileTracePipe, os.O_RDONLY, root); !errors.Is(err, unix.EBUSY) {
		t.Errorf("trace_pipe while cpu0's is open: %v, want EBUSY", err)
	}
	line, _ := io.ReadAll(p)
	p.Close()
	if !strings.Contains(string(line), "[000]") || !strings.Contains(string(line), "c: n=0") {
		t.Errorf("cpu0's trace_pipe %q", line)
	}
	if err := tree.WriteFile("per_cpu/cpu1/buffer_size_kb", []byte("100"), 0, root); err != nil {
		t.Fatal(err)
	}
	if got := e.read("per_cpu/cpu1/buffer_size_kb") + e.read(FileBufferSizeKB); got != "103\nX\n" {
		t.Errorf("after sizing cpu1: %q", got)
	}
	if err := tree.WriteFile("per_cpu/cpu2/stats", nil, 0, root); !errors.Is(err, unix.ENOENT) {
		t.Errorf("per_cpu/cpu2 of 2 CPUs: %v", err)
	}
	for _, name := range []string{"per_cpu/cpu01", "per_cpu/cpu-1", "per_cpu/cpu0/nope", "per_cpu/cpu0/trace/x"} {
		if _, err := tree.Stat(name); !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s: %v, want ENOENT", name, err)
		}
	}
	for name, want := range map[string][2]bool{
		"per_cpu/cpu0/trace": {true, false}, "per_cpu/cpu1/trace_pipe_raw": {true, false}, "/per_cpu//cpu3/trace_pipe": {true, false},
		"per_cpu/cpu0/stats": {false, false}, "per_cpu/cpu0/buffer_size_kb": {false, true}, FileBufferSizeKB: {false, true},
		FileTrace: {true, false}, FileSavedCmdlines: {false, false},
	} {
		if Private(name) != want[0] || SizesBuffer(name) != want[1] {
			t.Errorf("%s: Private %v SizesBuffer %v, want %v", name, Private(name), SizesBuffer(name), want)
		}
	}
}

// tracing_cpumask reads whole or not at all, and a CPU out of it records
// nothing of user events.
func TestTracingCPUMask(t *testing.T) {
	e := newTraceEnv(t, new(uint64))
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "m u32 n", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.enable("m", true)
	e.write(FileTracingCPUMask, "2")
	h, err := e.s.FS().Open(FileTracingCPUMask, os.O_RDONLY, root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Read(make([]byte, 2)); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a 2-byte read of %q: %v, want EINVAL", "2\n", err)
	}
	for cpu := range 2 {
		if _, err := f.Writev(Writer{PID: 9, TGID: 9, Comm: "w", CPU: cpu}, le32(idx), le32(7)); err != nil {
			t.Fatal(err)
		}
	}
	if s0, s1 := e.read("per_cpu/cpu0/stats"), e.read("per_cpu/cpu1/stats"); !strings.HasPrefix(s0, "entries: 0\n") || !strings.HasPrefix(s1, "entries: 1\n") {
		t.Errorf("with mask 2: cpu0 %q, cpu1 %q", s0, s1)
	}
}
