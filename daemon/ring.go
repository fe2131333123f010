package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/subsys"
)

// MaxRing is the largest ring data area a client may share: a client
// chooses its ring's size, and the daemon maps it twice (see
// internal/shmring), so an unbounded one would let a client spend the
// daemon's address space.
const MaxRing = 64 << 20

const (
	// drainBatch bounds the records a drainer delivers before it looks at
	// its requests again, so a producer that never stops cannot keep a
	// flush or a stop waiting.
	drainBatch = 4096
	// idleWait bounds a drainer's sleep on an idle ring: the futex wake
	// of the first publisher normally ends it; the timeout is what keeps a
	// producer that clears the sleeping word or never commits from
	// holding the drainer (see shmring.Consumer.Wait).
	idleWait = 200 * time.Millisecond
	// kickEvery is how often a flush or a stop repeats its wake while it
	// waits: a drainer between its look at the requests and its sleep
	// misses a wake, and would otherwise sleep out idleWait.
	kickEvery = 2 * time.Millisecond
	// idleNaps is how many times a drainer whose ring was just busy naps
	// and looks again before it sleeps on the ring (see poll): a producer
	// that publishes at least once per idleNaps*idleNap never pays a
	// FUTEX_WAKE.
	idleNaps = 20
	// idleNap is how long it naps: records published meanwhile are
	// drained in one batch when it looks again, long after their
	// producer left their cache lines. 50 µs at 10 M records/s of 72
	// bytes is 36 KiB: well within a default ring (1 MiB).
	idleNap = 50 * time.Microsecond
)

// RingStats are the fast path's counts for the rings of a Server's
// connections, live and closed.
type RingStats struct {
	Rings     uint64 // rings clients shared
	Delivered uint64 // records handed to the subsystem and accepted
	// Rejected are records the subsystem refused as it refuses a write: a
	// write index the connection does not have (ENOENT: no client can
	// write under another connection's events), a payload shorter than
	// the event's fields (EINVAL), a __data_loc that points outside
	// (EFAULT). A client that validates before it publishes has none.
	Rejected uint64
	// Disabled are records of events nothing was attached to any more
	// when they were drained: written while enabled, delivered to no one,
	// as a kernel write racing with a disable is.
	Disabled uint64
	// Dropped is what the producers say they dropped because the ring
	// was full — their claim, read when the ring is released.
	Dropped uint64
	// Torn, TooLong, Discarded and BadHead are the rings' own counts (see
	// shmring.Stats): records a dead producer never committed, records
	// longer than a ring, bytes skipped, heads not believed.
	Torn, TooLong, Discarded, BadHead uint64
}

func (a *RingStats) add(b RingStats) {
	a.Rings += b.Rings
	a.Delivered += b.Delivered
	a.Rejected += b.Rejected
	a.Disabled += b.Disabled
	a.Dropped += b.Dropped
	a.Torn += b.Torn
	a.TooLong += b.TooLong
	a.Discarded += b.Discarded
	a.BadHead += b.BadHead
}

// drainer delivers one connection's ring into the connection's File: the
// file resolves write indices, so a ring reaches only its own
// connection's events, and the writer's process is the connection's
// SO_PEERCRED pid, never anything the ring says.
type drainer struct {
	s    *Server
	log  *slog.Logger
	file *subsys.File
	w    subsys.Writer // TGID and Comm; PID (the thread) and CPU per record
	cons *shmring.Consumer
	buf  []byte

	// reqs are flushes waiting for the drainer to empty the ring: each is
	// closed once everything published before it was sent is delivered.
	reqs chan chan struct{}
	stop atomic.Bool
	done chan struct{}
	// nudge ends a nap (see poll) when a flush or a stop comes; nap is
	// the nap's timer.
	nudge chan struct{}
	nap   *time.Timer

	// Counted by the drainer goroutine; read by Stats under s.mu once
	// done is closed, or approximately (atomics) while it runs.
	delivered, rejected, disabled atomic.Uint64
}

// attachRing checks and maps the ring memfd a client shared and starts its
// drainer. The memfd is hostile input: shmring.Attach checks its type,
// size and seals (against growing and shrinking, so no access can fault)
// and its header; the size limit is the daemon's.
func (c *conn) attachRing(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("ring: fstat: %w", err)
	}
	if st.Size > int64(MaxRing)+int64(unix.Getpagesize()) {
		return fmt.Errorf("ring: the memfd has %d bytes; this daemon takes rings of at most %d: %w", st.Size, MaxRing, unix.EINVAL)
	}
	cons, err := shmring.Attach(fd)
	if err != nil {
		return err
	}
	d := &drainer{
		s: c.s, log: c.log, file: c.file, w: c.w, cons: cons,
		buf:   make([]byte, cons.Size()),
		reqs:  make(chan chan struct{}, 16),
		done:  make(chan struct{}),
		nudge: make(chan struct{}, 1),
	}
	c.s.mu.Lock()
	c.s.rings[d] = struct{}{}
	c.s.ringTotals.Rings++
	c.s.mu.Unlock()
	c.ring = d
	go d.run()
	return nil
}

func (d *drainer) run() {
	defer close(d.done)
	for {
		n := d.drain()
		// Flushes that came before this look are answered by the drain
		// that follows it.
		var waiting []chan struct{}
	collect:
		for {
			select {
			case ch := <-d.reqs:
				waiting = append(waiting, ch)
			default:
				break collect
			}
		}
		if len(waiting) > 0 {
			d.drainAll()
			for _, ch := range waiting {
				close(ch)
			}
			continue
		}
		if d.stop.Load() {
			// The connection is closed: what the producer had not
			// committed by now never will be, for this connection.
			d.cons.ProducerGone()
			d.drainAll()
			return
		}
		if n < drainBatch && !d.poll(n > 0) {
			d.cons.Wait(idleWait)
		}
	}
}

