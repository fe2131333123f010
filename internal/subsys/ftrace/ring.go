package ftrace

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/stamp"
)

// Entry is one record in the trace buffer with what is needed to print it.
type Entry struct {
	// TS is the time stamp in nanoseconds of the trace clock ("local":
	// since boot).
	TS uint64
	// CPU is the per-CPU buffer the record is in.
	CPU int
	// PID is the kernel's common_pid: the id of the thread that wrote the
	// record. The trace prints this, not the pid in the record's header.
	PID int32
	// TGID is the writer's process id, which saved_tgids shows with the
	// record-tgid option (0: not known, not saved). Entries read from a
	// Ring leave it 0.
	TGID int32
	// Comm is the writing task's name ("" prints as "<...>").
	Comm string
	// Event decodes the record; nil prints "Unknown type <common_type>".
	Event *eventdef.Event
	// Tracepoint is the name the line shows before the fields.
	Tracepoint string
	// Record is the 8-byte struct trace_entry header (common_type,
	// common_flags, common_preempt_count, common_pid) and the payload.
	// The line's latency flags come from its bytes 2 and 3.
	// Entries read from a Ring own their Record: its backing array is
	// reused by the next read into the same Entry.
	Record []byte
}

// Config describes a Ring.
type Config struct {
	// NCPU is the number of per-CPU buffers (at least 1).
	NCPU int
	// BufferKB is each CPU's buffer_size_kb. 0 gives the boot-time,
	// unexpanded buffer of MinPages pages, which [Ring.Expand] grows to
	// DefaultBufferKB.
	BufferKB int
	// Clock returns the trace clock in nanoseconds, for [Ring.WriteNow]
	// and the stats' "now ts". Nil means LocalClock.
	Clock func() uint64
	// Lookup, when set, is asked for the event of each record read, by
	// its common_type, as the kernel looks events up when it prints: a
	// record whose type is not found prints "Unknown type N", and one
	// whose type id was given to a new event prints as that event. When
	// Lookup is nil the Event and Tracepoint a record was written with are
	// used, so records of deleted events still print as written.
	Lookup func(typ uint16) (ev *eventdef.Event, tracepoint string, ok bool)
}

// Ring is the trace buffer of one trace instance: a ring buffer per CPU,
// in overwrite mode, with the kernel's page layout and accounting.
// All methods are safe for concurrent use.
type Ring struct {
	cpus   []*cpuBuffer
	off    atomic.Bool // tracing_on is 0
	clock  func() uint64
	lookup func(uint16) (*eventdef.Event, string, bool)

	sizeMu   sync.Mutex // resizes and the expanded flag
	expanded bool

	consumeMu sync.Mutex // one consumer at a time (trace_access_lock)

	pipeMu  sync.Mutex // open trace_pipe files (tr->pipe_cpumask)
	pipeAll bool
	pipeCPU []bool

	tasks *tasks // saved_cmdlines, saved_tgids

	waiters atomic.Int32
	wakeMu  sync.Mutex
	wake    chan struct{}
}

// New returns an empty Ring with tracing on.
func New(cfg Config) *Ring {
	if cfg.NCPU < 1 {
		panic("ftrace: Config.NCPU < 1")
	}
	n := MinPages
	if cfg.BufferKB > 0 {
		n = PagesFor(cfg.BufferKB)
	}
	r := &Ring{
		cpus:     make([]*cpuBuffer, cfg.NCPU),
		clock:    cfg.Clock,
		lookup:   cfg.Lookup,
		expanded: cfg.BufferKB > 0,
		pipeCPU:  make([]bool, cfg.NCPU),
		tasks:    newTasks(),
	}
	if r.clock == nil {
		r.clock = LocalClock
	}
	for i := range r.cpus {
		r.cpus[i] = newCPUBuffer(i, n, r.tasks)
	}
	return r
}

// LocalClock approximates the kernel's "local" trace clock (sched_clock,
// nanoseconds since boot) with CLOCK_MONOTONIC itself (stamp.Now), the
// clock clients stamp their records with, so that both sort together.
func LocalClock() uint64 { return stamp.Now() }

// NumCPU returns the number of per-CPU buffers.
func (r *Ring) NumCPU() int { return len(r.cpus) }

