package perfevent

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/perfdata"
)

var ne = binary.NativeEndian

// nextID numbers events, as the kernel's perf_event_id counter: ids are
// unique on the machine (well, in this process) and never reused.
var nextID atomic.Uint64

func init() { nextID.Store(1 << 32) } // far from any id the kernel's counter reaches soon

// Now is the clock of Event's time fields (nanoseconds): the caller's
// record clock, so that a sample's time and the event's times agree.
type Now func() uint64

// Event is one perf event of a uetrace tracepoint: its attr, count, times,
// state and ring. Its methods are safe for concurrent use.
type Event struct {
	Attr perfdata.Attr
	ID   uint64 // PERF_EVENT_IOC_ID, the samples' ID and STREAM_ID
	CPU  int    // the CPU it counts on, -1 for every CPU

	now  Now
	wake func() // pollers of the event, told that poll may answer otherwise

	mu         sync.Mutex
	memfd      int // the ring's memory, mapped by the caller through passthrough
	enabled    bool
	since      uint64 // when it was last enabled
	total      uint64 // enabled time before since
	count      uint64
	lostCount  uint64 // samples lost (PERF_FORMAT_LOST: event->lost_samples)
	periodLeft uint64
	ring       *ring  // its own, once mapped
	output     *Event // where its records go (PERF_EVENT_IOC_SET_OUTPUT); nil: its own ring
	inputs     int    // events whose output this one is
	hup        bool   // its task has exited
	closed     bool
	commSeen   map[uint32]string
}

// New makes an event of attr (checked by Check) counting on cpu (-1: all),
// with a memfd for its ring, which Memfd hands to whoever maps it. now is
// the clock; wake, if not nil, is called when poll's answer may have
// changed. The event starts enabled unless attr says disabled.
func New(attr perfdata.Attr, cpu int, now Now, wake func()) (*Event, error) {
	fd, err := unix.MemfdCreate("uetrace-perf-ring", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf event ring: memfd_create: %w", err)
	}
	e := &Event{Attr: attr, ID: nextID.Add(1), CPU: cpu, now: now, wake: wake, memfd: fd, periodLeft: attr.SamplePeriod}
	if e.wake == nil {
		e.wake = func() {}
	}
	if attr.Flags&perfdata.AttrDisabled == 0 {
		e.enabled, e.since = true, now()
	}
	return e, nil
}

// Memfd is the descriptor of the ring's memory (the event keeps it).
func (e *Event) Memfd() int { return e.memfd }

// Close frees the ring and the memfd; the event takes nothing after it.
func (e *Event) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	if e.ring != nil {
		e.ring.unmap()
		e.ring = nil
	}
	unix.Close(e.memfd)
	e.memfd = -1
	if e.output != nil {
		o := e.output
		e.output = nil
		// Lock order: an event before its output (never the reverse).
		o.mu.Lock()
		o.inputs--
		o.mu.Unlock()
	}
}

// Mmap sets the ring up for a mapping of length bytes at offset 0,
// writable or not (a ring mapped read-only is overwritten, its data_tail
// ignored, as perf_mmap makes it without VM_WRITE), as perf_mmap checks
// it: EINVAL for an offset (the AUX area), a length that is not one page
// and a power of two of pages, another length than the ring's, or an event
// whose records go to another's ring; EPERM beyond MaxRingBytes.
func (e *Event) Mmap(length int, offset int64, writable bool) error {
	page := os.Getpagesize()
	if offset != 0 {
		return fmt.Errorf("mmap at offset %d: uetrace's events have no AUX area: %w", offset, unix.EINVAL)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return fmt.Errorf("mmap: the event is closed: %w", unix.EBADF)
	case e.output != nil:
		return fmt.Errorf("mmap: the event's records go to another event's ring (PERF_EVENT_IOC_SET_OUTPUT): %w", unix.EINVAL)
	case e.ring != nil:
		if length != page+len(e.ring.data) {
			return fmt.Errorf("mmap of %d bytes: the ring is %d: %w", length, page+len(e.ring.data), unix.EINVAL)
		}
		return nil
	}
	wm := uint64(0)
	if e.Attr.Flags&perfdata.AttrWatermark != 0 {
		wm = uint64(e.Attr.Wakeup)
	}
	r, err := newRing(e.memfd, length, page, writable, wm)
	if err != nil {
		return err
	}
	e.ring = r
	e.updateUserpg()
	return nil
}

