package subsys

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// A Session can deliver into a shared-memory ring (internal/shmring)
// instead of its in-memory buffer: the ring of a perf mmap buffer, which
// the reader — another process — maps and drains without a system call
// per record. The session is then the ring's producer; the reader is its
// consumer, and is not trusted (see DeliverToRing).
//
// Each delivery is one shmring record, as package wire lays it out
// (wire.RingSample, wire.RingComm, wire.RingLost): the reader is the
// daemon's client. Losses are delivered in band, where they happened, as a
// perf ring's PERF_RECORD_LOST: records that do not fit are counted as
// pending, and the pending count is written as a wire.RingLost record before
// the next record that fits. What is still pending when the reader asks
// (TakeLost) is handed over with the answer.

// ringMaxTries bounds Reserve's compare-and-swaps on the ring's head, which
// the reader can write: the daemon's goroutines contend a few times at
// most; a reader that moves head in a loop makes the session drop instead
// of making a writer spin (see shmring.Producer.BoundTries).
const ringMaxTries = 64

// A reader that says it sleeps is woken — a FUTEX_WAKE, by the writer that
// finds the word set — at most once per ringWakeMin, and while records keep
// coming at least once per ringWakeMax, or sooner once it has an eighth of
// the ring to read: as perf's wakeup watermark, the reader takes records in
// batches and the writers do not pay a system call for each time it
// catches up. A record after a quiet spell longer than ringWakeMax wakes
// the reader at once. The last records of a burst may wait for the
// reader's own timeout. A reader can set its sleeping word all the time
// and lie about its tail: that costs the daemon at most one FUTEX_WAKE per
// ringWakeMin, not one per record.
const (
	ringWakeMin = 20_000    // ns
	ringWakeMax = 1_000_000 // ns
)

// sessionRing is a session's ring: the producer's side and its wake policy.
type sessionRing struct {
	p        *shmring.Producer
	lastWake atomic.Uint64 // stamp.Now() at the last wake
	skipped  atomic.Uint64 // records that found the reader asleep and did not wake it
}

// commSeen is a thread's name as the ring's reader has it.
type commSeen struct {
	tid  int32
	comm string
}

// lostNote is a run of records lost, waiting to be written into the ring.
type lostNote struct {
	ev    *Event
	ts    uint64
	cpu   int32
	n     uint64
	flags uint32
}

// maxLostNotes bounds the lost runs a session keeps for the ring; further
// ones are added to the last of their kind (too large or not): the counts
// stay exact, the event and time are that run's.
const maxLostNotes = 16

// DeliverToRing makes the session deliver into the ring p produces instead
// of its buffer; Read then returns EINVAL. It must be called before the
// session is attached to anything. The session owns p from then on: p is
// unmapped when nothing can deliver into it any more — after Close, once
// no write still in flight holds the session (the caller may close p's
// descriptor, with p.CloseFd, once it has handed it over).
//
// The ring's reader is not trusted: whatever it writes into the ring — its
// tail, its sleeping word, head, the data — costs only this session's
// records (dropped, and counted in Lost as when the ring is full), never
// blocks a writer, never makes a writer touch memory outside the ring, and
// never makes the session pay a system call per record (ringWakeMin).
func (ss *Session) DeliverToRing(p *shmring.Producer) error {
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	switch {
	case ss.closed:
		return fmt.Errorf("session ring: the session is closed: %w", unix.EBADF)
	case ss.shm.Load() != nil || ss.streams.Load() != nil:
		return fmt.Errorf("session ring: the session already delivers into shared memory: %w", unix.EBUSY)
	case len(ss.attached) > 0 || len(ss.follow) > 0:
		return fmt.Errorf("session ring: the session is already attached to events; share the ring before attaching: %w", unix.EBUSY)
	}
	p.BoundTries(ringMaxTries)
	r := &sessionRing{p: p}
	runtime.AddCleanup(r, func(p *shmring.Producer) { p.Close() }, p)
	ss.shm.Store(r)
	return nil
}

