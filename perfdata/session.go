package perfdata

import (
	"fmt"
	"io"
	"slices"
	"unsafe"

	"github.com/uetrace/uetrace/tracefmt"
)

// A Session reads the samples of a perf.data file as perf's session
// (tools/perf/util/session.c) gives them to perf script and perf report:
// in time order, each with its event, the names of its task and process
// and its wall-clock time.
//
// It owns what every consumer of the file needs:
//
//   - the events: an Event of every attr, named and with its tracefs
//     format from the tracing data, found by a sample's id; a pipe-mode
//     stream's attrs that come late become events when they come;
//   - the threads' names, from COMM records and inherited at FORK
//     (Threads), applied in time order, so a sample has the name its task
//     had when it was taken;
//   - time order, as perf's ordered events: records are held until a
//     PERF_RECORD_FINISHED_ROUND, which says every ring was read up to
//     there, and then those older than the previous round's newest are
//     delivered, oldest first (records of one time in file order) — a
//     round's records are a few runs already in order, one per ring read,
//     merged rather than sorted. Memory is bounded by the rounds, and by
//     SessionOptions.MaxQueue for a file without them;
//   - the records the recording lost: PERF_RECORD_LOST, per event and in
//     all, and PERF_RECORD_LOST_SAMPLES (Stats).
//
// As perf, a sample of a file of one attr is that attr's whatever its id,
// and a sample id two attrs list is the later one's. Where it differs from
// perf: a sample whose id is in no attr is delivered, with a nil Event and
// time 0 (its sample_type, and so its time, is not known), where perf
// drops it, counting nr_unknown_id; and a record without a time (0) is
// held, and delivered first of the next flush, where perf delivers it at
// once — the same order but for samples without a time.
//
// A Session is not safe for concurrent use.
type Session struct {
	r    *Reader
	opts SessionOptions

	events  []*Event
	formats map[uint64]*tracefmt.Format // of the tracing data, by tracefs id
	byID    map[uint64]*Event
	only    *Event // the event of a file of one attr
	lastID  uint64
	lastEv  *Event // the event of lastID; nil when none
	threads Threads
	clock   ClockData
	wall    bool // the file has clock data
	mapped  bool // records alias the file's mapping until the Reader is closed
	max     int  // opts.MaxQueue or its default

	// The ordered events: queue holds what waits for its turn; arena the
	// copies of their data when the file is not mapped, and spare the
	// arena of the flush before (endFlush).
	queue  []queued
	arena  []byte
	spare  []byte
	held   int    // bytes queue and arena hold for it
	seq    uint64 // records queued so far
	maxTS  uint64 // newest time queued
	limit  uint64 // the end of the previous round: the next flush's limit
	last   uint64 // the limit of the latest flush (perf's last_flush)
	anyRun bool   // a flush has been done: last is set

	// A flush in progress: the items up to flushTo are delivered, the
	// oldest first, from runs, the ends of the runs in queue of items in
	// order, and next, each run's first item not delivered.
	flushing bool
	flushTo  uint64
	runs     []int
	next     []int
	heap     []int // with more than two runs: those not done, by next
	written  int
	eof      bool // the final flush: then io.EOF

	rec   Record // the record read last
	smp   Sample
	stats SessionStats
}

// SessionOptions are what a Session may do differently.
type SessionOptions struct {
	// Retain keeps the Raw of every sample Next returns valid until the
	// Reader is closed, not only until the next call to Next: for a
	// consumer that hands samples on to other goroutines. (Those of a
	// mapped file, Reader.Mapped, are valid until Close anyway.)
	Retain bool
	// Comm, when set, is told each time a thread is named — by a COMM
	// record, or by a FORK from a thread with a name, which the new thread
	// takes — in time order with the samples: after those before it,
	// before those after. An error it returns is Next's.
	Comm func(pid, tid uint32, comm string) error
	// MaxQueue bounds the bytes a Session holds waiting for their turn:
	// when more would be held, the older half of the queue by time is
	// delivered, as perf's ordered events do under perf report
	// --queue-size (ordered_events__flush(OE_FLUSH__HALF)). Rounds bound
	// the queue of a file recorded by perf or uetrace; this bounds it for
	// a file without them. 0: 256 MiB.
	MaxQueue int
}

// DefaultMaxQueue is SessionOptions.MaxQueue's default.
const DefaultMaxQueue = 256 << 20

