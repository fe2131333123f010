package daemon

import (
	"container/heap"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
)

// merge delivers the records of some rings in time order across them:
// each drainer's (ring k of every set). It is one goroutine's.
//
// A ring's records are in the order its producer reserved them, and a
// producer stamps a record after it reserved its space (see
// shmring.Reservation.Stamp). Each pass reads the clock, then looks at
// every ring: one with a committed record at its tail offers that record;
// one that is empty bounds the rest — whatever it publishes later is
// reserved after this look and so stamped after the clock was read; one
// whose tail record is reserved and not yet committed holds the merge
// until it is committed, for at most holdMax. The merge delivers the
// earliest record offered while it is no later than every bound and
// nothing holds, takes the next record of the same ring, and goes on.
// Records come out in time order across rings; within a ring they keep
// the ring's order, which may differ from time order by as much as a
// producer's goroutines raced between reserving and stamping (each is
// counted in RingStats.OutOfOrder, and ftrace stores a record whose time
// went backwards on a CPU with the time before it, as the kernel does).
//
// A record is read where it lies (shmring.Consumer.Peek) and handed to the
// connection's File as it is (subsys.File.Deliver), which copies it once
// into each consumer's buffer and validates it there; the tail moves past
// it after. The merge's Batch keeps the stream a run of records goes to
// locked from one to the next (see subsys.Batch): it is flushed every
// batchRun records, at the end of each pass, and before loss records are
// handed over.
type merge struct {
	rings      []*ringSource
	heap       ringHeap
	last       uint64         // the time of the last record delivered
	holds      int            // the passes a hold has lasted (again)
	outOfOrder *atomic.Uint64 // where OutOfOrder is counted
	batch      subsys.Batch
}

const (
	// mergeBatch bounds the records a merge delivers before its goroutine
	// looks at its requests again, so that producers that never stop
	// cannot keep a flush or a close waiting.
	mergeBatch = 4096
	// holdMaxDefault is the longest a ring's record, reserved and not yet
	// committed, holds the delivery of later records of other rings. A
	// producer between its reservation and its commit normally takes
	// nanoseconds; one preempted there, killed there, or hostile, would
	// otherwise stop every ring. A ring that holds past it is counted
	// (RingStats.Held) and never holds the merge again.
	holdMaxDefault = time.Millisecond
	// napMin is the nap of a merge that a producer's uncommitted record
	// holds (merge.again): short, so that the producer's commit comes
	// soon after, and not a sleep on a Go timer (see nap).
	napMin = 2 * time.Microsecond
)

// holdMax is holdMaxDefault; the tests that check the order on a busy
// machine raise it, so that a producer preempted between its reservation
// and its commit holds the merge as long as it takes.
var holdMax = holdMaxDefault

// nap sleeps for d in nanosleep(2), not on a Go timer: the runtime rounds
// a timer under a millisecond up to one when it has nothing else to run,
// and a millisecond's nap would let a busy producer fill its ring.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Nanosleep(&ts, nil)
}

// batchRun is the most records a merge delivers into a stream before it
// publishes them: the readers see them, and the stream's other writers
// (the socket's) wait for no more than that.
const batchRun = 256

// adopt takes r into the merge. A ring already in it is not taken twice
// — read twice a pass, its records would be delivered twice, and it would
// be released twice, its set unmapped under the other entry — nor one a
// reader has: its resume takes it in. (No path does either; the
// hand-over's did, once — see drainer.requests.)
func (m *merge) adopt(r *ringSource) {
	// A look through the drainer's rings: adopting is rare (an attach,
	// a take-back), and the list is the one truth of what is merged.
	if merged := slices.Contains(m.rings, r); merged || r.given != nil {
		r.log.Error("ring: taken in by its drainer while in its merge already, or given to a reader; ignored (a bug of the daemon's)", "merged", merged)
		return
	}
	r.batch = &m.batch
	m.rings = append(m.rings, r)
}

// ringRequests are what others ask of a drainer, queued under its mutex
// and taken between passes.
type ringRequests struct {
	adds    []*ringSource
	closes  []*ringSource
	flushes []chan struct{}
}

// adoptAdds moves the rings added into m. The caller holds the queue's mutex.
func (q *ringRequests) adoptAdds(m *merge) {
	for _, r := range q.adds {
		m.adopt(r)
	}
	// Cleared before reuse: a ring left in the backing array past the
	// slice's length stays reachable, and with it its buffer and its
	// connection's File, long after the connection is gone.
	clear(q.adds)
	q.adds = q.adds[:0]
}

// take moves the requests into m — each ring added adopted; each closing
// ring given its last budget — and returns the flushes asked for. The
// caller holds the queue's mutex.
func (q *ringRequests) take(m *merge) []chan struct{} {
	q.adoptAdds(m)
	for _, r := range q.closes {
		if !r.closing {
			r.closing = true
			// What the producer had not committed by now never will
			// be, for this connection; and a producer that goes on
			// publishing into its old ring gets one ring's worth more
			// delivered at most.
			r.cons.ProducerGone()
			r.budget = r.cons.Size()/shmring.HeaderSize + 1
		}
	}
	clear(q.closes)
	q.closes = q.closes[:0]
	flushes := q.flushes
	q.flushes = nil
	return flushes
}

// step is one turn of the loop of the goroutine that owns m (a drainer),
// after it took its requests: it answers the flushes asked —
// every committed record delivered first (drainAll) — or, when none was,
// makes one pass; then it lets go of the closing rings done with (release,
// to done). It says how many records the pass delivered and whether the
// owner should turn again at once rather than wait for records (again; a
// flush is always followed by a turn). nap is how the owner naps while a
// producer's uncommitted record holds the merge.
func (m *merge) step(flushes []chan struct{}, nap func(time.Duration), done func(r *ringSource, st RingStats)) (n int, more bool) {
	if len(flushes) > 0 {
		m.drainAll()
		for _, ch := range flushes {
			close(ch)
		}
		m.release(done)
		return 0, true
	}
	n, hold := m.pass(false)
	m.release(done)
	return n, m.again(n, hold, nap)
}