// poll looks for new records a few times, napping in between, before the
// drainer goes to sleep — when the ring was busy just now. A drainer that
// keeps up with its producer would otherwise sleep after every batch, and
// make the producer's next publish pay the FUTEX_WAKE system call that the
// ring exists to avoid; a poll while records keep coming lets them flow
// without it, as LTTng's consumer and perf's wakeup watermark do. The naps
// are on a timer, not on the ring's futex, so the producer is not asked to
// wake anyone; and they are naps rather than a spin, so that the drainer
// does not read each record right after its commit, while its producer
// writes the next one into the same cache lines — each line then moves
// between the cores once, in a batch (BenchmarkFloorConsumed in
// internal/shmring measures both). A flush or a stop ends the nap
// (kick nudges). It reports whether records came.
func (d *drainer) poll(busy bool) bool {
	if !busy {
		return false
	}
	if d.nap == nil {
		d.nap = time.NewTimer(idleNap)
	}
	for range idleNaps {
		d.nap.Reset(idleNap)
		select {
		case <-d.nap.C:
		case <-d.nudge:
			d.nap.Stop()
		}
		if d.cons.Pending() > 0 || len(d.reqs) > 0 || d.stop.Load() {
			return true
		}
	}
	return false
}

// drain delivers up to drainBatch records and says how many it took off
// the ring.
func (d *drainer) drain() int {
	for i := range drainBatch {
		rec, err := d.cons.Next(d.buf)
		if err != nil {
			return i
		}
		w := d.w
		w.PID = int32(rec.TID)
		w.CPU = int(rec.CPU)
		_, err = d.file.WriteStamped(w, rec.Time, rec.WriteIndex, rec.Payload)
		switch {
		case err == nil:
			d.delivered.Add(1)
		case errors.Is(err, unix.EBADF):
			d.disabled.Add(1)
		default:
			d.rejected.Add(1)
		}
	}
	return drainBatch
}

// drainAll delivers what the ring held when it was called: at most a full
// ring's worth of records (each is at least a header), so that a producer
// that keeps publishing cannot hold a flush or a stop forever.
func (d *drainer) drainAll() {
	for range d.cons.Size()/shmring.HeaderSize/drainBatch + 1 {
		if d.drain() < drainBatch {
			return
		}
	}
}

// kick wakes the drainer until wait is closed or the drainer is done.
func (d *drainer) kick(wait <-chan struct{}) {
	t := time.NewTicker(kickEvery)
	defer t.Stop()
	for {
		d.cons.Interrupt()
		select {
		case d.nudge <- struct{}{}:
		default:
		}
		select {
		case <-wait:
			return
		case <-d.done:
			return
		case <-t.C:
		}
	}
}

// flush returns once everything published into the ring before the call
// is delivered.
func (d *drainer) flush() {
	ch := make(chan struct{})
	select {
	case d.reqs <- ch:
	case <-d.done:
		return
	}
	d.kick(ch)
}

// close stops the drainer after it delivered what was committed, releases
// the ring and adds its counts to the server's.
func (d *drainer) close() {
	d.stop.Store(true)
	d.kick(d.done)
	<-d.done
	st := d.stats()
	d.cons.Close()
	// What a client lost is worth a line: drops mean the daemon did not
	// keep up; the others, a client that scribbles on its ring or died
	// mid-record.
	lvl := slog.LevelDebug
	if st.Dropped+st.Rejected+st.Torn+st.TooLong+st.Discarded+st.BadHead != 0 {
		lvl = slog.LevelWarn
	}
	d.log.Log(context.Background(), lvl, "ring released", "delivered", st.Delivered, "dropped", st.Dropped,
		"rejected", st.Rejected, "disabled", st.Disabled, "torn", st.Torn, "too_long", st.TooLong,
		"discarded_bytes", st.Discarded, "bad_head", st.BadHead)
	d.s.mu.Lock()
	delete(d.s.rings, d)
	st.Rings = 0 // counted when attached
	d.s.ringTotals.add(st)
	d.s.mu.Unlock()
}

func (d *drainer) stats() RingStats {
	cs := d.cons.Stats()
	dropped, _ := d.cons.Dropped()
	return RingStats{
		Delivered: d.delivered.Load(), Rejected: d.rejected.Load(), Disabled: d.disabled.Load(),
		Dropped: dropped, Torn: cs.Torn, TooLong: cs.TooLong, Discarded: cs.Discarded, BadHead: cs.BadHead,
	}
}

// Flush delivers everything clients have published into their rings so
// far: a reader that calls it sees every record whose Write returned
// before, as with the kernel's synchronous write. The daemon flushes
// before each trace and session read it serves; in-process users of the
// Server's Subsystem call it themselves.
func (s *Server) Flush() {
	s.mu.Lock()
	ds := make([]*drainer, 0, len(s.rings))
	for d := range s.rings {
		ds = append(ds, d)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(d.flush)
	}
	wg.Wait()
}

// RingStats returns the fast path's counts: those of closed connections
// exactly; a live ring's may lag its drainer. Shmring's counts of a live
// ring (torn, discarded...) are added when it closes, since only its
// drainer may read them.
func (s *Server) RingStats() RingStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ringTotals
	for d := range s.rings {
		t.Delivered += d.delivered.Load()
		t.Rejected += d.rejected.Load()
		t.Disabled += d.disabled.Load()
	}
	return t
}