// Now reads the Ring's clock.
func (r *Ring) Now() uint64 { return r.clock() }

// SetTracingOn sets tracing_on. While it is off, writes are dropped and
// not counted anywhere. Turning it off wakes blocked trace_pipe readers,
// which return end of file once they have read something and the buffer
// is empty (rb_simple_write, tracing_wait_pipe).
func (r *Ring) SetTracingOn(on bool) {
	if r.off.Swap(!on) == !on {
		return
	}
	if !on {
		r.wakeAll()
	}
}

// TracingOn reports tracing_on.
func (r *Ring) TracingOn() bool { return !r.off.Load() }

// Write copies e.Record into e.CPU's buffer at time e.TS and reports
// whether it was recorded. A record is dropped, silently and without being
// counted, when tracing is off, when it is longer than MaxRecordSize (it
// cannot fit in a sub-buffer), when e.CPU is not a CPU of the Ring, or
// when it is out of the CPU mask (SetCPUMask). The writer is saved for
// saved_cmdlines (and saved_tgids) when it is not the CPU's last.
//
// Time stamps should not go backwards on a CPU; when one does, the
// record is stored with the time of the one before it on its page, as the
// kernel does when its clock goes backwards. Write allocates only the
// first time a sub-buffer holds more than 16 records (it then keeps the
// room).
func (r *Ring) Write(e *Entry) bool {
	if r.off.Load() || len(e.Record) > MaxRecordSize || uint(e.CPU) >= uint(len(r.cpus)) {
		return false
	}
	c := r.cpus[e.CPU]
	c.mu.Lock()
	if c.disabled.Load() {
		c.mu.Unlock()
		return false
	}
	c.write(e)
	c.mu.Unlock()
	if r.waiters.Load() != 0 {
		r.wakeAll()
	}
	return true
}

// Reservation is room for one record in a CPU's buffer, that buffer
// locked: Reserve fills it in, and its Commit or Discard must end it,
// soon and on the same goroutine — nothing else can write to or read from
// the CPU's buffer in between.
type Reservation struct {
	// Record is the record's bytes in the buffer, for the caller to
	// fill: the 8-byte header and the payload, as Entry.Record holds them.
	Record []byte

	r  *Ring
	c  *cpuBuffer
	ts uint64
	s  spot
}

// Reserve is the first half of Write for a record of n bytes written on
// cpu at time ts that is still to be assembled, as the kernel's
// trace_event_buffer_reserve: it locks cpu's buffer and sets res to the
// room the record takes there, for the caller to fill and then Commit,
// which stores it as Write would have stored it — or Discard, which
// leaves the buffer as it was.
//
// Unlike the kernel, Reserve never moves the writer to the next
// sub-buffer, which would overwrite the oldest one and could not be
// undone: when the record does not fit on the sub-buffer being written,
// it returns false, as it does when Write would drop the record (tracing
// off, n over MaxRecordSize, cpu not a CPU of the Ring or out of the CPU
// mask); the caller then writes the record with Write.
func (r *Ring) Reserve(res *Reservation, cpu int, ts uint64, n int) bool {
	if r.off.Load() || n > MaxRecordSize || uint(cpu) >= uint(len(r.cpus)) {
		return false
	}
	c := r.cpus[cpu]
	c.mu.Lock()
	if c.disabled.Load() || !c.place(&res.s, ts, n) {
		c.mu.Unlock()
		return false
	}
	res.r, res.c, res.ts = r, c, ts
	h := res.s.h
	res.Record = res.s.tp.data[h : h+n : h+n]
	return true
}

// Commit stores the reserved record as written by thread pid of process
// tgid named comm, decoded by ev and printed as tracepoint (Entry's PID,
// TGID, Comm, Event and Tracepoint), and unlocks its CPU's buffer.
func (res *Reservation) Commit(pid, tgid int32, comm string, ev *eventdef.Event, tracepoint string) {
	res.c.commit(&res.s, res.ts, len(res.Record), pid, tgid, comm, ev, tracepoint)
	res.c.mu.Unlock()
	if res.r.waiters.Load() != 0 {
		res.r.wakeAll()
	}
}