// again says, after a pass that delivered n records, whether the merge
// should pass again at once rather than wait for records: a full batch
// was delivered, or the heap still holds records — stamped after this
// pass read the clock, whose next pass's clock is later, or held by a
// producer between its reservation and its commit, which is let run
// (runtime.Gosched, then after a few tries nap; a sleep would make the
// producer pay a wake for its commit).
func (m *merge) again(n int, hold bool, nap func(time.Duration)) bool {
	switch {
	case n == mergeBatch:
		return true
	case hold && len(m.heap) > 0:
		if m.holds++; m.holds < 8 {
			runtime.Gosched()
		} else {
			nap(napMin)
		}
		return true
	case len(m.heap) > 0:
		m.holds = 0
		return true
	}
	m.holds = 0
	return false
}

// release lets go of the closing rings that have nothing more to deliver:
// each is dropped from the merge, its pending losses told, and handed
// with its final counts to done, the owner's.
func (m *merge) release(done func(r *ringSource, st RingStats)) {
	keep := m.rings[:0]
	for _, r := range m.rings {
		if !r.closing || r.have && r.budget > 0 {
			keep = append(keep, r)
			continue
		}
		m.drop(r)
		r.applyLosses(-1)
		done(r, r.stats())
	}
	clear(m.rings[len(keep):])
	m.rings = keep
}

// pass delivers up to mergeBatch records in time order (see merge) —
// every one offered, without bounds, when force is set — and says how
// many it delivered and whether a ring's uncommitted record held the rest.
func (m *merge) pass(force bool) (n int, hold bool) {
	defer m.batch.Flush()
	now := stamp.Now()
	bound := ^uint64(0)
	for _, r := range m.rings {
		if !r.have && m.fill(r, now, &bound, &hold) {
			heap.Push(&m.heap, r)
		}
	}
	for n < mergeBatch && len(m.heap) > 0 {
		r := m.heap[0]
		if !force && (hold || r.view.Time > bound) {
			break
		}
		if r.view.Time < m.last {
			m.outOfOrder.Add(1)
		} else {
			m.last = r.view.Time
		}
		r.deliver()
		r.cons.Advance(&r.view)
		n++
		if n%batchRun == 0 {
			m.batch.Flush()
		}
		if r.closing {
			r.budget--
		}
		// The ring stays at the top of the heap while its next record
		// is taken: one sift down, not a pop and a push — none when it
		// is the only one.
		if m.fill(r, now, &bound, &hold) {
			if len(m.heap) > 1 {
				heap.Fix(&m.heap, 0)
			}
		} else {
			heap.Pop(&m.heap)
			r.have = false
		}
	}
	return n, hold
}

// fill takes r's next record, reporting true — the caller puts r in the
// heap, or keeps it there — or says what its emptiness means for the
// others: see merge.
func (m *merge) fill(r *ringSource, now uint64, bound *uint64, hold *bool) bool {
	if r.closing && r.budget <= 0 {
		return false
	}
	v, err := r.cons.PeekMax(ringcheck.MaxRecord)
	if err == nil {
		if v.Time > now {
			// Stamped after this pass began — or later than any clock
			// could say: a record is stamped before it is published.
			if t := stamp.Now(); v.Time > t {
				v.Time = t
				r.future.Add(1)
			}
		}
		r.view, r.have, r.holdSince = v, true, 0
		return true
	}
	if r.closing || r.cons.Pending() == 0 {
		// Empty: no record follows the loss records yet.
		if len(r.waiting) > 0 {
			r.applyLosses(-1)
		}
		r.holdSince = 0
		*bound = min(*bound, now)
		return false
	}
	// Reserved, not committed yet.
	if r.untrusted {
		return false
	}
	t := stamp.Now()
	if r.holdSince == 0 {
		r.holdSince = int64(t)
	}
	if int64(t)-r.holdSince > int64(holdMax) {
		r.untrusted = true
		r.held.Add(1)
		r.log.Warn("ring: a record reserved and not committed held the others too long; this ring holds them no more", "held", time.Duration(int64(t)-r.holdSince))
		return false
	}
	*hold = true
	return false
}

// drainAll delivers everything committed in every ring now, whatever the
// bounds: a flush. Its work is bounded by a ring's worth of records per
// ring, so that producers that keep publishing cannot hold it.
func (m *merge) drainAll() {
	limit := 0
	for _, r := range m.rings {
		limit += r.cons.Size()/shmring.HeaderSize + 1
	}
	for limit > 0 {
		n, _ := m.pass(true)
		limit -= n
		if n < mergeBatch {
			// Records still in the heap were offered and delivered;
			// one pass more finds what was committed meanwhile.
			if n2, _ := m.pass(true); n2 == 0 {
				return
			}
		}
	}
}

// drop takes r out of the merge, once it is released.
func (m *merge) drop(r *ringSource) {
	if r.have {
		heap.Remove(&m.heap, r.heapIdx)
		r.have = false
	}
}

// ringHeap orders rings with a record by its time.
type ringHeap []*ringSource

func (h ringHeap) Len() int           { return len(h) }
func (h ringHeap) Less(i, j int) bool { return h[i].view.Time < h[j].view.Time }
func (h ringHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}
func (h *ringHeap) Push(x any) {
	r := x.(*ringSource)
	r.heapIdx = len(*h)
	*h = append(*h, r)
}
func (h *ringHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return r
}
