package ftrace

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestDrop: records a producer dropped before they reached the buffer are
// counted in the CPU's "dropped events" and shown, where they happened, as
// "CPU:N [LOST n EVENTS]" before the next record written on that CPU — by
// trace_pipe and by the trace file's iterator alike. The kernel shows its
// dropped events in the stats only (see Ring.Drop).
func TestDrop(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 8})
	w := newWriter(t)
	r.Write(w.entry(0, 1000, 4))
	r.Drop(0, 3)
	r.Drop(2, 2) // CPU 2 of 2 counts on CPU 0, as Write's callers map it
	r.Write(w.entry(1, 1500, 4))
	r.Write(w.entry(0, 2000, 4))
	r.Write(w.entry(0, 3000, 4))
	r.Drop(1, 7) // nothing follows on CPU 1: shown at the end

	if got := r.Stats(0).DroppedEvents; got != 5 {
		t.Errorf("CPU 0 dropped events %d, want 5", got)
	}
	if got := r.Stats(1).DroppedEvents; got != 7 {
		t.Errorf("CPU 1 dropped events %d, want 7", got)
	}

	// The trace file: the iterator reports the drop on the entry after it.
	it := r.NewIter(-1)
	var e Entry
	var lost []uint64
	for {
		m, ok := it.Next(&e)
		if !ok {
			break
		}
		lost = append(lost, m.Lost)
	}
	it.Close()
	if want := []uint64{0, 0, 5, 0}; !slices.Equal(lost, want) {
		t.Errorf("iterator's lost marks %v, want %v", lost, want)
	}
	// The trace file ends with the drops no record follows.
	if tr := string(r.AppendTrace(nil, -1)); !strings.HasSuffix(tr, "\nCPU:1 [LOST 7 EVENTS]\n") || strings.Count(tr, "LOST") != 2 {
		t.Errorf("trace:\n%s", tr)
	}

	// trace_pipe prints it, and consuming takes it with the record.
	p, err := r.OpenPipe(-1, true)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf := make([]byte, 4096)
	n, err := p.Read(context.Background(), buf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(buf[:n])
	if want := "CPU:0 [LOST 5 EVENTS]\n"; !strings.Contains(text, want) {
		t.Errorf("trace_pipe text has no %q:\n%s", want, text)
	}
	if c := strings.Count(text, "LOST"); c != 2 || !strings.HasSuffix(text, "\nCPU:1 [LOST 7 EVENTS]\n") {
		t.Errorf("trace_pipe text has %d LOST lines, want 2, CPU 1's at the end:\n%s", c, text)
	}
	// trace_pipe consumed them: nothing is left to say.
	if n, err := p.Read(context.Background(), buf); err == nil {
		t.Errorf("a second read of the pipe: %q", buf[:n])
	}

	// A reset forgets the counts, as rb_reset_cpu does.
	r.Reset()
	if got := r.Stats(1).DroppedEvents; got != 0 {
		t.Errorf("after a reset CPU 1 dropped events %d, want 0", got)
	}
	r.Write(w.entry(1, 5000, 4))
	it = r.NewIter(-1)
	defer it.Close()
	if m, ok := it.Next(&e); !ok || m.Lost != 0 {
		t.Errorf("after a reset the first entry has marks %+v (ok %v), want none", m, ok)
	}
}
