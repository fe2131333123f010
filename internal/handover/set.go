package handover

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// Event is a write index of a handed set.
type Event struct {
	// SampleID is the session's sample id of the event (wire.SampleID of
	// its type id), or 0 when nothing consumes it: its records are counted
	// disabled, as a write's EBADF.
	SampleID uint64
	// Def is the event's definition, which checks its records' sizes and
	// __data_locs.
	Def *eventdef.Event
}

// Grant is a ring set the daemon handed to the session's reader: the
// body of its message (wire.HandOver; GrantOf), the event definitions
// parsed.
type Grant struct {
	ID    uint64 // the daemon's name of the hand-over
	Rings int    // R: the set's rings
	PID   int32  // the producer's process, as the daemon sees it
	Comm  string // its name, for PERF_RECORD_COMM
	// LossSince and LossClaimed are the set's loss budget so far: when it
	// was shared, and what its loss records claimed, as cut. Each ring's
	// budget goes on from them (ringcheck.NewLossBudget), so that handing
	// a set over gives its producer no new claims.
	LossSince   time.Time
	LossClaimed uint64
	Events      []Event // by write index
}

// GrantOf is the Grant of a hand-over message: each event's command
// parsed as the daemon parsed it (EPROTO if one does not parse: the
// daemon wrote it from a definition it holds).
func GrantOf(h *wire.HandOver) (Grant, error) {
	g := Grant{
		ID: h.ID, Rings: h.Rings, PID: h.PID, Comm: h.Comm,
		LossSince:   time.Now().Add(-time.Duration(min(h.LossAge, math.MaxInt64))),
		LossClaimed: h.LossClaimed,
		Events:      make([]Event, len(h.Events)),
	}
	for i, e := range h.Events {
		def, err := eventdef.Parse(e.Command)
		if err != nil {
			return Grant{}, fmt.Errorf("hand-over %d: write index %d: %q: %v: %w", h.ID, i, e.Command, err, unix.EPROTO)
		}
		g.Events[i] = Event{SampleID: e.SampleID, Def: def}
	}
	return g, nil
}

// maxSampleID is the largest sample id: that of type id 65535, the most a
// raw record's u16 type field holds.
const maxSampleID = 1 << 16

// A Set is a handed ring set as its reader reads it: ring k is read by
// Pass(k) from one goroutine — the one that owns the Stream of index k —
// and the rings of a set may be read by R goroutines at once.
type Set struct {
	tgid   int32
	comm   string
	events []setEvent
	ctl    *Control
	rings  []ring
}

// setEvent is an Event as a pass uses it.
type setEvent struct {
	id     uint64 // sample id; 0: nothing consumes it
	typeID int    // wire.TypeID(id): the raw record's type field
	def    *eventdef.Event
}

// ring is ring k of the set and what its reader keeps of it between
// passes, as a drainer keeps its ringSource.
type ring struct {
	k       int // its index in the set
	cons    *shmring.Consumer
	gone    bool              // taken back: Pass is not called again
	threads ringcheck.Threads // the records' thread ids
	budget  ringcheck.LossBudget
	// waiting are the loss records read and waiting for the ring's next
	// record, on whose CPU they are told (at most ringcheck.MaxLosses);
	// saved are those waiting before the pass in progress.
	waiting []loss
	saved   [ringcheck.MaxLosses]loss
	nsave   int
	// run is the pass's run of samples delivered of one write index,
	// told to the control's tally when another index's comes, and at
	// the pass's end: the records of a pass are mostly of one event.
	run struct {
		idx int
		n   uint64
	}
	_ [64]byte // ring k+1's reader on a line of its own
}

// loss is a loss record waiting for the ring's next record (the drainer's
// loss): n records of write index idx lost, as cut, stamped time on cpu.
type loss struct {
	time uint64
	n    uint64
	idx  uint32
	cpu  int32
}

