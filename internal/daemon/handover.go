package daemon

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/handover"
	"github.com/uetrace/uetrace/internal/subsys"
)

// # Hand-over: a producer's ring set read by its only consumer
//
// A drainer spends ~100 ns of the daemon's CPU on each record it moves
// from a producer's ring into a session's stream (BENCHMARKS.md): the
// checks of a write and the perf sample laid out, what Linux does in the
// writer's context (user_event_perf, perf_trace_buf_submit,
// perf_tp_event). One daemon core cannot do that for every producer of a
// machine. So when a session that maps streams is the only consumer of
// everything a producer connection writes, the daemon hands that
// connection's ring set to the session's reader (OpSessionHandOver),
// which reads the records where they lie and does the drainer's work on
// its own CPUs (internal/handover: the same checks, package ringcheck's
// and eventdef's, the same bytes); the daemon touches none of them. It is
// perf's way — each reader reads its rings in place — within the rule
// that a producer may spoil only its own records: each ring still has one
// writer, and the reader treats it as the drainer does, as hostile.
//
//   - When: subsys.File.HandTo says the session is the only consumer of
//     every event of the connection's file that has one (no trace buffer,
//     no other session, no filter), and the set is not being taken back.
//     The reader asks (each round of its recording); the daemon answers
//     with one set at a time.
//   - Handing: each drainer k lets go of ring k at a pass boundary — its
//     waiting loss records told first — and gives it in the control
//     memfd: ring k's ownership word says Owned at the drainer's tail.
//     The reply carries the set's memfd, the control memfd, the set's
//     wake eventfd and the table of write indices.
//   - Taking back: before anything changes where the connection's
//     records go (subsys calls back, under its lock), before a tracefs
//     write, attach, detach or close that may concern its events (the
//     subsystem's sync hook, told the change's subsys.Scope, which also
//     delivers what the rings hold, so that records published before the
//     change reach the consumers of before, as Flush does for rings the
//     drainers hold), and when the producer or the reader goes: one
//     compare-and-swap per ring on its ownership word, Owned → Daemon at
//     the reader's tail. A reader in the middle of a pass (Reading) is
//     waited for at most takeBackBound, then forced: its commit fails and
//     it discards the pass, so no record is delivered twice or lost,
//     whatever the reader does, and the daemon never waits longer. The
//     drainers then resume at that tail and add the reader's counts — a
//     reader stopped between its last commit and the store of that
//     pass's counts has them added when they come, within a second
//     (drainer.settleLate); the hand-over ends then.
//   - A set taken back is not handed again before handAgain has passed,
//     so that a producer registering events one by one, or a tracer
//     toggling an enable, makes the set change hands at most that often.
//
// Counts, while a set is handed: the reader's counts of its rings
// (delivered, rejected, lost…) are its word, added to RingStats as such;
// its counts of each event's records (written, dropped: what File.write
// and File.WriteLost count) are added to the events' counts when they are
// read (countHanded) and when the set is taken back — lagging by the
// reader's pass, as the drainers' lag by theirs. A set of more than
// handover.MaxCountedEvents write indices is not handed.

// takeBackBound is the longest the daemon waits for a reader in the middle
// of a pass over a ring it takes back: a pass is at most mergeBatch
// records, tens of microseconds; a reader not done by then is cut off.
const takeBackBound = 5 * time.Millisecond

// handAgain is how long a set taken back stays with the drainers; a
// variable for the tests that hand a set back and forth.
var handAgain = 100 * time.Millisecond

// A handedSet is a ring set handed to a session's reader.
type handedSet struct {
	id  uint64
	set *ringSet
	// ctl is unmapped, once the set is resumed, under the drainers' lock,
	// which RingStats reads it under; ctlFd is the op's to send and close.
	ctl   *handover.Control
	ctlFd int
	// back is set once the daemon takes the set back; left counts the
	// rings its drainers have not resumed yet, and the take-back itself
	// until it is done with ctl (resumed).
	back atomic.Bool
	left atomic.Int32
	// claimed are the rings' loss claims as cut, since the loss budgets'
	// start: each drainer's when it gave its ring (the reader goes on
	// from them).
	claimed []uint64
	since   time.Time
	// ended is closed once every drainer has resumed its ring and the
	// take-back is done (resumed): only then may the set be released.
	ended chan struct{}
	// events are the set's write indices as the subsystem handed them:
	// the reader's counts of their records are added to them.
	events []subsys.HandedEvent
	// refused: the subsystem refused the hand-over (handOver), which
	// then ended as a take-back — one that does not hold the set back
	// from the next ask (handAgain), since it was never handed.
	refused atomic.Bool
}

