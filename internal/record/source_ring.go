package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/perfdata"
)

// A daemon session's records come through shared memory when the daemon
// offers it (client.Session.ShareRing): the daemon writes each record into
// a ring this process maps, as the kernel writes into perf's mmap rings,
// and the recording takes them without a round trip — or any system call —
// per record, sleeping on the ring's futex when it is empty. Lost records
// come in the ring too, where they happened: a PERF_RECORD_LOST at the
// time and CPU of the first of them. A daemon without session rings, or
// one that refuses the ring, is read over its socket as before.

// ringDrainMax bounds the records one drain takes from the ring, so that a
// daemon that never stops delivering does not keep the recording from
// finishing its rounds and looking for new events.
const ringDrainMax = 1 << 16

// ringWaitMax bounds a wait on the ring: the daemon may leave the last
// records of a burst for the reader to find (see client.SessionRing.Wait).
const ringWaitMax = 10 * time.Millisecond

// ringIdleLost is how long the ring stays empty before the recording asks
// the daemon for the losses that wait for a record to follow them.
const ringIdleLost = 100 * time.Millisecond

// ringState is the session's ring and what the end of the recording
// settles.
type ringState struct {
	r       *client.SessionRing
	size    int    // the ring's data bytes
	stopped bool   // the recording is stopping
	settled bool   // the final drain is done
	handed  uint64 // lost records the daemon handed over at the sync
	big     uint64 // of which too large
	// idleLost and idleBig are what the daemon handed over while the
	// recording ran (TakeLost), to report after the ring is drained.
	idleLost, idleBig uint64
	idleSince         time.Time // when the ring was last found empty after records; zero while busy
	err               error     // the sync's
}

// shareRing asks the daemon for the session's ring, unless told not to. A
// daemon that cannot give one leaves the session to be read over the
// socket: one that does not know the request, or refused it, answers
// before it changed the session; if the ring cannot be used after the
// daemon made it, the session is replaced by a new one.
func (d *daemonSource) shareRing(bytes int) error {
	if d.noRing {
		return nil
	}
	r, err := d.s.ShareRing(bytes)
	if err == nil {
		d.ring = &ringState{r: r, size: r.Size()}
		return nil
	}
	d.ringErr = err
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return nil // refused: the session is as it was
	}
	d.s.Close()
	s, err := d.c.NewSession(client.SessionOptions{BufferBytes: bytes, Comm: true})
	if err != nil {
		return fmt.Errorf("daemon session: %w", err)
	}
	d.s = s
	return nil
}

func (d *daemonSource) ringWait(timeout time.Duration) {
	st := d.ring
	if st.r.Pending() > 0 || st.r.Wait(min(timeout, ringWaitMax)) {
		st.idleSince = time.Time{}
		return
	}
	if st.stopped {
		return
	}
	now := time.Now()
	if st.idleSince.IsZero() {
		st.idleSince = now
	}
	if now.Sub(st.idleSince) < ringIdleLost {
		return
	}
	st.idleSince = now
	// Idle for a while: losses the session has not written into the ring
	// (it was full) wait for a record that may not come; ask for them.
	// Every record in the ring came before them, so they are reported
	// after it is drained.
	lost, big, err := st.r.TakeLost()
	if err != nil {
		st.err = err
		return
	}
	st.idleLost += lost
	st.idleBig += big
}

// ringDrain gives k what the ring holds (at most ringDrainMax records).
// Once the recording stops it settles: it empties the ring, asks the
// daemon to deliver what producers published before now and to hand over
// the losses it could not put in the ring, and empties the ring again —
// emptying it first, so that what the daemon delivers then finds room.
func (d *daemonSource) ringDrain(to sink) error {
	st := d.ring
	if !st.stopped || st.settled {
		d.ringTake(to, ringDrainMax)
		if st.idleLost > 0 {
			d.big.Add(st.idleBig)
			to.lost(d.anyID(), st.idleLost, nil)
			st.idleLost, st.idleBig = 0, 0
		}
		if err := st.err; err != nil {
			st.err = nil
			return fmt.Errorf("daemon session: %w", err)
		}
		return nil
	}
	st.settled = true
	// Each pass takes at most a ring's worth, so that a daemon still
	// delivering (writers that go on) cannot keep the recording from
	// ending.
	most := st.size/(shmring.HeaderSize+16) + 1
	d.ringTake(to, most)
	st.handed, st.big, st.err = st.r.Sync()
	d.ringTake(to, most)
	st.handed += st.idleLost
	st.big += st.idleBig
	if st.handed > 0 {
		d.big.Add(st.big)
		to.lost(d.anyID(), st.handed, nil)
	}
	if bad, _ := st.r.Bad(); bad > 0 && st.err == nil {
		st.err = fmt.Errorf("daemon session ring: %d malformed records", bad)
	}
	return st.err
}

// ringTake gives k up to most records of the ring.
func (d *daemonSource) ringTake(to sink, most int) {
	for range most {
		rec, err := d.ring.r.Next()
		if err != nil {
			return // empty
		}
		if rec.Kind != wire.RingLost {
			d.take(to, &rec.Record)
			continue
		}
		id := d.anyID()
		if ev := d.byType[rec.ID]; ev != nil {
			id = ev.ids[0]
		}
		if rec.TooLarge {
			d.big.Add(rec.Lost)
		}
		to.lost(id, rec.Lost, &perfdata.Sample{ID: id, Time: rec.TS, CPU: uint32(rec.CPU)})
	}
}

// ringStop marks the recording stopped: the next drain settles.
func (d *daemonSource) ringStop() { d.ring.stopped = true }