// OpenSet maps the set g describes for reading: memfd is the producer's
// ring set (mapped as the daemon maps it, its header writable for the
// tail and the sleeping word), ctlfd the control memfd; both are checked
// as hostile (their sizes and seals). The mappings do not keep the
// descriptors, which the caller closes (and the set's wake eventfd, which
// it sleeps on). Each ring is the daemon's until it gives it: Pass finds
// out.
func OpenSet(g Grant, memfd, ctlfd int) (*Set, error) {
	if g.PID <= 0 {
		return nil, fmt.Errorf("hand-over %d: producer pid %d: %w", g.ID, g.PID, unix.EINVAL)
	}
	if len(g.Events) > MaxCountedEvents {
		return nil, fmt.Errorf("hand-over %d: %d write indices, over the %d a handed set may have: %w", g.ID, len(g.Events), MaxCountedEvents, unix.EINVAL)
	}
	s := &Set{tgid: g.PID, comm: g.Comm, events: make([]setEvent, len(g.Events))}
	for i, e := range g.Events {
		if e.Def == nil || e.SampleID > maxSampleID {
			return nil, fmt.Errorf("hand-over %d: write index %d: sample id %d, definition %v: %w", g.ID, i, e.SampleID, e.Def != nil, unix.EINVAL)
		}
		s.events[i] = setEvent{id: e.SampleID, typeID: wire.TypeID(e.SampleID), def: e.Def}
	}
	cons, err := shmring.AttachSet(memfd, g.Rings)
	if err != nil {
		return nil, fmt.Errorf("hand-over %d: %w", g.ID, err)
	}
	ctl, err := AttachControl(ctlfd, g.Rings)
	if err != nil {
		for _, c := range cons {
			c.Close()
		}
		return nil, fmt.Errorf("hand-over %d: %w", g.ID, err)
	}
	s.ctl = ctl
	s.rings = make([]ring, len(cons))
	for k, c := range cons {
		r := &s.rings[k]
		r.k = k
		// The tail is published only once a pass's output is the
		// reader's (see Pass).
		c.DeferPublish()
		r.cons = c
		r.threads.Init(g.PID)
		r.budget = ringcheck.NewLossBudget(g.LossSince, g.LossClaimed)
	}
	return s, nil
}

// Rings is the set's number of rings.
func (s *Set) Rings() int { return len(s.rings) }

// Size is each ring's data size.
func (s *Set) Size() int { return s.rings[0].cons.Size() }

// Pass reads up to most records of ring k into out — the output of ring
// index k — as the daemon's drainer would deliver them into the session's
// stream k (see the package doc), and commits them: it returns how many
// records the ring gave (delivered, rejected, disabled, voided, loss
// records alike). gone says the daemon has ring k (it took it back, or
// never gave it): the caller stops calling Pass for it. A pass the daemon
// forced the ring back during is discarded — out is as it was before it,
// but for the names it gave, forgotten — and reports gone. Each call does
// bounded work: at most most records, and one ring's worth of bytes
// skipped (shmring.Consumer.PeekMax).
func (s *Set) Pass(k int, out *Stream, most int) (n int, gone bool) {
	r := &s.rings[k]
	if r.gone {
		return 0, true
	}
	tail, ok := s.ctl.Begin(k)
	if !ok {
		s.drop(r, out)
		return 0, true
	}
	cons := r.cons
	if tail != cons.Tail() {
		// The first pass, or a ring given again: go on where the daemon
		// says. A tail that is no record's position delivers nothing.
		cons.Resume(tail)
	}
	st0, forged0, unchecked0 := cons.Stats(), r.threads.Forged(), r.threads.Unchecked()
	out.begin()
	r.nsave = copy(r.saved[:], r.waiting)
	var c Counts
	// The clock a record may not be stamped after (the drainer's merge):
	// read at the pass's start, and again for a record later than it.
	now := stamp.Now()
	for n < most {
		v, err := cons.PeekMax(ringcheck.MaxRecord)
		if err != nil {
			// Empty: no record follows the loss records yet, and they are
			// told on their own CPUs. Not committed yet (a record
			// reserved), they wait for it, as in the drainer.
			if len(r.waiting) > 0 && cons.Pending() == 0 {
				s.applyLosses(r, out, -1)
			}
			break
		}
		if v.Time > now {
			// Stamped after the clock was last read — or later than any
			// clock could say: a record is stamped before it is
			// published. The clock read again serves the records that
			// follow, which a producer writing during the pass stamps
			// later than its start.
			if now = stamp.Now(); v.Time > now {
				v.Time = now
				c.Future++
			}
		}
		s.deliver(r, &v, out, &c)
		cons.Advance(&v)
		n++
	}
	s.tallyRun(r)
	st := cons.Stats()
	c.Torn, c.TooLong = st.Torn-st0.Torn, st.TooLong-st0.TooLong
	c.Discarded, c.BadHead = st.Discarded-st0.Discarded, st.BadHead-st0.BadHead
	c.ForgedTID, c.UncheckedTID = r.threads.Forged()-forged0, r.threads.Unchecked()-unchecked0
	if passHook != nil {
		passHook(k)
	}
	if s.ctl.Commit(k, cons.Tail(), &c) {
		// The output is the reader's: now the producer may have the
		// space back.
		cons.PublishTail()
		return n, false
	}
	// The daemon forced the ring back: its drainer delivers these
	// records from the pass's start. The losses waiting before the pass
	// were the reader's, and are told.
	out.discard()
	r.waiting = append(r.waiting[:0], r.saved[:r.nsave]...)
	s.drop(r, out)
	return 0, true
}

