package subsys

import (
	"runtime"
	"sync"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// A Session can deliver into streams (DeliverToStreams): one shared-memory
// stream per ring index of its writers' CPUs (internal/shmring's streams),
// holding finished perf.data records — samples laid out by
// wire.StreamSampleType, PERF_RECORD_LOST where records were lost,
// PERF_RECORD_COMM before a thread's first sample in each stream — which
// the reader writes to its file as they lie, as perf record writes the
// kernel's per-CPU mmap rings. A record goes to the stream of its writer's
// CPU (w.CPU modulo the streams), so each stream is in the order its CPU's
// records are delivered and the reader merges the streams by time at read
// time (perf's ordered events, flushed round by round).
//
// The kernel's perf output pattern holds: the record is assembled in the
// space it reserved in the stream (perf_output_begin), validated there and
// committed, or dropped without a trace when the validation fails; a
// record that finds no room is validated in a scratch copy first — an
// invalid one is the write's EFAULT, as user_event_perf validates in
// perf_trace_buf before perf_output_begin fails — then counted lost and
// told in a PERF_RECORD_LOST before the next record that fits in that
// stream, as a perf ring tells its losses.
//
// Each stream has one writer at a time (its mutex): the daemon's drainer
// of that ring index, and now and then a write over the socket or through
// FUSE. The reader is not trusted: the streams believe its tail only within
// what they wrote, and its sleeping word costs a bounded number of wakes
// (shmring.StreamWriter).

// sessionStreams are a session's streams.
type sessionStreams struct {
	set   *shmring.StreamSet
	rings []streamRing
	mask  int  // len(rings)-1 when a power of two, else -1
	comm  bool // names before samples (SessionOptions.Comm)
}

// streamRing is one stream and what its writer keeps of it.
type streamRing struct {
	mu sync.Mutex
	w  *shmring.StreamWriter
	// lost are the runs of records lost on this stream not yet told in
	// it, oldest first (at most wire.MaxLostNotes).
	lost []wire.LostRun
	// comms are the names the reader has of the threads whose samples
	// this stream carried (at most wire.MaxComms); last is the last sample's
	// thread and name, checked first.
	comms    map[int32]string
	lastTID  int32
	lastComm string
	haveLast bool
	_        [64]byte // the next stream's lock on a line of its own
}

// DeliverToStreams makes the session deliver into the streams of set
// instead of its buffer: the record of a writer on CPU c into stream
// c mod set.Len(). Read then returns EINVAL. It must be called before the
// session is attached to anything. The session owns set from then on: it
// is unmapped when nothing can deliver into it any more (the caller closes
// its memfd, with set.CloseFd, once it has handed it over).
func (ss *Session) DeliverToStreams(set *shmring.StreamSet) error {
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	if err := ss.mayChooseDelivery("session streams"); err != nil {
		return err
	}
	r := &sessionStreams{set: set, rings: make([]streamRing, set.Len()), mask: -1, comm: ss.comms != nil}
	if n := set.Len(); n&(n-1) == 0 {
		r.mask = n - 1
	}
	for k := range r.rings {
		r.rings[k].w = set.Writer(k)
		if r.comm {
			r.rings[k].comms = make(map[int32]string)
		}
	}
	runtime.AddCleanup(r, func(set *shmring.StreamSet) { set.Close() }, set)
	ss.streams.Store(r)
	return nil
}

// DeliversToStreams reports whether the session delivers into streams.
func (ss *Session) DeliversToStreams() bool { return ss.streams.Load() != nil }

// ring is the stream of a writer on cpu: cpu mod the streams, by a mask
// when their count is a power of two.
func (r *sessionStreams) ring(cpu int) *streamRing {
	if r.mask >= 0 {
		return &r.rings[cpu&r.mask]
	}
	return &r.rings[uint(cpu)%uint(len(r.rings))]
}

// unfiltered reports whether the session has no filter for ev.
func (ss *Session) unfiltered(ev *Event) bool {
	m := ss.filters.Load()
	return m == nil || (*m)[ev] == nil
}

// A Batch is a deliverer's hold on the stream it delivered into last: a
// goroutine that delivers many records — a daemon's drainer, whose records
// of one CPU go to one stream of each session — keeps that stream locked
// and its head unpublished from one record to the next, taking the lock
// and publishing once per run of records, not once per record (the lock,
// the publish's store and its load of the reader's word were a sixth of
// the daemon's cost per record). Flush publishes and unlocks; the
// deliverer calls it after each run — and before anything else of the
// subsystem that may take a stream's lock on its goroutine (File.WriteLost)
// — and Deliver calls it itself before any other path. While a Batch
// holds a stream, other writers of it (the socket's, FUSE's) wait for the
// run's end. A Batch is one goroutine's; the zero Batch holds nothing.
type Batch struct {
	held *streamRing
	// of is held's streams, kept reachable while held is: the streams'
	// mappings are unmapped by a cleanup once their sessionStreams is
	// unreachable, which a pointer into its rings would not prevent.
	of *sessionStreams
}

// Flush publishes what the Batch's stream holds and unlocks it. It is
// safe on a nil Batch.
func (b *Batch) Flush() {
	if b != nil && b.held != nil {
		b.held.publish()
		b.held, b.of = nil, nil
	}
}

// lock locks sr, a stream of r, or finds it locked already by b.
func (b *Batch) lock(r *sessionStreams, sr *streamRing) {
	if b != nil {
		if b.held == sr {
			return
		}
		b.Flush()
		b.held, b.of = sr, r
	}
	sr.mu.Lock()
}

// reserve takes the stream of w's CPU — locked, or held by b — and room
// in it for a sample of rawLen raw bytes of ev, laid out but for the raw
// data, after what must come before it: the stream's lost runs, and the
// thread's name when the reader does not have it. With no room for all of
// it, the sample's room is nil; the caller then counts the record lost
// (lose) — or not, if it fails validation — and unlocks (done).
func (r *sessionStreams) reserve(ev *Event, w *Writer, ts uint64, rawLen int, bt *Batch) (*streamRing, []byte) {
	sr := r.ring(w.CPU)
	bt.lock(r, sr)
	if len(sr.lost) > 0 && !sr.flushLost() {
		return sr, nil
	}
	id := wire.SampleID(ev.id)
	if r.comm && (!sr.haveLast || sr.lastTID != w.PID || sr.lastComm != w.Comm) {
		if name, ok := sr.comms[w.PID]; !ok || name != w.Comm {
			n := wire.CommSize(w.Comm)
			b := sr.w.Reserve(n)
			if b == nil {
				return sr, nil // the name waits for a record that fits
			}
			wire.PutComm(b, uint32(w.TGID), uint32(w.PID), w.Comm, id, ts, uint32(w.CPU))
			sr.w.Commit(n)
			if !ok && len(sr.comms) >= wire.MaxComms {
				// Bounded, whatever thread ids clients make up:
				// forgetting costs only names sent again.
				clear(sr.comms)
			}
			sr.comms[w.PID] = w.Comm
		}
		sr.lastTID, sr.lastComm, sr.haveLast = w.PID, w.Comm, true
	}
	n := wire.SampleSize(rawLen)
	b := sr.w.Reserve(n)
	if b == nil {
		return sr, nil
	}
	wire.PutSample(b, id, uint32(w.TGID), uint32(w.PID), ts, uint32(w.CPU), rawLen)
	return sr, b
}

// commit publishes the sample b reserved and unlocks the stream — or
// leaves both to the Batch that holds it.
func (sr *streamRing) commit(b []byte, bt *Batch) {
	sr.w.Commit(len(b))
	sr.done(bt)
}

// done publishes and unlocks the stream, unless a Batch holds it.
func (sr *streamRing) done(b *Batch) {
	if b == nil {
		sr.publish()
	}
}

// publish publishes what was committed before (a name, lost runs) and
// unlocks the stream.
func (sr *streamRing) publish() {
	sr.w.Publish()
	sr.mu.Unlock()
}

// lose counts a record of ev by w that found no room in its stream sr
// (locked, or held by bt; done here): the event's dropped count, the
// session's lost count, and a lost run told in the stream before its next
// record.
func (ss *Session) lose(sr *streamRing, ev *Event, w *Writer, ts uint64, bt *Batch) {
	ev.shard(w.CPU).dropped.Add(1)
	ss.countLost(1, 0)
	sr.note(ev, ts, int32(w.CPU), 1, 0)
	sr.done(bt)
}

// deliverStream is deliver for a session with streams: rec, the record
// validated (and filtered) in a scratch copy, is copied into its sample.
func (ss *Session) deliverStream(r *sessionStreams, ev *Event, w *Writer, ts uint64, rec []byte) {
	sr, b := r.reserve(ev, w, ts, len(rec), nil)
	if b == nil {
		ss.lose(sr, ev, w, ts, nil)
		return
	}
	copy(b[wire.SampleHeadSize:], rec)
	sr.commit(b, nil)
}

// deliverStreamFrom delivers a record of size bytes (header and payload)
// whose payload is p, the session the event's only consumer: assembled in
// the sample reserved for it, validated there, committed — or discarded,
// and its error returned. One that finds no room is validated in a scratch
// copy, then counted lost if it is valid. It counts the record written
// when valid.
func (ss *Session) deliverStreamFrom(r *sessionStreams, ev *Event, w *Writer, ts uint64, size int, p payload) error {
	bt := p.batch
	sr, b := r.reserve(ev, w, ts, size, bt)
	if b == nil {
		rec, bp := scratchRecord(ev, w, size, p)
		err := ev.def.Validate(rec)
		putScratch(bp, rec)
		if err != nil {
			sr.done(bt)
			return err
		}
		ev.shard(w.CPU).written.Add(1)
		ss.lose(sr, ev, w, ts, bt)
		return nil
	}
	rec := b[wire.SampleHeadSize : wire.SampleHeadSize+size]
	wire.PutRawHeader(rec, ev.id, w.PID)
	p.copyTo(rec[eventdef.HeaderSize:])
	if err := ev.def.Validate(rec); err != nil {
		// Discarded: the stream is as it was, its room unwritten for the
		// reader (the head does not move).
		sr.done(bt)
		return err
	}
	ev.shard(w.CPU).written.Add(1)
	sr.commit(b, bt)
	return nil
}

// note adds a run of n records of ev (nil: not known) lost, the first at
// ts on cpu, to the stream's (locked): wire.AddLostRun, the rule a reader
// of a handed ring set keeps too.
func (sr *streamRing) note(ev *Event, ts uint64, cpu int32, n uint64, flags uint32) {
	var id uint64
	if ev != nil {
		id = wire.SampleID(ev.id)
	}
	sr.lost = wire.AddLostRun(sr.lost, wire.LostRun{ID: id, Time: ts, N: n, CPU: cpu, TooLarge: flags&lostTooLarge != 0})
}

// flushLost writes the stream's lost runs (locked) as PERF_RECORD_LOST
// records, as many as fit, and reports whether none is left.
func (sr *streamRing) flushLost() bool {
	done := 0
	for _, l := range sr.lost {
		b := sr.w.Reserve(wire.LostSize)
		if b == nil {
			break
		}
		wire.PutLost(b, l.ID, l.N, 0, 0, l.Time, uint32(l.CPU))
		sr.w.Commit(wire.LostSize)
		done++
	}
	n := copy(sr.lost, sr.lost[done:])
	clear(sr.lost[n:])
	sr.lost = sr.lost[:n]
	return n == 0
}

// noteLostStreams is noteLost for a session with streams: the run goes to
// the stream of cpu.
func (ss *Session) noteLostStreams(r *sessionStreams, ev *Event, ts uint64, cpu int32, n uint64, flags uint32) {
	sr := r.ring(int(cpu))
	sr.mu.Lock()
	ss.countLost(n, flags)
	sr.note(ev, ts, cpu, n, flags)
	sr.mu.Unlock()
}

// countLost adds n records to the session's lost counts: too large for
// perf with flags lostTooLarge, lost otherwise.
func (ss *Session) countLost(n uint64, flags uint32) {
	ss.mu.Lock()
	if flags&lostTooLarge != 0 {
		ss.tooLarge = satAdd(ss.tooLarge, n)
	} else {
		ss.lost = satAdd(ss.lost, n)
	}
	ss.mu.Unlock()
}

// takeLost is TakeLost for a session with streams: each stream's
// runs are written into it if they fit, and the rest are handed over.
func (r *sessionStreams) takeLost() (n, tooLarge uint64) {
	for k := range r.rings {
		sr := &r.rings[k]
		sr.mu.Lock()
		if !sr.flushLost() {
			for _, l := range sr.lost {
				n = satAdd(n, l.N)
				if l.TooLarge {
					tooLarge = satAdd(tooLarge, l.N)
				}
			}
			clear(sr.lost)
			sr.lost = sr.lost[:0]
		}
		sr.w.Publish()
		sr.mu.Unlock()
	}
	return n, tooLarge
}