// RingWakes is how many times the session woke its ring's reader, and how
// many records found it asleep and did not wake it (the wake policy:
// ringWakeMin, ringWakeMax).
func (ss *Session) RingWakes() (wakes, skipped uint64) {
	r := ss.shm.Load()
	if r == nil {
		return 0, 0
	}
	return r.p.Wakes(), r.skipped.Load()
}

// noteLost counts n records lost for the session: of event ev (nil: not
// known), the first of them at time ts on CPU cpu. It is the one place a
// session learns of a loss — its buffer or ring full, a record too large
// for perf, or records that never reached it — and the reader learns of it
// where it happened: with a ring, as a wire.RingLost record before the next
// record that fits (or from TakeLost); with the buffer, in Lost. The
// event's own drop count (Event.Counts) is the caller's to keep.
func (ss *Session) noteLost(ev *Event, ts uint64, cpu int32, n uint64) {
	ss.noteLostFlags(ev, ts, cpu, n, 0)
}

func (ss *Session) noteLostFlags(ev *Event, ts uint64, cpu int32, n uint64, flags uint32) {
	if n == 0 {
		return
	}
	if r := ss.streams.Load(); r != nil {
		ss.noteLostStreams(r, ev, ts, cpu, n, flags)
		return
	}
	ss.mu.Lock()
	if flags&wire.RingLostTooLarge != 0 {
		ss.tooLarge = satAdd(ss.tooLarge, n)
	} else {
		ss.lost = satAdd(ss.lost, n)
	}
	if ss.shm.Load() != nil {
		ss.lostNotes = addLostNote(ss.lostNotes, lostNote{ev: ev, ts: ts, cpu: cpu, n: n, flags: flags})
		ss.lostPending.Store(true)
	}
	ss.mu.Unlock()
}

// addLostNote adds the run l to notes: into the last run when it is of the
// same event and kind, else as a new run while there are fewer than
// maxLostNotes, else into the last run of its kind — the counts stay
// exact, the event and time are that run's.
func addLostNote(notes []lostNote, l lostNote) []lostNote {
	k := len(notes)
	switch {
	case k > 0 && notes[k-1].ev == l.ev && notes[k-1].flags == l.flags:
		notes[k-1].n = satAdd(notes[k-1].n, l.n)
		return notes
	case k >= maxLostNotes:
		// Into the last run of the same kind, or a new one if there is
		// none yet (there are two kinds).
		for i := k - 1; i >= 0; i-- {
			if notes[i].flags == l.flags {
				notes[i].n = satAdd(notes[i].n, l.n)
				return notes
			}
		}
	}
	return append(notes, l)
}

// flushLost writes the pending lost runs into the ring, as many as fit, and
// reports whether none is left.
func (ss *Session) flushLost(r *sessionRing) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	done := 0
	for _, l := range ss.lostNotes {
		if !r.writeLost(l) {
			break
		}
		done++
	}
	n := copy(ss.lostNotes, ss.lostNotes[done:])
	clear(ss.lostNotes[n:])
	ss.lostNotes = ss.lostNotes[:n]
	ss.lostPending.Store(n > 0)
	return n == 0
}