// passHook, when set (by tests), runs between a pass's records and its
// commit: where a stopped reader is when the daemon forces its ring back.
var passHook func(k int)

// drop lets go of ring r, taken back: the loss records that wait for its
// next record were read in passes the reader committed — the drainer
// goes on after them — and are told now, on their own CPUs.
func (s *Set) drop(r *ring, out *Stream) {
	s.applyLosses(r, out, -1)
	r.gone = true
}

// deliver is the drainer's ringSource.deliver for the record v at the
// ring's tail, counting into c.
func (s *Set) deliver(r *ring, v *shmring.View, out *Stream, c *Counts) {
	tid := r.threads.Thread(v.TID)
	cpu := ringcheck.CPU(v.CPU)
	switch v.WriteIndex {
	case preload.VoidIndex:
		c.Voided++
		return
	case wire.LostIndex:
		idx, claim, ok := ringcheck.ParseLoss(v)
		if !ok {
			c.Rejected++
			return
		}
		if len(r.waiting) == ringcheck.MaxLosses {
			s.applyLosses(r, out, -1)
		}
		n, capped := r.budget.Cut(claim)
		if capped {
			c.LostCapped++
		}
		// Counted now, when the drainer counts it when told (see the
		// package doc): an index the set does not have is rejected
		// (File.WriteLost's ENOENT); the others are lost.
		if int(idx) >= len(s.events) {
			c.Rejected++
		} else {
			c.LostRecords++
			c.Lost += n // within the budget: no wrap
			// Written and dropped, as File.WriteLost counts them.
			s.ctl.Tally(r.k, int(idx), n, n)
		}
		r.waiting = append(r.waiting, loss{time: v.Time, n: n, idx: idx, cpu: int32(cpu)})
		return
	}
	s.applyLosses(r, out, cpu)
	s.write(r, v, tid, cpu, out, c)
}

// applyLosses tells the losses waiting in out, each as File.WriteLost
// notes it in the session's stream: on cpu, the CPU of the record that
// follows them, or with cpu < 0 on their own. An index the set does not
// have, a claim of none, or an event nothing consumes is told nowhere
// (WriteLost's ENOENT, its n == 0, an event without sessions).
func (s *Set) applyLosses(r *ring, out *Stream, cpu int) {
	for _, l := range r.waiting {
		if int(l.idx) >= len(s.events) || l.n == 0 {
			continue
		}
		ev := &s.events[l.idx]
		if ev.id == 0 {
			continue
		}
		if cpu >= 0 {
			l.cpu = int32(cpu)
		}
		out.note(wire.LostRun{ID: ev.id, Time: l.time, CPU: l.cpu, N: l.n})
	}
	clear(r.waiting)
	r.waiting = r.waiting[:0]
}