// Discard unlocks the reserved record's CPU's buffer without storing it:
// the buffer is as it was before Reserve (the bytes written into Record
// lie past the end of what it holds, where nothing reads).
func (res *Reservation) Discard() {
	res.c.mu.Unlock()
}

// WriteNow is Write with e.TS set from the Ring's clock while the CPU's
// buffer is locked, so that time stamps never go backwards on a CPU, as
// in the kernel, which reads its clock when it reserves the space.
func (r *Ring) WriteNow(e *Entry) bool {
	if r.off.Load() || len(e.Record) > MaxRecordSize || uint(e.CPU) >= uint(len(r.cpus)) {
		return false
	}
	c := r.cpus[e.CPU]
	c.mu.Lock()
	if c.disabled.Load() {
		c.mu.Unlock()
		return false
	}
	e.TS = r.clock()
	c.write(e)
	c.mu.Unlock()
	if r.waiters.Load() != 0 {
		r.wakeAll()
	}
	return true
}

// Drop counts n records written on cpu that never reached the buffer:
// the daemon's producers dropped them, their shared ring full (see
// daemon). The kernel's counterpart is a ring buffer in non-overwrite
// mode, full: it drops the new record and counts it in "dropped events"
// of per_cpu/cpuN/stats, as Stats does here. Unlike the kernel, which
// shows such drops nowhere else, trace and trace_pipe then print
// "CPU:N [LOST n EVENTS]" before the next record written on cpu, where
// the loss happened — or at the end of the text while no record follows
// (trace_pipe then consumes the line): a reader of the text alone must
// see that records are missing. A cpu the Ring does not have counts on cpu mod NumCPU, as
// Write's callers map it.
func (r *Ring) Drop(cpu int, n uint64) {
	if n == 0 {
		return
	}
	nc := len(r.cpus)
	c := r.cpus[(cpu%nc+nc)%nc]
	c.mu.Lock()
	// Saturating: n is a client's number (the daemon bounds it), and no
	// claim may wrap the count below what others dropped.
	c.dropped = min(c.dropped, math.MaxUint64-n) + n
	c.dropPending = min(c.dropPending, math.MaxUint64-n) + n
	c.mu.Unlock()
	if r.waiters.Load() != 0 {
		r.wakeAll()
	}
}

// appendDropsAfter appends a "CPU:N [LOST n EVENTS]" line for each CPU
// (cpu < 0) or for cpu whose drops no record written since carries: the
// drops after the last record, which the text shows at its end. consume
// clears them (trace_pipe); the trace file leaves them for the record
// that may follow.
func (r *Ring) appendDropsAfter(dst []byte, cpu int, consume bool) []byte {
	for i, c := range r.cpus {
		if cpu >= 0 && i != cpu {
			continue
		}
		c.mu.Lock()
		n := c.dropPending
		if consume {
			c.dropPending = 0
		}
		c.mu.Unlock()
		if n != 0 {
			dst = AppendLost(dst, i, n)
		}
	}
	return dst
}

// dropsAfter reports whether a CPU (cpu < 0) or cpu has drops that no
// record carries yet.
func (r *Ring) dropsAfter(cpu int) bool {
	for i, c := range r.cpus {
		if cpu >= 0 && i != cpu {
			continue
		}
		c.mu.Lock()
		n := c.dropPending
		c.mu.Unlock()
		if n != 0 {
			return true
		}
	}
	return false
}

// Reset empties every CPU's buffer and zeroes its counts: what opening
// trace with O_TRUNC does (tracing_reset_online_cpus). Iterators and
// trace_pipe readers that are open carry on from the empty buffer.
func (r *Ring) Reset() {
	for i := range r.cpus {
		r.ResetCPU(i)
	}
}

// ResetCPU empties one CPU's buffer: an O_TRUNC open of
// per_cpu/cpuN/trace.
func (r *Ring) ResetCPU(cpu int) {
	c := r.cpus[cpu]
	c.mu.Lock()
	c.reset()
	c.mu.Unlock()
}

// Entries returns what the trace header shows (get_total_entries): the
// records in the buffers, summed over the CPUs, and those plus the
// records lost to overwrite. Records consumed through trace_pipe count in
// neither, and neither do records that were dropped.
func (r *Ring) Entries() (inBuffer, written uint64) {
	for _, c := range r.cpus {
		c.mu.Lock()
		n := c.numEntries()
		inBuffer += n
		written += n + c.overrun
		c.mu.Unlock()
	}
	return inBuffer, written
}

