package record

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/handover"
)

// A recording that is the only consumer of a producer's events takes that
// producer's ring set from the daemon (client.Session.HandOver: as soon as
// the attach enabled the events, at each round's end, and every
// handAskEvery while records come through the streams) and reads it
// itself, where it lies (internal/handover): the checks of
// each record and the perf sample laid out, which the daemon's drainers
// would have done into the session's streams, the same bytes, on the
// recording's CPUs instead of the daemon's. The daemon takes a set back —
// without waiting for the recording — when the recording stops being its
// only consumer (an enable, another session, a filter, a new event of the
// producer's) or when either side goes: the next pass over it finds it
// gone and lets go of it; its records then come through the streams
// again, none twice and none lost. Options.NoHandOver keeps every record on
// the daemon's path.
//
// Ring k of every set is read by reader goroutine k, as perf record
// --threads reads each CPU's ring on a thread of its own: the producers'
// records are taken on as many CPUs as they are written on, and while the
// recording's own goroutine waits for the daemon (a round's sync, a
// hand-over) or for the disk, the producers' rings are still read. A
// reader sleeps on its rings' watermark — a quarter of a ring, the
// drainers' busy watermark, or the first record when the recording gives
// each sample on as it comes (Options.Sink) — through the sets' wake
// eventfds, edge-triggered and never read, as the daemon's waker watches
// them; with Options.SinkLatency it naps that long instead, as the
// streams' wait does (streamWait says why). A reader lays out records in
// chunks of handChunk bytes, as perf record's mmap rings are read in
// pages: a full chunk waits in a queue for the recording's goroutine to
// write it (at most handHeld bytes wait; above that the reader stops
// reading, and the producer's ring drops what it cannot hold, counted),
// and the recording's goroutine gives it back to be filled again — no
// buffer grows and is copied as the records pile up. Each round the
// recording's goroutine also passes over every ring itself, under the
// reader's lock, so that a round holds every record committed before its
// sync.

// handPass is the most records a pass takes from a ring before the next
// set's turn, or a chunk's.
const handPass = 4096

// maxHandOvers bounds the sets asked for in one round.
const maxHandOvers = 16

// handAskEvery is how often at most the recording asks for hand-overs
// between rounds, while records come through the streams: a producer that
// registers after the recording began is handed over within about this
// long, not at the round's end (streamRound), for its first records meet
// the daemon's drainers and the streams cold — in issue 31's zero-loss
// searches, records lost in a recording's first round at rates the rest
// of it kept whole. A producer that cannot be handed over (another
// consumer, a filter) costs a round trip this often.
const handAskEvery = 10 * time.Millisecond

// A reader's chunks: handChunk bytes each, a new one begun once the one
// being filled holds half of it (a pass of handPass records of the usual
// sizes fits in the other half; a larger one grows it); at most handHeld
// bytes waiting in full chunks.
const (
	handChunk = 1 << 20
	handHeld  = 64 << 20
)

// handedSets are the sets a recording holds and their readers.
type handedSets struct {
	off     bool          // the daemon does not hand over: not asked again
	asked   time.Time     // when the daemon was last asked
	readers []*handReader // by ring index, once a set was taken
	ready   chan struct{} // a reader queued a chunk
	first   bool          // wake the recording at each record (Options.Sink)
	latency time.Duration // Options.SinkLatency
	// taken counts the sets taken, records the records their passes gave,
	// tooLarge those they dropped as too large for perf (Stats, from any
	// goroutine).
	taken, records, tooLarge atomic.Uint64
}

// handedSet is a set, its wake eventfd, and the readers still reading it.
type handedSet struct {
	set  *handover.Set
	wake int
	left atomic.Int32
}

// A handReader reads ring k of every set (see above).
type handReader struct {
	h    *handedSets
	k    int
	epfd int // the sets' wake eventfds, edge-triggered
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	sets []*handedSet
	out  *handover.Stream // the chunk being filled
	full [][]byte         // chunks filled, oldest first
	held int              // their bytes
	free [][]byte         // chunks written out, to fill again
}

