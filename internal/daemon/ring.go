package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// RingStats are the fast path's counts for the ring sets of a Server's
// connections and FUSE shares, live and closed.
type RingStats struct {
	Rings     uint64 // ring sets clients shared
	Released  uint64 // of them, those released: producer gone, records delivered
	Delivered uint64 // records handed to the subsystem and accepted
	// Rejected are records the subsystem refused as it refuses a write: a
	// write index the connection does not have (ENOENT: no client can
	// write under another connection's events), a payload shorter than
	// the event's fields (EINVAL), a __data_loc that points outside
	// (EFAULT); and loss records that are not 16 bytes or name no event
	// of the connection. A client that validates before it publishes has
	// none.
	Rejected uint64
	// Disabled are records of events nothing was attached to any more
	// when they were delivered: written while enabled, delivered to no
	// one, as a kernel write racing with a disable is.
	Disabled uint64
	// Voided are records a producer reserved and gave up (write index
	// preload.VoidIndex): the interposer's, for a write whose buffer
	// faulted or that the daemon had to answer through FUSE. Skipped.
	Voided uint64
	// Lost is the records clients said, in loss records, that they
	// dropped because their ring was full; LostRecords the loss records
	// that said so. Every one of those records counts in its event's
	// consumers' lost counts.
	Lost, LostRecords uint64
	// LostCapped are loss records that claimed more records than their
	// ring's producer could have dropped since it shared the ring — one
	// per nanosecond on each possible CPU, less what it claimed before:
	// cut to that, so that no client's number can wrap or swamp the lost
	// counts its event's consumers sum with others'.
	LostCapped uint64
	// Dropped is what the producers' rings say were dropped because they
	// were full — their claim, read when the ring is released; it counts
	// every record a producer could not reserve, its loss records
	// included, so it is not comparable with Lost record for record.
	Dropped uint64
	// ForgedTID are records whose thread id is a live thread of another
	// process than the connection's: delivered under the connection's
	// process id instead, so that no client can write under another
	// process's thread.
	ForgedTID uint64
	// UncheckedTID are records whose thread id the daemon had not checked
	// when its ring's ration of checks was spent (package ringcheck): delivered
	// under the connection's process id, so that made-up thread ids cost
	// their producer, not the ring's drainer.
	UncheckedTID uint64
	// Future are records stamped later than the daemon's clock when it
	// read them — impossible for a record stamped before it was
	// published: delivered with the daemon's time instead, so that no
	// client can push time forward in a CPU's trace buffer.
	Future uint64
	// OutOfOrder are records delivered with a time earlier than a record
	// delivered before them (see the Server's doc on the merge).
	OutOfOrder uint64
	// Held is how many times a ring's record reserved and not committed
	// held the merge past holdMax; such a ring never holds it again.
	Held uint64
	// Torn, TooLong, Discarded and BadHead are the rings' own counts (see
	// shmring.Stats): records a dead producer never committed, records
	// longer than a ring, bytes skipped, heads not believed.
	Torn, TooLong, Discarded, BadHead uint64
	// Sleeps are the times the drainers of ring sets slept, Woken those a
	// producer's wake (or a request) ended, Timeouts those their timeout
	// ended (drainer.go): what they cost is per wake, not per record.
	Sleeps, Woken, Timeouts uint64
}

func (a *RingStats) add(b RingStats) {
	a.Rings += b.Rings
	a.Released += b.Released
	a.Delivered += b.Delivered
	a.Rejected += b.Rejected
	a.Disabled += b.Disabled
	a.Voided += b.Voided
	// Lost and Dropped are the sums of clients' claims: they saturate
	// rather than wrap.
	a.Lost = min(a.Lost, math.MaxUint64-b.Lost) + b.Lost
	a.LostRecords += b.LostRecords
	a.LostCapped += b.LostCapped
	a.Dropped = min(a.Dropped, math.MaxUint64-b.Dropped) + b.Dropped
	a.ForgedTID += b.ForgedTID
	a.UncheckedTID += b.UncheckedTID
	a.Future += b.Future
	a.OutOfOrder += b.OutOfOrder
	a.Held += b.Held
	a.Torn += b.Torn
	a.TooLong += b.TooLong
	a.Discarded += b.Discarded
	a.BadHead += b.BadHead
	a.Sleeps += b.Sleeps
	a.Woken += b.Woken
	a.Timeouts += b.Timeouts
}