// Overruns returns the records lost to overwrite, summed over the CPUs
// (ring_buffer_overruns).
func (r *Ring) Overruns() uint64 {
	var n uint64
	for _, c := range r.cpus {
		c.mu.Lock()
		n += c.overrun
		c.mu.Unlock()
	}
	return n
}

// Expand grows the buffers to DefaultBufferKB per CPU unless they have
// been expanded or resized before (tracing_update_buffers, which enabling
// an event runs). Like a resize it fails with EBUSY while an Iter is open.
func (r *Ring) Expand() error {
	r.sizeMu.Lock()
	expanded := r.expanded
	r.sizeMu.Unlock()
	if expanded {
		return nil
	}
	return r.resize(-1, DefaultBufferKB)
}

// Expanded reports whether the buffers have been expanded or resized.
func (r *Ring) Expanded() bool {
	r.sizeMu.Lock()
	defer r.sizeMu.Unlock()
	return r.expanded
}

// Resize sets every CPU's buffer to kb KiB (a write to buffer_size_kb):
// PagesFor(kb) sub-buffers. Pages are added in front of the oldest data;
// pages are taken away starting with the oldest data, whose records count
// as overruns (rb_update_pages). Records in the buffer otherwise stay.
// Errors: EINVAL for kb < 1; EBUSY while an Iter is open.
func (r *Ring) Resize(kb int) error { return r.resize(-1, kb) }

// ResizeCPU sets one CPU's buffer size: a write to
// per_cpu/cpuN/buffer_size_kb.
func (r *Ring) ResizeCPU(cpu, kb int) error {
	if uint(cpu) >= uint(len(r.cpus)) {
		return fmt.Errorf("resize cpu %d: %w", cpu, unix.EINVAL)
	}
	return r.resize(cpu, kb)
}

func (r *Ring) resize(cpu, kb int) error {
	if kb < 1 {
		return fmt.Errorf("buffer_size_kb %d: %w", kb, unix.EINVAL)
	}
	// The kernel shifts the KiB value left by 10 in an unsigned long;
	// keep the arithmetic in range.
	if kb > 1<<40 {
		return fmt.Errorf("buffer_size_kb %d: %w", kb, unix.ENOMEM)
	}
	r.sizeMu.Lock()
	defer r.sizeMu.Unlock()
	r.expanded = true
	n := PagesFor(kb)
	cs := r.cpus
	if cpu >= 0 {
		cs = cs[cpu : cpu+1]
	}
	for _, c := range cs {
		c.mu.Lock()
	}
	defer func() {
		for _, c := range cs {
			c.mu.Unlock()
		}
	}()
	for _, c := range cs {
		if c.iters > 0 {
			return fmt.Errorf("buffer_size_kb: trace is open: %w", unix.EBUSY)
		}
	}
	for _, c := range cs {
		c.resize(n)
	}
	return nil
}

// Pages returns the number of sub-buffers in cpu's ring.
func (r *Ring) Pages(cpu int) int {
	c := r.cpus[cpu]
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nrPages
}

// AppendBufferSizeKB appends the text of buffer_size_kb (cpu < 0) or of
// per_cpu/cpuN/buffer_size_kb (tracing_entries_read): the size in KiB of
// the pages' capacity, rounded down ("1410" for the default), "X" when the
// CPUs' sizes differ, and "7 (expanded: 1408)" before the buffers are
// expanded.
func (r *Ring) AppendBufferSizeKB(dst []byte, cpu int) []byte {
	r.sizeMu.Lock()
	expanded := r.expanded
	r.sizeMu.Unlock()
	if cpu >= 0 {
		dst = strconv.AppendInt(dst, int64(r.Pages(cpu)*PageCapacity>>10), 10)
		return append(dst, '\n')
	}
	size := r.Pages(0)
	for i := 1; i < len(r.cpus); i++ {
		if r.Pages(i) != size {
			return append(dst, "X\n"...)
		}
	}
	dst = strconv.AppendInt(dst, int64(size*PageCapacity>>10), 10)
	if !expanded {
		dst = append(dst, " (expanded: "...)
		dst = strconv.AppendInt(dst, DefaultBufferKB, 10)
		dst = append(dst, ')')
	}
	return append(dst, '\n')
}