// SessionStats count what a Session read.
type SessionStats struct {
	Samples uint64 // samples delivered
	// Unknown counts the samples whose id is in no attr: they have no
	// Event.
	Unknown uint64
	// Lost is the records the recording lost, by its PERF_RECORD_LOST
	// records (also counted per Event); LostSamples, by its
	// PERF_RECORD_LOST_SAMPLES.
	Lost, LostSamples uint64
	// Unordered counts records older than what was already delivered
	// (perf's nr_unordered_events): a ring read after a round that should
	// have waited for it. They are delivered with the next round, late.
	Unordered uint64
}

// queued is a record waiting for its turn: a sample, a COMM or a FORK.
type queued struct {
	time uint64
	seq  uint64 // order in the file: ties in time keep it
	ev   *Event // a sample's
	id   uint64 // a sample's id
	data []byte // a sample's raw data, a COMM's name
	pid  uint32
	tid  uint32
	cpu  uint32 // a sample's CPU; a FORK's parent thread (ptid)
	kind queuedKind
}

type queuedKind uint8

const (
	queuedSample queuedKind = iota
	queuedComm
	queuedFork
)

// queuedSize is what a queued record costs, besides its data.
const queuedSize = int(unsafe.Sizeof(queued{}))

// NewSession starts a session on the records of r, which must not have
// been read with Next. The tracing data's formats are parsed now: one
// that does not parse is an error. o may be nil.
func NewSession(r *Reader, o *SessionOptions) (*Session, error) {
	s := &Session{r: r, byID: make(map[uint64]*Event), mapped: r.Mapped(), max: DefaultMaxQueue}
	if o != nil {
		s.opts = *o
		if o.MaxQueue > 0 {
			s.max = o.MaxQueue
		}
	}
	s.clock, s.wall = r.ClockData()
	s.formats = make(map[uint64]*tracefmt.Format)
	if td := r.TracingData(); td != nil {
		for _, sys := range td.Systems {
			for _, text := range sys.Formats {
				f, err := tracefmt.Parse(text)
				if err != nil {
					return nil, fmt.Errorf("tracing data of %s: %w", sys.Name, err)
				}
				f.System = sys.Name
				s.formats[uint64(f.ID)] = f
			}
		}
	}
	s.addEvents()
	return s, nil
}

// Events returns the events of the file, one per attr in order
// (Event.Index). A pipe-mode stream's attrs that come late are added as
// Next meets them.
func (s *Session) Events() []*Event { return s.events }

// Stats returns the counts so far.
func (s *Session) Stats() SessionStats { return s.stats }

// addEvents makes the events of the attrs not seen yet.
func (s *Session) addEvents() {
	attrs := s.r.Attrs()
	for i := len(s.events); i < len(attrs); i++ {
		ev := attrEvent(&attrs[i], s.formats)
		ev.Index = i
		s.events = append(s.events, ev)
		// A sample id of two attrs is the later one's, as perf's id hash
		// finds it.
		for _, id := range attrs[i].IDs {
			s.byID[id] = ev
		}
	}
	s.only = nil
	if len(s.events) == 1 {
		s.only = s.events[0]
	}
	s.lastEv = nil
}

// event returns the event of sample id id: the attr's that lists it, the
// only attr's, or nil.
func (s *Session) event(id uint64) *Event {
	if s.lastEv != nil && id == s.lastID {
		return s.lastEv
	}
	ev := s.byID[id]
	if ev == nil {
		ev = s.only
	}
	s.lastID, s.lastEv = id, ev
	return ev
}

// Next returns the next sample, in time order, or io.EOF after the last.
// The Sample is the Session's, overwritten by the next call; its Raw is
// valid until the next call too, or with SessionOptions.Retain until the
// Reader is closed.
//
// A record the Reader cannot decode gives its *FormatError, and the next
// call goes on after it; an error of the file's framing ends the session
// (the Reader's Next says which). What the Session holds then is not
// delivered.
func (s *Session) Next() (*Sample, error) {
	for {
		if s.flushing {
			for it := s.pop(); it != nil; it = s.pop() {
				if it.kind == queuedSample {
					return s.sample(it), nil
				}
				if err := s.thread(it); err != nil {
					return nil, err
				}
			}
			s.endFlush()
			if s.eof {
				return nil, io.EOF
			}
		}
		if err := s.read(); err != nil {
			return nil, err
		}
	}
}