// askHandOvers asks for the sets the daemon can hand over now.
func (d *daemonSource) askHandOvers() {
	h := &d.streams.hand
	h.asked = time.Now()
	for i := 0; !h.off && i < maxHandOvers; i++ {
		ho, err := d.s.HandOver()
		if err != nil {
			// A daemon before hand-overs, or one that will not hand over
			// to this process: its drainers deliver everything.
			h.off = true
			if !errors.Is(err, unix.EPROTO) {
				d.streams.err = err
			}
			return
		}
		if ho == nil {
			return
		}
		g, err := handover.GrantOf(ho.HandOver)
		var set *handover.Set
		if err == nil {
			set, err = handover.OpenSet(g, ho.SetFd, ho.ControlFd)
		}
		unix.Close(ho.SetFd)
		unix.Close(ho.ControlFd)
		if err == nil && h.readers == nil {
			err = h.start(d.streams.st.Len(), ho.SessionComm)
		}
		if err != nil {
			// The daemon takes it back when the session ends; until
			// then its records wait in the producer's ring.
			if set != nil {
				set.Close()
			}
			unix.Close(ho.WakeFd)
			d.streams.err = err
			return
		}
		h.add(&handedSet{set: set, wake: ho.WakeFd})
		h.taken.Add(1)
	}
}

// start starts a reader per ring index.
func (h *handedSets) start(n int, comm bool) error {
	h.ready = make(chan struct{}, 1)
	for k := range n {
		epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			h.stop()
			return err
		}
		rd := &handReader{h: h, k: k, epfd: epfd, stop: make(chan struct{}), done: make(chan struct{}), out: handover.NewStream(comm)}
		rd.out.Swap(make([]byte, 0, handChunk))
		h.readers = append(h.readers, rd)
		go rd.run()
	}
	return nil
}

// add gives each reader ring k of hs.
func (h *handedSets) add(hs *handedSet) {
	hs.left.Store(int32(min(len(h.readers), hs.set.Rings())))
	for _, rd := range h.readers {
		if rd.k >= hs.set.Rings() {
			continue
		}
		rd.mu.Lock()
		rd.sets = append(rd.sets, hs)
		rd.mu.Unlock()
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(hs.wake)}
		unix.EpollCtl(rd.epfd, unix.EPOLL_CTL_ADD, hs.wake, &ev)
	}
}

// run is reader k: passes while its rings give records, sleeps when
// they do not, until stopped.
func (rd *handReader) run() {
	defer close(rd.done)
	for {
		select {
		case <-rd.stop:
			return
		default:
		}
		rd.mu.Lock()
		n, queued := 0, false
		if rd.held < handHeld {
			n = rd.passLocked()
			// A recording that gives each sample on soon takes every
			// pass's records, not only full chunks.
			queued = rd.queueLocked(rd.h.first || rd.h.latency > 0)
		}
		wake := queued
		rd.mu.Unlock()
		if wake {
			select {
			case rd.h.ready <- struct{}{}:
			default:
			}
		}
		if n == 0 {
			rd.sleep()
		}
	}
}

// passLocked passes over ring k of every set, letting go of those the
// daemon took back, and reports the records taken; a chunk half full is
// queued between sets. rd.mu is held.
func (rd *handReader) passLocked() int {
	total, large := 0, rd.out.TooLarge()
	live := rd.sets[:0]
	for _, hs := range rd.sets {
		gone := false
		for {
			rd.queueLocked(false)
			n, g := hs.set.Pass(rd.k, rd.out, handPass)
			total += n
			if g || n < handPass {
				gone = g
				break
			}
		}
		if gone {
			unix.EpollCtl(rd.epfd, unix.EPOLL_CTL_DEL, hs.wake, nil)
			hs.release()
			continue
		}
		live = append(live, hs)
	}
	clear(rd.sets[len(live):])
	rd.sets = live
	if total > 0 {
		rd.h.records.Add(uint64(total))
	}
	if n := rd.out.TooLarge() - large; n > 0 {
		rd.h.tooLarge.Add(n)
	}
	return total
}

// queueLocked queues the chunk being filled once it is half full — or,
// with all, if it holds anything — and begins another, and reports
// whether it did. rd.mu is held.
func (rd *handReader) queueLocked(all bool) bool {
	n := len(rd.out.Bytes())
	if n == 0 || !all && n < handChunk/2 {
		return false
	}
	var next []byte
	if k := len(rd.free); k > 0 {
		next, rd.free[k-1] = rd.free[k-1], nil
		rd.free = rd.free[:k-1]
	} else {
		next = make([]byte, 0, handChunk)
	}
	rd.full = append(rd.full, rd.out.Swap(next))
	rd.held += n
	return true
}