// newRingSource is ring cons of a set, shared now, whose records are
// written by w (its TGID and Comm) into f: a connection's or a FUSE
// share's.
func newRingSource(log *slog.Logger, f *subsys.File, w subsys.Writer, cons *shmring.Consumer) *ringSource {
	r := &ringSource{log: log, file: f, w: w, cons: cons, losses: ringcheck.NewLossBudget(time.Now(), 0)}
	r.threads.Init(w.TGID)
	return r
}

// ringSource is ring k of a set as drainer k drains it. The set's File (its
// connection's, its FUSE share's) resolves write indices, so a ring
// reaches only its own file's events, and the writer's process is the
// connection's SO_PEERCRED pid or the FUSE caller, never anything the ring
// says.
type ringSource struct {
	log   *slog.Logger
	file  *subsys.File
	w     subsys.Writer // TGID and Comm; PID (the thread) and CPU per record
	cons  *shmring.Consumer
	set   *ringSet      // the set the ring is of
	batch *subsys.Batch // its merge's (merge.adopt)
	// readers are the counts the session readers it was handed to
	// reported, added when it was taken back (handover.go).
	readers atomic.Pointer[RingStats]

	// The drainer's own.
	view      shmring.View // the ring's next record, in place, when have
	have      bool
	heapIdx   int
	holdSince int64                // when its uncommitted record began to hold the merge; 0 if not
	untrusted bool                 // held the merge past holdMax once: never holds it again
	closing   bool                 // the connection is gone: drain what is committed, then release
	budget    int                  // records a closing ring may still deliver
	threads   ringcheck.Threads    // the records' thread ids
	losses    ringcheck.LossBudget // its loss records' claims, cut
	given     *handedSet           // the hand-over its drainer gave it to, or nil
	waiting   []loss               // loss records waiting for the ring's next record

	// Counted by its drainer; read by Stats at any time.
	delivered, rejected, disabled, voided, lost, lostRecs atomic.Uint64
	future, held, lostCapped                              atomic.Uint64
}

// stats are all of the ring's counts: live's and those only its drainer
// may read (shmring's), taken when the ring is released.
func (r *ringSource) stats() RingStats {
	st := r.live()
	st.Released = 1
	cs := r.cons.Stats()
	st.Dropped, _ = r.cons.Dropped()
	st.Torn, st.TooLong, st.Discarded, st.BadHead = cs.Torn, cs.TooLong, cs.Discarded, cs.BadHead
	return st
}

// live are the counts of a ring its drainer still drains, with those of
// the readers it was handed to.
func (r *ringSource) live() RingStats {
	st := r.own()
	if rd := r.readers.Load(); rd != nil {
		st.add(*rd)
	}
	return st
}

// own are the counts of the ring's drainer.
func (r *ringSource) own() RingStats {
	return RingStats{
		Delivered: r.delivered.Load(), Rejected: r.rejected.Load(), Disabled: r.disabled.Load(), Voided: r.voided.Load(),
		Lost: r.lost.Load(), LostRecords: r.lostRecs.Load(), LostCapped: r.lostCapped.Load(),
		ForgedTID: r.threads.Forged(), UncheckedTID: r.threads.Unchecked(), Future: r.future.Load(), Held: r.held.Load(),
	}
}

// Flush delivers everything clients have published into their ring sets
// so far — every drainer draining at once: a
// reader that calls it sees every record whose Write returned before, as
// with the kernel's synchronous write. The daemon flushes before each
// trace and session read it serves; in-process users of the Server's
// Subsystem call it themselves.
func (s *Server) Flush() {
	// Every one is asked before any is waited for: they drain at once.
	var buf [maxDrainers]chan struct{}
	asked := buf[:0]
	for _, d := range s.drainers.d {
		asked = append(asked, d.askFlush())
	}
	for _, ch := range asked {
		if ch != nil {
			<-ch
		}
	}
}