// Mapped reports whether the ring was set up (Mmap).
func (e *Event) Mapped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ring != nil
}

// times returns time_enabled and time_running; they are the same, as
// uetrace's events are never multiplexed off.
func (e *Event) times() uint64 {
	t := e.total
	if e.enabled {
		t += e.now() - e.since
	}
	return t
}

func (e *Event) updateUserpg() {
	if e.ring != nil {
		t := e.times()
		e.ring.setCounts(e.count, t, t)
	}
}

// Enable and Disable are PERF_EVENT_IOC_ENABLE and _DISABLE.
func (e *Event) Enable() {
	e.mu.Lock()
	if !e.enabled && !e.closed {
		e.enabled, e.since = true, e.now()
		e.updateUserpg()
	}
	e.mu.Unlock()
}

func (e *Event) Disable() {
	e.mu.Lock()
	if e.enabled {
		e.total += e.now() - e.since
		e.enabled = false
		e.updateUserpg()
	}
	e.mu.Unlock()
}

// Enabled reports whether the event counts.
func (e *Event) Enabled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.enabled
}

// Reset is PERF_EVENT_IOC_RESET: the count goes to 0 (perf_event_reset).
func (e *Event) Reset() {
	e.mu.Lock()
	e.count = 0
	e.updateUserpg()
	e.mu.Unlock()
}

// SetPeriod is PERF_EVENT_IOC_PERIOD (_perf_event_period): 0 or a value
// with bit 63 is EINVAL, as for an event that is not sampling.
func (e *Event) SetPeriod(v uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Attr.SamplePeriod == 0 {
		return fmt.Errorf("PERF_EVENT_IOC_PERIOD of a counting event: %w", unix.EINVAL)
	}
	if v == 0 || v&(1<<63) != 0 {
		return fmt.Errorf("PERF_EVENT_IOC_PERIOD %#x: %w", v, unix.EINVAL)
	}
	e.Attr.SamplePeriod = v
	e.periodLeft = v
	return nil
}

// PauseOutput is PERF_EVENT_IOC_PAUSE_OUTPUT: while paused, samples are
// lost (and counted). EINVAL without a ring.
func (e *Event) PauseOutput(pause bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ring == nil || len(e.ring.data) == 0 {
		return fmt.Errorf("PERF_EVENT_IOC_PAUSE_OUTPUT: the event has no ring: %w", unix.EINVAL)
	}
	e.ring.paused = pause
	return nil
}

// SetOutput is PERF_EVENT_IOC_SET_OUTPUT (perf_event_set_output): e's
// records go to o's ring from now on (nil: e's own). As the kernel, it is
// EINVAL to redirect to itself, to an event on another CPU, or to one
// that itself writes elsewhere, and EBUSY once e's own ring is mapped.
func (e *Event) SetOutput(o *Event) error {
	if o == e {
		return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT to itself: %w", unix.EINVAL)
	}
	if o != nil {
		o.mu.Lock()
		bad := o.output != nil || o.closed
		o.mu.Unlock()
		if bad {
			return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT to an event whose records go elsewhere: %w", unix.EINVAL)
		}
		if o.CPU != e.CPU && o.CPU != -1 {
			return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT to an event on CPU %d from one on CPU %d: %w", o.CPU, e.CPU, unix.EINVAL)
		}
		if o.Attr.Flags&perfdata.AttrUseClockID != e.Attr.Flags&perfdata.AttrUseClockID || o.Attr.ClockID != e.Attr.ClockID {
			return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT to an event of another clock: %w", unix.EINVAL)
		}
	}
	e.mu.Lock()
	if e.ring != nil || e.inputs > 0 {
		e.mu.Unlock()
		return fmt.Errorf("PERF_EVENT_IOC_SET_OUTPUT of an event whose ring is mapped or written by others: %w", unix.EBUSY)
	}
	old := e.output
	e.output = o
	e.mu.Unlock()
	if old != nil {
		old.mu.Lock()
		old.inputs--
		old.mu.Unlock()
	}
	if o != nil {
		o.mu.Lock()
		o.inputs++
		o.mu.Unlock()
	}
	return nil
}