// handOvers are the Server's hand-overs.
type handOvers struct {
	mu     sync.Mutex
	live   map[*handedSet]struct{}
	nextID uint64
	// handed counts hand-overs made (those ended: handed less live);
	// forced the rings taken from a reader that was not done with its
	// pass within takeBackBound.
	handed, forced atomic.Uint64
}

// opSessionHandOver serves SessionHandOver: one ring set handed to the
// session's reader, if one can be.
func (c *conn) opSessionHandOver(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok || len(body) != 0 {
		return c.result(0, fmt.Errorf("session hand-over: bad session %d: %w", h.Arg, unix.EBADF))
	}
	if !ss.DeliversToStreams() {
		return c.result(0, fmt.Errorf("session hand-over: the session does not deliver into streams (SessionStreams first): %w", unix.EINVAL))
	}
	// The reader checks thread ids in /proc as the daemon would: it must
	// see the daemon's pids.
	if !samePIDNamespace(c.ucred.Pid) {
		return c.result(0, fmt.Errorf("session hand-over: the reader's pid namespace is not the daemon's, so its /proc shows other threads: %w", unix.EPROTO))
	}
	g := &c.s.drainers
	for _, set := range g.candidates() {
		hs, ho := c.s.handOver(set, ss)
		if hs == nil {
			continue
		}
		memfd, efd, live := g.dupFds(set)
		if !live {
			// Its producer went meanwhile: nothing to hand.
			unix.Close(hs.ctlFd)
			c.s.endHandOver(hs)
			continue
		}
		// It fits: handOver checked.
		out, _ := wire.AppendHandOver(wire.AppendResult(c.out[:0], 1, nil), ho)
		c.out = out[:0]
		ok := c.replyRights(out, memfd, hs.ctlFd, efd)
		unix.Close(memfd)
		unix.Close(efd)
		unix.Close(hs.ctlFd)
		if !ok {
			c.s.endHandOver(hs)
			return false
		}
		c.log.Debug("ring set handed over", "handover", hs.id, "producer", ho.PID, "events", len(ho.Events))
		return true
	}
	return c.result(0, nil)
}

// candidates are the sets not handed over nor taken back lately, and
// whose producer has not gone.
func (g *drainers) candidates() []*ringSet {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*ringSet
	now := time.Now()
	for set := range g.sets {
		if set.memfd >= 0 && set.handed.Load() == nil && !set.closing.Load() && now.Sub(set.backAt()) >= handAgain {
			out = append(out, set)
		}
	}
	return out
}