// read reads records until a flush starts: at a FINISHED_ROUND, when the
// queue is full, or at the end of the file.
func (s *Session) read() error {
	rec := &s.rec
	for !s.flushing {
		*rec = Record{}
		err := s.r.next(rec)
		if err == io.EOF {
			s.eof = true
			s.flush(^uint64(0))
			return nil
		}
		if err != nil {
			return err
		}
		switch rec.Type {
		case RecordSample:
			smp := &rec.Sample
			ev := s.event(smp.ID)
			if ev == nil {
				s.stats.Unknown++
			}
			it := s.push(smp.Time, queuedSample, smp.Raw)
			it.ev, it.id, it.pid, it.tid, it.cpu = ev, smp.ID, smp.PID, smp.TID, smp.CPU
		case RecordComm:
			it := s.push(rec.Sample.Time, queuedComm, rec.Comm)
			it.pid, it.tid = rec.PID, rec.TID
		case RecordFork:
			it := s.push(rec.Time, queuedFork, nil)
			it.pid, it.tid, it.cpu = rec.PID, rec.TID, rec.PTID
		case RecordLost:
			s.stats.Lost += rec.Lost
			if ev := s.event(rec.ID); ev != nil {
				ev.Lost += rec.Lost
			}
		case RecordLostSamples:
			s.stats.LostSamples += rec.Lost
		case RecordHeaderAttr:
			if len(s.r.Attrs()) > len(s.events) {
				s.addEvents()
			}
		case RecordFinishedRound:
			limit := s.limit
			s.limit = s.maxTS
			s.flush(limit)
		}
		if s.held > s.max && !s.flushing {
			s.flushHalf()
		}
	}
	return nil
}

// push queues a record of time t and kind k, and returns it for the
// caller to fill in (in place: a queued record is large enough that
// copying it costs). Its data is the file's own when the file is mapped
// (valid until Close); otherwise it is copied into the arena, whose arrays
// stay alive as long as anything points into them.
func (s *Session) push(t uint64, k queuedKind, data []byte) *queued {
	if !s.mapped {
		start := len(s.arena)
		s.arena = append(s.arena, data...)
		data = s.arena[start:len(s.arena):len(s.arena)]
	}
	if t != 0 && s.anyRun && t < s.last {
		s.stats.Unordered++
	}
	s.seq++
	s.maxTS = max(s.maxTS, t)
	s.queue = append(s.queue, queued{time: t, seq: s.seq, kind: k, data: data})
	s.held += queuedSize + len(data)
	return &s.queue[len(s.queue)-1]
}

// flushHalf starts a flush of the older half of the queue's time span, as
// perf's OE_FLUSH__HALF: from the oldest record to halfway to the newest.
func (s *Session) flushHalf() {
	oldest := s.queue[0].time
	for i := range s.queue {
		oldest = min(oldest, s.queue[i].time)
	}
	s.flush(oldest + (s.maxTS-oldest)/2)
}

// flush starts delivering the queued records up to time limit, in time
// order (stable: a task's name comes before its samples of the same time).
//
// A round is a few runs already in order, one per ring read, so the
// records are not sorted but merged: each step delivers the oldest of the
// runs' first records, and what is left of each run stays queued, still in
// order.
func (s *Session) flush(limit uint64) {
	q := s.queue
	s.runs = s.runs[:0]
	for i := 1; i < len(q); i++ {
		if byTime(&q[i-1], &q[i]) > 0 {
			s.runs = append(s.runs, i)
		}
	}
	s.runs = append(s.runs, len(q))
	// next[r] is the first record of run r not yet delivered; run r ends
	// at runs[r].
	s.next = slices.Grow(s.next[:0], len(s.runs))
	start := 0
	for _, end := range s.runs {
		s.next = append(s.next, start)
		start = end
	}
	if len(s.runs) > 2 {
		// More runs than two CPUs' rings: a heap of them by their first
		// record, log(runs) a record.
		s.heap = s.heap[:0]
		for r := range s.runs {
			s.heap = append(s.heap, r)
		}
		for i := len(s.heap)/2 - 1; i >= 0; i-- {
			s.down(i)
		}
	}
	s.flushing, s.flushTo, s.written = true, limit, 0
	if limit != ^uint64(0) {
		s.last, s.anyRun = limit, true
	}
}