// HangUp marks the event's task gone: poll answers POLLHUP from now on
// (is_event_hup).
func (e *Event) HangUp() {
	e.mu.Lock()
	e.hup = true
	e.mu.Unlock()
	e.wake()
}

// Poll is perf_poll: POLLHUP when the task is gone or there is no ring,
// else POLLIN once per wakeup (the pending wakeup is taken).
func (e *Event) Poll() uint32 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hup || e.closed {
		return unix.POLLHUP
	}
	r := e.ring
	if o := e.output; o != nil {
		o.mu.Lock() // an event before its output
		defer o.mu.Unlock()
		r = o.ring
	}
	if r == nil {
		return unix.POLLHUP
	}
	if r.poll {
		r.poll = false
		return unix.POLLIN
	}
	return 0
}

// Record is a tracepoint record to count and sample: the writer, where and
// when, and the raw record (the common header and the payload).
type Record struct {
	PID, TID uint32
	CPU      uint32
	Time     uint64
	Comm     string // the writer's name, for COMM records (attr.comm)
	Raw      []byte
}

// Add counts rec and, for a sampling event whose period has run out,
// writes its sample into the ring its records go to — with a
// PERF_RECORD_COMM of the thread first if the attr asks for COMM records
// and the ring's reader does not have the name yet, and a
// PERF_RECORD_LOST first if samples were lost since the last — or counts
// it lost when the ring is full, paused or not mapped yet.
func (e *Event) Add(rec *Record) {
	e.mu.Lock()
	if !e.enabled || e.closed {
		e.mu.Unlock()
		return
	}
	e.count++
	if e.Attr.SamplePeriod == 0 {
		e.mu.Unlock()
		return
	}
	if e.periodLeft > 1 {
		e.periodLeft--
		e.mu.Unlock()
		return
	}
	e.periodLeft = e.Attr.SamplePeriod
	o := e.output
	var woke bool
	if o == nil {
		woke = e.output1(e, rec)
		o = e
	} else {
		o.mu.Lock() // an event before its output
		woke = o.output1(e, rec)
		o.mu.Unlock()
	}
	e.mu.Unlock()
	if woke {
		o.wake()
		if o != e {
			e.wake() // its pollers poll the output's ring
		}
	}
}

// output1 writes src's sample of rec into e's ring (__perf_event_output),
// with src and e locked (src first, when they differ); it reports whether
// a wakeup is pending.
func (e *Event) output1(src *Event, rec *Record) bool {
	r := e.ring
	if r == nil || e.closed || len(r.data) == 0 {
		// No ring to write to: nothing is counted lost either
		// (__perf_output_begin's "if (!rb) goto out").
		return false
	}
	lost := func() bool {
		src.lostCount++
		r.lost++
		return false
	}
	if r.paused {
		return lost()
	}
	a := &src.Attr
	st := a.SampleType
	s := perfdata.Sample{Misc: perfdata.MiscKernel, ID: src.ID, PID: rec.PID, TID: rec.TID, Time: recordTime(a, rec.Time),
		StreamID: src.ID, CPU: rec.CPU, Period: a.SamplePeriod, Raw: rec.Raw}
	size := perfdata.SampleSize(st, len(rec.Raw))
	idAll := a.Flags&perfdata.AttrSampleIDAll != 0
	trailer := 0
	if idAll {
		trailer = perfdata.TrailerSize(st)
	}
	var comm string
	commSize := 0
	if a.Flags&perfdata.AttrComm != 0 {
		if name, ok := src.commSeen[rec.TID]; !ok || name != rec.Comm {
			comm = rec.Comm
			if len(comm) > 15 { // TASK_COMM_LEN less its NUL
				comm = comm[:15]
			}
			commSize = 8 + 8 + (len(comm)+1+7)&^7 + trailer
		}
	}
	lostSize := 0
	if r.lost > 0 {
		lostSize = 8 + 16 + trailer
	}
	if size > 0xffff || !r.space(lostSize+commSize+size) {
		return lost()
	}
	var buf [512]byte
	if lostSize > 0 {
		b := buf[:lostSize]
		perfdata.PutRecordHeader(b, perfdata.RecordLost, 0, lostSize)
		ne.PutUint64(b[8:], src.ID)
		ne.PutUint64(b[16:], r.lost)
		if idAll {
			perfdata.PutTrailer(b[24:], st, &s)
		}
		r.write(lostSize, b)
		r.lost = 0
	}
	if commSize > 0 {
		b := buf[:commSize]
		clear(b)
		perfdata.PutRecordHeader(b, perfdata.RecordComm, 0, commSize)
		ne.PutUint32(b[8:], rec.PID)
		ne.PutUint32(b[12:], rec.TID)
		copy(b[16:], comm)
		if idAll {
			perfdata.PutTrailer(b[commSize-trailer:], st, &s)
		}
		r.write(commSize, b)
		if src.commSeen == nil || len(src.commSeen) >= 4096 {
			// Bounded: forgetting costs only a name given again.
			src.commSeen = make(map[uint32]string)
		}
		src.commSeen[rec.TID] = rec.Comm
	}
	var sb []byte
	if size <= len(buf) {
		sb = buf[:size]
	} else {
		sb = make([]byte, size)
	}
	perfdata.PutSample(sb, st, &s)
	r.write(size, sb)
	// wakeup_events (without watermark): a wakeup every so many samples.
	if a.Flags&perfdata.AttrWatermark == 0 && a.Wakeup != 0 {
		r.events++
		if r.events >= int(a.Wakeup) {
			r.events -= int(a.Wakeup)
			r.poll = true
		}
	}
	r.publish()
	return r.poll
}