// AppendBufferTotalSizeKB appends the text of buffer_total_size_kb
// (tracing_total_entries_read).
func (r *Ring) AppendBufferTotalSizeKB(dst []byte) []byte {
	r.sizeMu.Lock()
	expanded := r.expanded
	r.sizeMu.Unlock()
	total := 0
	for i := range r.cpus {
		total += r.Pages(i) * PageCapacity >> 10
	}
	dst = strconv.AppendInt(dst, int64(total), 10)
	if !expanded {
		dst = append(dst, " (expanded: "...)
		dst = strconv.AppendInt(dst, int64(DefaultBufferKB*len(r.cpus)), 10)
		dst = append(dst, ')')
	}
	return append(dst, '\n')
}

// Stats are the counts of per_cpu/cpuN/stats.
type Stats struct {
	Entries       uint64 // records in the buffer
	Overrun       uint64 // records lost to overwrite
	CommitOverrun uint64 // always 0: there are no nested writes
	Bytes         uint64 // bytes of events in the buffer, padding and time extends included
	OldestTS      uint64 // time stamp of the head page (of the reader page when the writer is on it), even when it holds nothing any more
	NowTS         uint64 // the clock when the stats were taken
	DroppedEvents uint64 // records that never reached the buffer (Drop)
	ReadEvents    uint64 // records consumed
}

// Stats returns cpu's counts.
func (r *Ring) Stats(cpu int) Stats {
	c := r.cpus[cpu]
	c.mu.Lock()
	s := Stats{
		Entries:       c.numEntries(),
		Overrun:       c.overrun,
		Bytes:         c.entriesBytes - c.readBytes,
		OldestTS:      c.oldestTS(),
		ReadEvents:    c.read,
		DroppedEvents: c.dropped,
	}
	c.mu.Unlock()
	s.NowTS = r.clock()
	return s
}

// AppendStats appends the text of per_cpu/cpuN/stats (tracing_stats_read)
// for a clock counting nanoseconds.
func AppendStats(dst []byte, s Stats) []byte {
	line := func(dst []byte, name string, v uint64) []byte {
		dst = append(dst, name...)
		dst = strconv.AppendUint(dst, v, 10)
		return append(dst, '\n')
	}
	ts := func(dst []byte, name string, ns uint64) []byte {
		dst = append(dst, name...)
		t := (ns + 500) / 1000
		dst = appendPadded(dst, t/1000000, 5, ' ')
		dst = append(dst, '.')
		dst = appendPadded(dst, t%1000000, 6, '0')
		return append(dst, '\n')
	}
	dst = line(dst, "entries: ", s.Entries)
	dst = line(dst, "overrun: ", s.Overrun)
	dst = line(dst, "commit overrun: ", s.CommitOverrun)
	dst = line(dst, "bytes: ", s.Bytes)
	dst = ts(dst, "oldest event ts: ", s.OldestTS)
	dst = ts(dst, "now ts: ", s.NowTS)
	dst = line(dst, "dropped events: ", s.DroppedEvents)
	return line(dst, "read events: ", s.ReadEvents)
}

// fill copies slot s of page p into e.
func (r *Ring) fill(e *Entry, cpu int, p *page, s *slot) {
	e.TS = s.ts
	e.CPU = cpu
	e.PID = s.pid
	e.Comm = s.comm
	e.Record = append(e.Record[:0], s.record(p)...)
	e.Event, e.Tracepoint = s.ev, s.tp
	if r.lookup != nil {
		ev, tp, ok := r.lookup(RecordType(e.Record))
		if !ok {
			ev, tp = nil, ""
		}
		e.Event, e.Tracepoint = ev, tp
	}
}

func (r *Ring) wakeAll() {
	r.wakeMu.Lock()
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	r.wakeMu.Unlock()
}

func (r *Ring) waitChan() chan struct{} {
	r.wakeMu.Lock()
	defer r.wakeMu.Unlock()
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return r.wake
}