// pop returns the oldest record of the flush, or nil when none is left up
// to its limit.
func (s *Session) pop() *queued {
	q, next, runs := s.queue, s.next, s.runs
	best := -1
	switch len(next) {
	case 1: // in order already
		if next[0] < runs[0] {
			best = 0
		}
	case 2: // the usual round: two CPUs' rings
		switch i, j := next[0], next[1]; {
		case i < runs[0] && (j >= runs[1] || byTime(&q[i], &q[j]) <= 0):
			best = 0
		case j < runs[1]:
			best = 1
		}
	default:
		if len(s.heap) > 0 {
			best = s.heap[0]
		}
	}
	if best < 0 || q[next[best]].time > s.flushTo {
		return nil
	}
	it := &q[next[best]]
	next[best]++
	s.written++
	if len(next) > 2 {
		if next[best] == runs[best] {
			// The run is done: the last of the heap takes its place.
			last := len(s.heap) - 1
			s.heap[0], s.heap = s.heap[last], s.heap[:last]
		}
		s.down(0)
	}
	return it
}

// down moves the run at heap[i] down the heap to its place by its first
// record not delivered (container/heap's down, without an interface).
func (s *Session) down(i int) {
	h, q, next := s.heap, s.queue, s.next
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && byTime(&q[next[h[c+1]]], &q[next[h[c]]]) < 0 {
			c++
		}
		if byTime(&q[next[h[c]]], &q[next[h[i]]]) >= 0 {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// endFlush keeps what the flush left, still in runs in order.
func (s *Session) endFlush() {
	s.flushing = false
	q := s.queue
	if s.written == len(q) && !s.opts.Retain {
		// Nothing points into the arena any more once the sample
		// returned last is let go: the next call to Next.
		clear(q)
		s.queue, s.arena, s.held = q[:0], s.arena[:0], 0
		return
	}
	n := 0
	for r, i := range s.next {
		n += copy(q[n:], q[i:s.runs[r]])
	}
	clear(q[n:])
	s.queue = q[:n]
	s.held = 0
	for i := range s.queue {
		s.held += queuedSize + len(s.queue[i].data)
	}
	switch {
	case s.mapped || s.written == 0:
	case s.opts.Retain:
		// What is left, and the samples the consumer retains, keep
		// their data; new records go to a new arena.
		s.arena = make([]byte, 0, cap(s.arena))
	default:
		// What is left moves to the spare arena, which new records
		// follow; nothing points into the arena then once the sample
		// returned last is let go (the next call to Next): it is the
		// spare, for the next flush.
		spare := s.spare[:0]
		for i := range s.queue {
			it := &s.queue[i]
			start := len(spare)
			spare = append(spare, it.data...)
			it.data = spare[start:len(spare):len(spare)]
		}
		s.arena, s.spare = spare, s.arena[:0]
	}
}

// byTime orders records by time, then by their order in the file.
func byTime(a, b *queued) int {
	switch {
	case a.time < b.time:
		return -1
	case a.time > b.time:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// sample makes the Sample of a queued sample, its task's names as they
// are at its time.
func (s *Session) sample(it *queued) *Sample {
	s.stats.Samples++
	// Field by field: a Sample is large, and most of it is set anyway.
	smp := &s.smp
	smp.Misc, smp.ID, smp.IP, smp.PID, smp.TID, smp.Time = 0, it.id, 0, it.pid, it.tid, it.time
	smp.Addr, smp.StreamID, smp.CPU, smp.Period, smp.Raw = 0, 0, it.cpu, 0, it.data
	smp.Event, smp.Wall = it.ev, 0
	if s.wall {
		smp.Wall = uint64(s.clock.Wall(it.time))
	}
	smp.Comm, _ = s.threads.Comm(it.tid)
	if it.pid == it.tid {
		smp.ProcessComm = smp.Comm
	} else {
		smp.ProcessComm, _ = s.threads.Comm(it.pid)
	}
	return smp
}

// thread applies a COMM or FORK at its time.
func (s *Session) thread(it *queued) error {
	var name string
	switch it.kind {
	case queuedComm:
		name = string(it.data)
		s.threads.SetComm(it.tid, name)
	case queuedFork:
		var ok bool
		if name, ok = s.threads.Fork(it.tid, it.cpu); !ok {
			return nil
		}
	}
	if s.opts.Comm != nil {
		return s.opts.Comm(it.pid, it.tid, name)
	}
	return nil
}