// TakeLost writes what the session has lost and not yet told its ring's
// reader into the ring if it fits, and returns — and forgets — what does
// not: the reader counts that itself. The daemon calls it when the reader
// asks to be brought up to date.
func (ss *Session) TakeLost() (n, tooLarge uint64) {
	if st := ss.streams.Load(); st != nil {
		return st.takeLost()
	}
	r := ss.shm.Load()
	if r == nil || !ss.lostPending.Load() || ss.flushLost(r) {
		return 0, 0
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, l := range ss.lostNotes {
		n += l.n
		if l.flags&wire.RingLostTooLarge != 0 {
			tooLarge += l.n
		}
	}
	clear(ss.lostNotes)
	ss.lostNotes = ss.lostNotes[:0]
	ss.lostPending.Store(false)
	return n, tooLarge
}

// deliverRing is deliver for a session with a ring: lost runs first, then
// the thread's name if the reader does not have it, then the record. No
// lock and no allocation unless something is lost or a thread is new.
func (ss *Session) deliverRing(r *sessionRing, ev *Event, w *Writer, ts uint64, rec []byte) {
	cpu := int32(w.CPU)
	if ss.lostPending.Load() && !ss.flushLost(r) {
		ev.shard(w.CPU).dropped.Add(1)
		ss.noteLost(ev, ts, cpu, 1)
		return
	}
	if ss.comms != nil {
		// The last thread's name first: a map lookup only when the
		// writer changes.
		if c := ss.lastComm.Load(); c == nil || c.tid != w.PID || c.comm != w.Comm {
			var seen *commSeen
			if v, ok := ss.ringComms.Load(w.PID); ok {
				seen = v.(*commSeen)
			}
			if seen == nil || seen.comm != w.Comm {
				if !r.writeComm(w, ts) {
					ev.shard(w.CPU).dropped.Add(1)
					ss.noteLost(ev, ts, cpu, 1) // the name waits for a record that fits
					return
				}
				if seen == nil && ss.ringCommN.Add(1) > maxComms {
					// Bounded, whatever thread ids clients make up:
					// forgetting costs only names sent again.
					ss.ringComms.Clear()
					ss.ringCommN.Store(1)
				}
				seen = &commSeen{tid: w.PID, comm: w.Comm}
				ss.ringComms.Store(w.PID, seen)
			}
			ss.lastComm.Store(seen)
		}
	}
	v, ok := r.p.Reserve(shmring.Meta{Time: ts, WriteIndex: wire.RingSample, TID: uint32(w.PID), CPU: uint32(cpu)}, 8+len(rec))
	if !ok {
		ev.shard(w.CPU).dropped.Add(1)
		ss.noteLost(ev, ts, cpu, 1)
		return
	}
	b := v.Payload()
	ne := binary.NativeEndian
	ne.PutUint32(b, uint32(w.TGID))
	ne.PutUint32(b[4:], uint32(ev.id))
	copy(b[8:], rec)
	r.commit(v)
}

func (r *sessionRing) writeComm(w *Writer, ts uint64) bool {
	name := w.Comm
	if len(name) > 15 { // TASK_COMM_LEN less its NUL, as perf's COMM record
		name = name[:15]
	}
	v, ok := r.p.Reserve(shmring.Meta{Time: ts, WriteIndex: wire.RingComm, TID: uint32(w.PID), CPU: uint32(w.CPU)}, 8+len(name))
	if !ok {
		return false
	}
	b := v.Payload()
	binary.NativeEndian.PutUint32(b, uint32(w.TGID))
	binary.NativeEndian.PutUint32(b[4:], 0)
	copy(b[8:], name)
	r.commit(v)
	return true
}

func (r *sessionRing) writeLost(l lostNote) bool {
	v, ok := r.p.Reserve(shmring.Meta{Time: l.ts, WriteIndex: wire.RingLost, CPU: uint32(l.cpu)}, 16)
	if !ok {
		return false
	}
	b := v.Payload()
	binary.NativeEndian.PutUint64(b, l.n)
	var id uint32
	if l.ev != nil {
		id = uint32(l.ev.id)
	}
	binary.NativeEndian.PutUint32(b[8:], id)
	binary.NativeEndian.PutUint32(b[12:], l.flags)
	r.commit(v)
	return true
}

// commit publishes a record and wakes the reader if it said it sleeps and
// the wake policy says it is time (ringWakeMin, ringWakeMax).
func (r *sessionRing) commit(v shmring.Reservation) {
	if !v.CommitQuiet() {
		return
	}
	now := stamp.Now()
	last := r.lastWake.Load()
	gap := now - last
	due := gap >= ringWakeMax || gap >= ringWakeMin && r.p.Backlog() >= uint64(r.p.Size()/8)
	if !due || !r.lastWake.CompareAndSwap(last, now) {
		r.skipped.Add(1)
		return
	}
	r.p.Wake()
}