// write is subsys's File.write for the record v of thread tid on cpu, the
// session its event's only consumer, delivering into streams: the checks
// in File.check's order — an index the set does not have (a negative one
// too) rejected, a payload shorter than the event's fields rejected,
// nothing consuming the event disabled — then, for a record perf cannot
// take (wire.PerfTakes), a run lost, too large; else the session's stream
// write (deliverStreamFrom): the lost runs told, the thread's name if the
// reader does not have it, and the sample — laid out, the payload copied
// once from the ring and validated in the copy, cut off again if invalid.
func (s *Set) write(r *ring, v *shmring.View, tid int32, cpu int, out *Stream, c *Counts) {
	if int(v.WriteIndex) >= len(s.events) {
		c.Rejected++
		return
	}
	ev := &s.events[v.WriteIndex]
	if ev.def.CheckSize(v.Len) != nil {
		c.Rejected++
		return
	}
	if ev.id == 0 {
		c.Disabled++
		return
	}
	size := eventdef.HeaderSize + v.Len
	if !wire.PerfTakes(size) {
		// Dropped unvalidated, as user_event_perf drops it; the write
		// itself succeeded, and the drainer counts it delivered.
		out.note(wire.LostRun{ID: ev.id, Time: v.Time, CPU: int32(cpu), N: 1, TooLarge: true})
		out.tooLarge++
		c.Delivered++
		s.ctl.Tally(r.k, int(v.WriteIndex), 1, 1) // dropUntaken's counts
		return
	}
	if len(out.lost) > 0 {
		out.flushLost()
	}
	if out.comm {
		out.name(s.tgid, tid, s.comm, ev.id, v.Time, cpu)
	}
	n := wire.SampleSize(size)
	b := out.reserve(n)
	wire.PutSample(b, ev.id, uint32(s.tgid), uint32(tid), v.Time, uint32(cpu), size)
	rec := b[wire.SampleHeadSize : wire.SampleHeadSize+size]
	wire.PutRawHeader(rec, ev.typeID, tid)
	v.CopyPayload(rec[eventdef.HeaderSize:])
	if ev.def.Validate(rec) != nil {
		// Not committed: the output is as it was, but for what came
		// before the sample (lost runs told, a name), as a session
		// stream's.
		out.buf = out.buf[:len(out.buf)-n]
		c.Rejected++
		return
	}
	c.Delivered++
	if r.run.n > 0 && r.run.idx == int(v.WriteIndex) {
		r.run.n++
	} else {
		s.tallyRun(r)
		r.run.idx, r.run.n = int(v.WriteIndex), 1
	}
}

// tallyRun tells ring r's run of samples delivered to the control's
// tally of the pass.
func (s *Set) tallyRun(r *ring) {
	if r.run.n > 0 {
		s.ctl.Tally(r.k, r.run.idx, r.run.n, 0)
		r.run.n = 0
	}
}

// Pending is how many bytes ring k holds after the reader's tail; 0 for a
// ring taken back.
func (s *Set) Pending(k int) int {
	if s.rings[k].gone {
		return 0
	}
	return s.rings[k].cons.Pending()
}

// SleepAt says in ring k that the reader sleeps until it holds w bytes or
// more (shmring.Consumer.SleepAt: w ≤ 1, any record), and reports whether
// it may: false when the ring has that much now (the word is cleared
// again). The producer then wakes the reader through the set's wake
// eventfd. A ring taken back is the drainer's to sleep on: true, and its
// word untouched. (A ring taken back while the reader sleeps on it may
// have its word cleared by the reader's Awake after the drainer set it:
// the drainer then sleeps until its timeout, not until a wake.)
func (s *Set) SleepAt(k int, w uint32) bool {
	if s.rings[k].gone {
		return true
	}
	return s.rings[k].cons.SleepAt(w)
}

// Awake says the reader no longer sleeps on ring k.
func (s *Set) Awake(k int) {
	if !s.rings[k].gone {
		s.rings[k].cons.Awake()
	}
}

// Gone reports whether the reader let go of ring k (Pass said gone).
func (s *Set) Gone(k int) bool { return s.rings[k].gone }

// Close unmaps the set and its control. No Pass may be running or be
// called after. Rings still the reader's are the daemon's to take back:
// one compare-and-swap each, as from a reader that died.
func (s *Set) Close() error {
	var errs []error
	for k := range s.rings {
		errs = append(errs, s.rings[k].cons.Close())
	}
	errs = append(errs, s.ctl.Close())
	return errors.Join(errs...)
}
