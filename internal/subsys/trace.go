package subsys

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// traceBuffer is the ftrace consumer: the trace instance's ring buffer
// (internal/ftrace, which reproduces the kernel's pages and accounting) and
// the instance state user_events interacts with.
type traceBuffer struct {
	s    *Subsystem
	ring *ftrace.Ring

	// cpuMask is NumCPU-1 when the ring's CPU count is a power of two, so
	// that a writer's CPU is mapped onto it without a division (for such
	// counts cpu&mask is the non-negative remainder); -1 otherwise.
	cpuMask int

	// byID maps live type IDs to events, for printing: the kernel looks a
	// record's event up by common_type when it prints it, so records of a
	// deleted event print "Unknown type N", or as the event that took its
	// ID since.
	byID sync.Map // int → *Event

	// clearArmed is the trace array's clear_trace (under s.mu): set when an
	// event that was ever enabled is removed; the next dynamic_events delete
	// or truncate then empties the buffer (tracing_reset_all_online_cpus).
	clearArmed bool

	// The instance's settings (options.go): trace_clock's clock, by its
	// index in traceClocks; the nop tracer's test_nop_accept; and
	// buffer_percent.
	clock     atomic.Int32
	nopAccept atomic.Bool
	percent   bufferPercent
}

func newTraceBuffer(s *Subsystem) *traceBuffer {
	t := &traceBuffer{s: s}
	t.ring = ftrace.New(ftrace.Config{
		NCPU:     s.opts.NumCPU,
		BufferKB: s.opts.BufferKB,
		Clock:    s.opts.Clock,
		Lookup: func(typ uint16) (*eventdef.Event, string, bool) {
			v, ok := t.byID.Load(int(typ))
			if !ok {
				return nil, "", false
			}
			ev := v.(*Event)
			return ev.def, ev.tp, true
		},
	})
	t.cpuMask = -1
	if n := t.ring.NumCPU(); n&(n-1) == 0 {
		t.cpuMask = n - 1
	}
	t.percent.v.Store(50)
	return t
}

// write records one write of an event whose ftrace probe is registered
// (user_event_ftrace). The CPU is taken modulo the buffer's CPUs.
func (t *traceBuffer) write(ev *Event, w *Writer, ts uint64, rec []byte) {
	e := ftrace.Entry{TS: ts, CPU: t.cpu(w.CPU), PID: w.PID, TGID: w.TGID, Comm: w.Comm, Event: ev.def, Tracepoint: ev.tp, Record: rec}
	t.ring.Write(&e)
}

// cpu maps a writer's CPU onto the buffer's.
func (t *traceBuffer) cpu(cpu int) int {
	if t.cpuMask >= 0 {
		return cpu & t.cpuMask
	}
	if n := t.ring.NumCPU(); cpu < 0 || cpu >= n {
		cpu = (cpu%n + n) % n
	}
	return cpu
}

// bufferedEventMax is the longest record trace_event_buffer_lock_reserve
// assembles in the per-CPU trace_buffered_event page for a filtered event:
// PAGE_SIZE less a struct ring_buffer_event with its length word.
const bufferedEventMax = ftrace.PageSize - 8

// takes reports whether user_event_ftrace gets room for a record of n
// bytes, header included, written on cpu, and so copies and validates it:
// a filtered event's record is assembled in trace_buffered_event when it
// fits there (bufferedEventMax), whatever tracing_on and tracing_cpumask
// say, and is filtered before the buffer sees it; any other is reserved in
// the buffer, which refuses it while tracing is off, when the CPU is out of
// tracing_cpumask, or when it is over a page (ftrace.MaxRecordSize).
func (t *traceBuffer) takes(n int, filtered bool, cpu int) bool {
	if filtered && n <= bufferedEventMax {
		return true
	}
	return n <= ftrace.MaxRecordSize && t.tracingOn() && t.ring.Traced(t.cpu(cpu))
}

// tooLarge reports whether the buffer drops a record of n bytes for its
// size, which the event's dropped count counts: over a page, tracing on (a
// record written while tracing is off is not lost, it was not wanted).
func (t *traceBuffer) tooLarge(n int) bool { return n > ftrace.MaxRecordSize && t.tracingOn() }

// reserve is the kernel's trace_event_buffer_reserve for a record of n
// bytes written by w at ts: the record is to be assembled straight in the
// buffer, then committed with commit. False when it cannot (see
// ftrace.Ring.Reserve): write then.
func (t *traceBuffer) reserve(res *ftrace.Reservation, w *Writer, ts uint64, n int) bool {
	return t.ring.Reserve(res, t.cpu(w.CPU), ts, n)
}

// commit stores the record reserve reserved, a write of ev by w.
func commit(res *ftrace.Reservation, ev *Event, w *Writer) {
	res.Commit(w.PID, w.TGID, w.Comm, ev.def, ev.tp)
}

// added and removed keep the ID map. Called with s.mu held.
func (t *traceBuffer) added(ev *Event) { t.byID.Store(ev.id, ev) }

func (t *traceBuffer) removed(ev *Event) {
	t.byID.Delete(ev.id)
	if ev.wasEnabled {
		t.clearArmed = true
	}
}

// resetIfArmed is tracing_reset_all_online_cpus: it empties the buffer if an
// event that was enabled has been removed since. Called with s.mu held.
func (t *traceBuffer) resetIfArmed() {
	if t.clearArmed {
		t.clearArmed = false
		t.ring.Reset()
	}
}

func (t *traceBuffer) reset()               { t.ring.Reset() }
func (t *traceBuffer) tracingOn() bool      { return t.ring.TracingOn() }
func (t *traceBuffer) setTracingOn(on bool) { t.ring.SetTracingOn(on) }

// resize is a write to buffer_size_kb (cpu < 0) or to a CPU's in
// per_cpu; sizes over Options.MaxBufferKB are ENOMEM, as an allocation the
// kernel cannot make.
func (t *traceBuffer) resize(cpu, kb int) error {
	if kb > t.s.opts.MaxBufferKB {
		return fmt.Errorf("buffer_size_kb %d is over this subsystem's limit of %d: %w", kb, t.s.opts.MaxBufferKB, unix.ENOMEM)
	}
	if cpu >= 0 {
		return t.ring.ResizeCPU(cpu, kb)
	}
	return t.ring.Resize(kb)
}

// appendTrace appends the text of the trace file.
func (t *traceBuffer) appendTrace(dst []byte) []byte { return t.ring.AppendTrace(dst, -1) }