// dupFds duplicates set's memfd and wake eventfd for a hand-over's
// message while the set is still attached. The group closes them when it
// releases the set, under g.mu, which a producer that goes makes happen at
// any time: sent after that, they would be closed descriptors — the send
// fails, and the reader's connection with it — or numbers another file
// has taken since. ok is false if the set is gone.
func (g *drainers) dupFds(set *ringSet) (memfd, efd int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, attached := g.sets[set]; !attached || set.memfd < 0 {
		return -1, -1, false
	}
	memfd, err := unix.FcntlInt(uintptr(set.memfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, -1, false
	}
	efd, err = unix.FcntlInt(uintptr(set.efd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		unix.Close(memfd)
		return -1, -1, false
	}
	return memfd, efd, true
}

// handOver hands set to ss's reader if ss is the only consumer of its
// connection's events: the drainers let go of its rings, and the control
// memfd says the reader owns them. It returns nil if it cannot.
func (s *Server) handOver(set *ringSet, ss *subsys.Session) (*handedSet, *wire.HandOver) {
	g := &s.drainers
	ctl, err := handover.CreateControl(len(set.srcs))
	if err != nil {
		set.log.Warn("ring set: cannot make a hand-over's control memfd", "err", err)
		return nil, nil
	}
	// The op sends the memfd and closes it, so that the set's end, which
	// unmaps the control, never races with the send.
	ctlFd := ctl.TakeFd()
	s.handOvers.mu.Lock()
	s.handOvers.nextID++
	id := s.handOvers.nextID
	s.handOvers.mu.Unlock()
	hs := &handedSet{id: id, set: set, ctl: ctl, ctlFd: ctlFd, claimed: make([]uint64, len(set.srcs)), since: set.srcs[0].losses.Since(), ended: make(chan struct{})}
	// Counted before the subsystem can take it back (HandTo below).
	hs.left.Store(int32(len(set.srcs)) + 1)
	if handing != nil {
		handing(hs, false)
	}
	if !set.handed.CompareAndSwap(nil, hs) {
		ctl.Close()
		unix.Close(ctlFd)
		return nil, nil
	}
	if handing != nil {
		handing(hs, true)
	}
	r0 := set.srcs[0]
	// A set whose producer goes is not handed: its close (drainers.close)
	// says so, then takes back what is handed — and so, the two atomics
	// ordered against ours, it either finds this hand-over, or we find
	// it closing here. Missed, its drainers released rings that were then
	// given, and resumed after the waker unmapped them (the soak's daemon
	// died so).
	var table subsys.HandOver
	ok := !set.closing.Load()
	if ok {
		table, ok = r0.file.HandTo(ss, hs, func() { s.takeBack(hs) })
	}
	ho := &wire.HandOver{
		ID: hs.id, Rings: len(set.srcs), PID: r0.w.TGID, Comm: r0.w.Comm,
		SessionComm: table.Comm, Events: make([]wire.HandOverEvent, len(table.Events)),
	}
	for i, e := range table.Events {
		ho.Events[i] = wire.HandOverEvent{SampleID: e.SampleID, Command: e.Def.String()}
	}
	if ok && (!wire.HandOverFits(ho) || len(table.Events) > handover.MaxCountedEvents) {
		// Too many events to say in a message, or to count in the
		// control: the drainers keep it.
		r0.file.HandBack(hs)
		ok = false
	}
	if !ok {
		// From the compare-and-swap on, the set was handed as far as
		// anyone could see: its producer's close (takeBackSet) may have
		// begun a take-back, and waits for it to end. So the refusal
		// ends the hand-over as a take-back does, never behind one's
		// back: no drainer was asked to give a ring, so their share of
		// left is counted here, and the take-back — this one, or the one
		// begun meanwhile — counts the last and unmaps the control.
		// Unmapped here, that take-back faulted on it, or waited for an
		// end that never came (the soak's daemon, CI at a150a2c).
		unix.Close(ctlFd)
		hs.refused.Store(true)
		s.resumedN(hs, len(set.srcs))
		s.takeBack(hs)
		return nil, nil
	}
	hs.events = table.Events
	ctl.SetEvents(len(table.Events))
	s.handOvers.mu.Lock()
	if s.handOvers.live == nil {
		s.handOvers.live = map[*handedSet]struct{}{}
	}
	s.handOvers.live[hs] = struct{}{}
	s.handOvers.mu.Unlock()
	s.handOvers.handed.Add(1)

	// Each drainer lets go of its ring at a pass boundary and gives it.
	var given sync.WaitGroup
	given.Add(len(set.srcs))
	for k, d := range g.d {
		d.give(set.srcs[k], hs, &given)
	}
	given.Wait()
	if hs.back.Load() {
		// Taken back meanwhile: the drainers resume it.
		unix.Close(ctlFd)
		return nil, nil
	}
	for _, c := range hs.claimed {
		ho.LossClaimed = min(ho.LossClaimed, math.MaxUint64-c) + c
	}
	ho.LossAge = uint64(max(time.Since(hs.since), 0))
	return hs, ho
}

// takeBack ends hs: the reader's ownership of each ring is ended now, and
// its drainer resumes it where the reader stopped. It never blocks longer
// than takeBackBound in all; safe under the subsystem's lock (subsys calls
// it so, as the hand-over's back) and more than once.
func (s *Server) takeBack(hs *handedSet) {
	if !hs.back.CompareAndSwap(false, true) {
		return
	}
	deadline := time.Now().Add(takeBackBound)
	for k, r := range hs.set.srcs {
		if betweenTakeBacks != nil {
			betweenTakeBacks()
		}
		if _, forced := hs.ctl.TakeBack(k, max(time.Until(deadline), 0)); forced {
			s.handOvers.forced.Add(1)
			hs.set.log.Warn("ring set taken back from a reader that did not finish its pass in time", "handover", hs.id, "ring", k)
		}
		s.drainers.d[k].resume(r, hs)
	}
	hs.set.log.Debug("ring set taken back", "handover", hs.id)
	// Done with the control: the drainers may unmap it now.
	s.resumed(hs)
}

// handing, if set (by tests), runs as a hand-over claims its set: before
// (claimed false) and after (claimed true), before the subsystem says
// whether it may be handed. A producer's close then finds it handed, or
// not yet (TestHandOverRefusedWhileClosing, TestHandOverClosingSet).
var handing func(hs *handedSet, claimed bool)

// betweenTakeBacks, if set (by tests), runs before each ring of a
// take-back: drainers then resume the rings of a hand-over they were
// still giving meanwhile (TestHandOverTakenBackWhileGiven).
var betweenTakeBacks func()

// resumed is drainer k's word that it resumed ring r of hs, or the
// take-back's that it is done with hs's control; the last of those ends
// the hand-over and unmaps the control. The take-back counts: drainers
// asked to give a ring after it began resume that ring at once, and may
// all be done while it still takes back later rings in the control.
func (s *Server) resumed(hs *handedSet) { s.resumedN(hs, 1) }

// resumedN is n of resumed's words at once.
func (s *Server) resumedN(hs *handedSet, n int) {
	if hs.left.Add(-int32(n)) != 0 {
		return
	}
	if !hs.refused.Load() {
		hs.set.markBack()
	}
	hs.set.log.Debug("ring set resumed", "handover", hs.id)
	g := &s.drainers
	g.mu.Lock()
	hs.set.handed.Store(nil)
	hs.ctl.Close()
	g.mu.Unlock()
	s.handOvers.mu.Lock()
	delete(s.handOvers.live, hs)
	s.handOvers.mu.Unlock()
	close(hs.ended)
}

// countEvent adds what the reader counted of write index i's records since
// the daemon last looked to its event's counts.
func (hs *handedSet) countEvent(i int, grown handover.EventCounts) {
	hs.events[i].Count(grown.Written, grown.Dropped)
}

// countHanded is the subsystem's count hook: what the readers of the sets
// handed over counted of their events' records, as of their last stored
// passes, is added to the events' counts — so that uetrace status shows
// the records a recording reads in place as it shows those the drainers
// deliver, lagging by a pass. The rest, to where each reader stopped, is
// added when the set is taken back (resumeRing); each record is counted
// once, since only what the counts grew by is taken.
func (s *Server) countHanded() {
	g := &s.drainers
	for _, hs := range s.handOvers.snapshot() {
		// The control stays mapped while the set is handed: it is
		// unmapped under g.mu, with handed cleared (resumed).
		g.mu.Lock()
		if hs.set.handed.Load() == hs {
			for k := range hs.set.srcs {
				hs.ctl.TakeEventCounts(k, hs.countEvent)
			}
		}
		g.mu.Unlock()
	}
}

// beforeChange takes back the sets handed over whose events the change
// may concern (sc) and has the drainers deliver what every ring holds:
// the subsystem's sync hook, run before a tracefs write, an O_TRUNC open,
// an attach, a detach or a close — whoever asks for it, the socket's ops
// or the FUSE tree's — so that the records published before it reach the
// consumers of before. A set the change does not concern stays with its
// reader, whose session remains the only consumer of its records: taken
// back at every change anywhere, the sets of a machine's producers went
// back and forth at each attach or close of anyone's session (the soak's
// abusers: 2 687 hand-overs in 10 s, each a round trip and a take-back).
func (s *Server) beforeChange(sc subsys.Scope) {
	for _, hs := range s.handOvers.snapshot() {
		if sc.Touches(hs.set.srcs[0].file) {
			s.endHandOver(hs)
		}
	}
	s.Flush()
}

// snapshot is the hand-overs live now.
func (h *handOvers) snapshot() []*handedSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	hss := make([]*handedSet, 0, len(h.live))
	for hs := range h.live {
		hss = append(hss, hs)
	}
	return hss
}

// takeBackSet takes back set if it is handed over, and returns once every
// drainer has resumed its ring: its producer goes, or asks for its
// records delivered (RingFlush). The wait matters: a take-back begun by
// another goroutine (a tracer's write, beforeChange) may not have asked
// every drainer to resume yet, and a ring released before its resume is
// unmapped under it.
func (s *Server) takeBackSet(set *ringSet) {
	if hs := set.handed.Load(); hs != nil {
		s.endHandOver(hs)
		<-hs.ended
	}
}

// flushHanded is RingFlush for a set handed to a session's reader: it
// returns once the reader has committed its passes past what each ring
// held when it was called — its records delivered, as a flush of the
// drainers' rings delivers them into the session's streams. A reader
// that does not get there within flushHandedMax has the set taken back,
// and the drainers deliver the rest. The wait is the flushing
// connection's only; the producer's writes go on meanwhile.
func (s *Server) flushHanded(set *ringSet) {
	hs := set.handed.Load()
	if hs == nil {
		return
	}
	heads := make([]uint64, len(set.srcs))
	for k, r := range set.srcs {
		heads[k] = r.cons.Head()
	}
	deadline := time.Now().Add(flushHandedMax)
	nap := 20 * time.Microsecond
	for {
		g := &s.drainers
		g.mu.Lock()
		done, gone := true, set.handed.Load() != hs
		if !gone {
			for k := range set.srcs {
				if tail, reader := hs.ctl.Read(k); reader && tail < heads[k] {
					done = false
				}
			}
		}
		g.mu.Unlock()
		if done || gone {
			return
		}
		if time.Now().After(deadline) {
			s.endHandOver(hs)
			return
		}
		time.Sleep(nap)
		nap = min(2*nap, time.Millisecond)
	}
}

// flushHandedMax bounds flushHanded's wait for a reader.
const flushHandedMax = time.Second

// endHandOver ends hs where the subsystem did not: its file's hand-over,
// then the rings taken back.
func (s *Server) endHandOver(hs *handedSet) {
	hs.set.srcs[0].file.HandBack(hs)
	s.takeBack(hs)
}

// giveRing is drainer-side: r leaves the merge at a pass boundary, its
// waiting losses told, and is given to the reader at the drainer's tail.
func (m *merge) giveRing(k int, r *ringSource, hs *handedSet) {
	if !slices.Contains(m.rings, r) {
		// Given before its drainer took it in, it would be taken in
		// after, and read by both (see drainer.requests).
		r.log.Error("ring: given to a reader while not in its drainer's merge (a bug of the daemon's)", "handover", hs.id, "ring", k)
	}
	m.drop(r)
	r.applyLosses(-1)
	m.rings = removeRing(m.rings, r)
	hs.claimed[k] = r.losses.Claimed()
	hs.ctl.Give(k, r.cons.Tail())
}

// resumeRing is drainer-side: r comes back from the reader at the tail its
// ownership word says, with the reader's counts. The word is the reader's
// to write: a tail before where the ring was given or past what the
// producer has reserved is no reader's — the ring resumes where it was
// given, its records since delivered again, into the reader's own
// session only. It returns the tail, and whether the reader's counts were
// as of it: if not, its last pass's come later (drainer.settleLate).
func (m *merge) resumeRing(k int, r *ringSource, hs *handedSet) (tail uint64, whole bool) {
	tail, _ = hs.ctl.TakeBack(k, takeBackBound)
	if given := r.cons.Tail(); tail < given || tail > r.cons.Head() || tail&7 != 0 {
		hs.set.log.Warn("ring set taken back: the reader's tail is not in the ring; resumed where it was given", "handover", hs.id, "ring", k, "tail", tail, "given", given)
		tail = given
	}
	cs, whole := hs.ctl.TakeCounts(k, tail, takeBackBound, hs.countEvent)
	r.addReader(cs)
	r.cons.Resume(tail)
	m.adopt(r)
	return tail, whole
}

// removeRing removes r from rings in place, clearing the slot it leaves.
func removeRing(rings []*ringSource, r *ringSource) []*ringSource {
	for i, q := range rings {
		if q == r {
			copy(rings[i:], rings[i+1:])
			rings[len(rings)-1] = nil
			return rings[:len(rings)-1]
		}
	}
	return rings
}

// readerStats are a reader's counts of a ring, its claims, as RingStats.
func readerStats(c handover.Counts) RingStats {
	return RingStats{
		Delivered: c.Delivered, Rejected: c.Rejected, Disabled: c.Disabled, Voided: c.Voided,
		Lost: c.Lost, LostRecords: c.LostRecords, LostCapped: c.LostCapped,
		ForgedTID: c.ForgedTID, UncheckedTID: c.UncheckedTID, Future: c.Future,
		Torn: c.Torn, TooLong: c.TooLong, Discarded: c.Discarded, BadHead: c.BadHead,
	}
}

// addReader adds a reader's counts of r, its claims, to r's: they count
// as r's own from then on, in RingStats and in r's loss budget.
func (r *ringSource) addReader(c handover.Counts) {
	st := readerStats(c)
	r.losses.Charge(c.Lost)
	old := r.readers.Load()
	if old != nil {
		st.add(*old)
	}
	r.readers.Store(&st)
}

// samePIDNamespace reports whether process pid sees the daemon's pids.
func samePIDNamespace(pid int32) bool {
	if pid <= 0 {
		return false
	}
	own, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return false
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/ns/pid")
	return err == nil && theirs == own
}

// markBack notes that the set was taken back now (handAgain).
func (set *ringSet) markBack() { set.back.Store(time.Now().UnixNano()) }

// backAt is when the set was last taken back; the zero time if never.
func (set *ringSet) backAt() time.Time {
	if t := set.back.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}
