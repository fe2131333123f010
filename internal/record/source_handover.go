package record

import (
	"errors"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/handover"
)

// A recording that is the only consumer of a producer's events takes that
// producer's ring set from the daemon (client.Session.HandOver, each round)
// and reads it itself, where it lies (internal/handover): the checks of
// each record and the perf sample laid out, which the daemon's drainers
// would have done into the session's streams, the same bytes, on the
// recording's CPU instead of the daemon's. What it reads goes to the file
// as a stream's run does (Recorder.records). The daemon takes a set back
// — without waiting for the recording — when the recording stops being its
// only consumer (an enable, another session, a filter, a new event of the
// producer's) or when either side goes: the next pass over it finds it
// gone and lets go of it; its records then come through the streams
// again, none twice and none lost. Options.NoHandOver keeps every record on
// the daemon's path.

// handPass is the most records a pass takes from a ring before the next
// ring's turn.
const handPass = 4096

// maxHandOvers bounds the sets asked for in one round.
const maxHandOvers = 16

// handedSets are the sets a recording holds.
type handedSets struct {
	off  bool               // the daemon does not hand over: not asked again
	sets []*handedSet       // live
	outs []*handover.Stream // by ring index: what passes gave, not yet taken
	poll []unix.PollFd
	// taken counts the sets taken, records the records their passes gave
	// (Stats, from any goroutine).
	taken, records atomic.Uint64
}

// handedSet is a set and its wake eventfd.
type handedSet struct {
	set  *handover.Set
	wake int
}

// askHandOvers asks for the sets the daemon can hand over now.
func (d *daemonSource) askHandOvers() {
	h := &d.streams.hand
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
		if err != nil {
			// The daemon takes it back when the session ends; until
			// then its records wait in the producer's ring.
			unix.Close(ho.WakeFd)
			d.streams.err = err
			return
		}
		if h.outs == nil {
			for range d.streams.st.Len() {
				h.outs = append(h.outs, handover.NewStream(ho.SessionComm))
			}
		}
		h.sets = append(h.sets, &handedSet{set: set, wake: ho.WakeFd})
		h.taken.Add(1)
	}
}

// handTake gives to what each set holds now, and lets go of the sets the
// daemon took back.
func (d *daemonSource) handTake(to sink) {
	h := &d.streams.hand
	if len(h.sets) == 0 {
		return
	}
	live := h.sets[:0]
	for _, hs := range h.sets {
		gone := 0
		for k := range hs.set.Rings() {
			if k >= len(h.outs) {
				break
			}
			for {
				n, g := hs.set.Pass(k, h.outs[k], handPass)
				if n > 0 {
					h.records.Add(uint64(n))
				}
				if g {
					gone++
				}
				if b := h.outs[k].Bytes(); len(b) > 0 {
					to.records(b)
					d.streams.taken += len(b)
					h.outs[k].Reset()
				}
				if g || n < handPass {
					break
				}
			}
		}
		if gone == hs.set.Rings() {
			hs.close()
			continue
		}
		live = append(live, hs)
	}
	clear(h.sets[len(live):])
	h.sets = live
}

// handFlushLost tells the losses the passes hold for a record that did
// not come: before a round or the recording ends.
func (d *daemonSource) handFlushLost(to sink) {
	for _, o := range d.streams.hand.outs {
		o.FlushLost()
		if b := o.Bytes(); len(b) > 0 {
			to.records(b)
			o.Reset()
		}
	}
}

// handSleep waits, at most t, for a set's ring to hold a quarter of its
// size — the drainers' busy watermark — or with first its first record;
// false if there is no set to wait on.
func (d *daemonSource) handSleep(t time.Duration, first bool) bool {
	h := &d.streams.hand
	if len(h.sets) == 0 {
		return false
	}
	h.poll = h.poll[:0]
	asleep := true
	for _, hs := range h.sets {
		w := uint32(hs.set.Size() / 4)
		if first {
			w = 1
		}
		for k := range hs.set.Rings() {
			if asleep && !hs.set.SleepAt(k, w) {
				asleep = false
			}
		}
		h.poll = append(h.poll, unix.PollFd{Fd: int32(hs.wake), Events: unix.POLLIN})
	}
	if asleep {
		unix.Poll(h.poll, max(int(t/time.Millisecond), 1))
		var cnt [8]byte
		for _, p := range h.poll {
			if p.Revents&unix.POLLIN != 0 {
				// Its counter is the producer's signal, not a count to
				// keep: emptied so that it does not stay readable.
				unix.Read(int(p.Fd), cnt[:])
			}
		}
	}
	for _, hs := range h.sets {
		for k := range hs.set.Rings() {
			hs.set.Awake(k)
		}
	}
	return true
}

// handClose lets go of every set: the daemon takes them back.
func (d *daemonSource) handClose() {
	h := &d.streams.hand
	for _, hs := range h.sets {
		hs.close()
	}
	h.sets = nil
}

func (hs *handedSet) close() {
	hs.set.Close()
	unix.Close(hs.wake)
}