// sleep waits for a ring of the reader's to hold its watermark, at most
// streamWaitMax — or, with a latency, that long on a timer.
func (rd *handReader) sleep() {
	if rd.h.latency > 0 {
		time.Sleep(rd.h.latency)
		return
	}
	rd.mu.Lock()
	none := len(rd.sets) == 0
	asleep := !none
	for _, hs := range rd.sets {
		w := uint32(hs.set.Size() / 4)
		if rd.h.first {
			w = 1
		}
		if asleep && !hs.set.SleepAt(rd.k, w) {
			asleep = false
		}
	}
	rd.mu.Unlock()
	switch {
	case asleep:
		var evs [8]unix.EpollEvent
		unix.EpollWait(rd.epfd, evs[:], int(streamWaitMax/time.Millisecond))
	case none:
		select {
		case <-rd.stop:
		case <-time.After(streamWaitMax):
		}
	}
	rd.mu.Lock()
	for _, hs := range rd.sets {
		hs.set.Awake(rd.k)
	}
	rd.mu.Unlock()
}

// release is a reader's word that it is done with the set; the last one
// unmaps it.
func (hs *handedSet) release() {
	if hs.left.Add(-1) == 0 {
		hs.set.Close()
		unix.Close(hs.wake)
	}
}

// handTake gives to what the readers laid out; with catchUp, each first
// passes over its rings on this goroutine, so that what was committed
// before now is taken, and tells the losses it holds (a round's end, the
// recording's). The chunks are written out of the reader's lock: a disk
// that is slow holds the recording's goroutine, never a reader.
func (d *daemonSource) handTake(to sink, catchUp bool) {
	for _, rd := range d.streams.hand.readers {
		rd.mu.Lock()
		if catchUp {
			for rd.passLocked() > 0 {
			}
			// The losses waiting for a record to follow them are told
			// now, as the session's sync tells the streams' (TakeLost):
			// a count does not wait for a record that may never come.
			rd.out.FlushLost()
		}
		// All of it, before the streams are taken: a set taken back goes
		// on in the streams, with records later than those the reader
		// laid out before, which must not come a round before them.
		rd.queueLocked(true)
		full := rd.full
		rd.full, rd.held = nil, 0
		rd.mu.Unlock()
		for _, b := range full {
			to.records(b)
			d.streams.taken += len(b)
		}
		rd.mu.Lock()
		for i, b := range full {
			if len(rd.free) < handHeld/handChunk && cap(b) == handChunk {
				rd.free = append(rd.free, b[:0])
			}
			full[i] = nil
		}
		if rd.full == nil {
			rd.full = full[:0]
		}
		rd.mu.Unlock()
	}
}

// handFlushLost tells the losses the readers hold for a record that did
// not come: before the recording ends.
func (d *daemonSource) handFlushLost(to sink) {
	for _, rd := range d.streams.hand.readers {
		rd.mu.Lock()
		rd.out.FlushLost()
		rd.queueLocked(true)
		rd.mu.Unlock()
	}
	d.handTake(to, false)
}

// handWait waits, at most t, for a reader to queue a chunk; false if
// there is no reader.
func (d *daemonSource) handWait(t time.Duration) bool {
	h := &d.streams.hand
	if h.readers == nil {
		return false
	}
	select {
	case <-h.ready:
	case <-time.After(t):
	}
	return true
}

// stop stops the readers and lets go of their sets: the daemon takes them
// back.
func (h *handedSets) stop() {
	for _, rd := range h.readers {
		close(rd.stop)
	}
	for _, rd := range h.readers {
		<-rd.done
		for _, hs := range rd.sets {
			hs.release()
		}
		rd.sets = nil
		unix.Close(rd.epfd)
	}
	h.readers = nil
}

// tooLarge is the records dropped as too large for perf: the session's
// (the daemon's drainers') and the handed sets' readers'.
func (d *daemonSource) tooLarge() uint64 {
	n := d.big.Load()
	if d.streams != nil {
		n += d.streams.hand.tooLarge.Load()
	}
	return n
}