// RingStats returns the fast path's counts: those of closed connections
// exactly; a live ring's may lag its drainer. Shmring's counts of a live ring (torn, discarded...) and its
// producer's drops are added when it is released, since only its drainer
// may read them.
func (s *Server) RingStats() RingStats {
	t := s.drainers.stats()
	t.OutOfOrder = s.drainers.outOfOrder.Load()
	return t
}

// logRelease writes to log what a released ring or ring set delivered and
// lost: drops mean the daemon did not keep up; the others, a client that
// scribbles on its ring or died mid-record.
func logRelease(log *slog.Logger, st RingStats) {
	lvl := slog.LevelDebug
	if st.Dropped|st.Lost|st.LostCapped|st.Rejected|st.Torn|st.TooLong|st.Discarded|st.BadHead|st.ForgedTID|st.UncheckedTID|st.Future|st.Held != 0 {
		lvl = slog.LevelWarn
	}
	log.Log(context.Background(), lvl, "ring released", "delivered", st.Delivered, "dropped", st.Dropped,
		"lost", st.Lost, "lost_capped", st.LostCapped, "rejected", st.Rejected, "disabled", st.Disabled, "voided", st.Voided, "torn", st.Torn, "too_long", st.TooLong,
		"discarded_bytes", st.Discarded, "bad_head", st.BadHead, "forged_tid", st.ForgedTID, "unchecked_tid", st.UncheckedTID, "future", st.Future,
		"held", st.Held)
}

// deliver hands the ring's current record, where it lies, to the
// connection's File; a loss record is kept for the record that follows it.
func (r *ringSource) deliver() {
	v := &r.view
	w := r.w
	w.PID = r.threads.Thread(v.TID)
	w.CPU = ringcheck.CPU(v.CPU)
	if v.WriteIndex == preload.VoidIndex {
		r.voided.Add(1)
		return
	}
	if v.WriteIndex == wire.LostIndex {
		idx, claim, ok := ringcheck.ParseLoss(v)
		if !ok {
			r.rejected.Add(1)
			return
		}
		if len(r.waiting) == ringcheck.MaxLosses {
			r.applyLosses(-1)
		}
		n, capped := r.losses.Cut(claim)
		if capped {
			r.lostCapped.Add(1)
		}
		r.waiting = append(r.waiting, loss{w: w, time: v.Time, idx: idx, n: n})
		return
	}
	r.applyLosses(w.CPU)
	_, err := r.file.Deliver(w, v.Time, v, r.batch)
	switch {
	case err == nil:
		r.delivered.Add(1)
	case errors.Is(err, unix.EBADF):
		r.disabled.Add(1)
	default:
		r.rejected.Add(1)
	}
}

// A loss is a loss record waiting for the ring's next record.
type loss struct {
	w    subsys.Writer
	time uint64
	idx  uint32
	n    uint64
}

// applyLosses hands the losses waiting to the File. A producer publishes
// its loss records just before the record of the write that found room
// again, on whatever CPU it ran when it stamped them: they are placed on
// cpu, the CPU of that record, so that the trace's "CPU:N [LOST n
// EVENTS]" comes before it (ftrace.Ring.Drop puts it before the next
// record on its CPU). With cpu < 0 — no record follows yet — each keeps
// its own.
func (r *ringSource) applyLosses(cpu int) {
	if len(r.waiting) == 0 {
		return
	}
	r.batch.Flush() // WriteLost takes the streams' locks itself
	for _, l := range r.waiting {
		if cpu >= 0 {
			l.w.CPU = cpu
		}
		if err := r.file.WriteLost(l.w, l.time, l.idx, l.n); err != nil {
			r.rejected.Add(1)
			continue
		}
		r.lostRecs.Add(1)
		r.lost.Add(l.n)
	}
	clear(r.waiting)
	r.waiting = r.waiting[:0]
}

var errServerClosed = fmt.Errorf("the daemon is shutting down: %w", unix.ESHUTDOWN)