// recordTime is a record's time, CLOCK_MONOTONIC, in the clock the attr
// asks for (use_clockid): the other clock's offset from CLOCK_MONOTONIC
// now, added. Without use_clockid it stays CLOCK_MONOTONIC, where Linux
// gives perf_clock (local_clock, close to it but not the same).
func recordTime(a *perfdata.Attr, ts uint64) uint64 {
	if a.Flags&perfdata.AttrUseClockID == 0 || a.ClockID == unix.CLOCK_MONOTONIC {
		return ts
	}
	var c, m unix.Timespec
	if unix.ClockGettime(a.ClockID, &c) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &m) != nil {
		return ts
	}
	return ts + uint64(c.Nano()-m.Nano())
}

// ReadSize is how many bytes read(2) of the event gives (perf_read's
// event->read_size): EINVAL below that is ENOSPC, as the kernel's.
func (e *Event) ReadSize() int {
	rf := e.Attr.ReadFormat
	n := 8 // value
	if rf&perfdata.FormatGroup != 0 {
		n = 8 + 8 // nr, and the leader's value
	}
	for _, b := range []uint64{perfdata.FormatTotalTimeEnabled, perfdata.FormatTotalTimeRunning, perfdata.FormatID, perfdata.FormatLost} {
		if rf&b != 0 {
			n += 8
		}
	}
	return n
}

// Read is read(2) of the event (perf_read): its count in read_format — the
// value, time enabled and running, its id and the samples lost, as the
// format asks; a group of one (uetrace's events are never in a group of
// more) with FormatGroup. A buffer shorter than ReadSize is ENOSPC.
func (e *Event) Read(dst []byte) (int, error) {
	n := e.ReadSize()
	if len(dst) < n {
		return 0, fmt.Errorf("read of %d bytes: the event's read_format needs %d: %w", len(dst), n, unix.ENOSPC)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rf := e.Attr.ReadFormat
	t := e.times()
	b := dst[:0]
	if rf&perfdata.FormatGroup != 0 {
		b = ne.AppendUint64(b, 1)
	} else {
		b = ne.AppendUint64(b, e.count)
	}
	if rf&perfdata.FormatTotalTimeEnabled != 0 {
		b = ne.AppendUint64(b, t)
	}
	if rf&perfdata.FormatTotalTimeRunning != 0 {
		b = ne.AppendUint64(b, t)
	}
	if rf&perfdata.FormatGroup != 0 {
		b = ne.AppendUint64(b, e.count)
	}
	if rf&perfdata.FormatID != 0 {
		b = ne.AppendUint64(b, e.ID)
	}
	if rf&perfdata.FormatLost != 0 {
		b = ne.AppendUint64(b, e.lostCount)
	}
	return len(b), nil
}

// Counts returns the count and the samples lost, for tests and status.
func (e *Event) Counts() (count, lost uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count, e.lostCount
}
