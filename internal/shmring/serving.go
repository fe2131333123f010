package shmring

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The roles reversed: a trusted producer — the daemon, delivering a
// session's records — and a consumer in another process that may be
// hostile. Everything the package doc says of the consumer's side holds
// for the producer's too, read the other way round: the producer's
// mapping and geometry are its own (Create), so no write of its can leave
// the 2S window whatever head says; what a consumer scribbles on head,
// tail, the drop counters or the data only ever costs that consumer its
// own records. Two things a hostile consumer could still do to a producer
// are bounded here:
//
//   - Reserve's compare-and-swap retries while head moves under it. Among
//     the producer's own goroutines that is contention, which ends; a
//     consumer storing to head in a loop could keep it going. BoundTries
//     makes Reserve give up (drop and count) after a number of attempts.
//   - Commit makes a FUTEX_WAKE system call whenever the sleeping word
//     says 1, which a consumer can keep saying. CommitQuiet publishes
//     without looking, and reports whether the consumer said it sleeps;
//     the caller wakes it (Wake) when its own policy allows — at most
//     once per so many records or so much time.

// BoundTries makes Reserve drop the record (and count it) after n failed
// compare-and-swaps of head, n ≥ 1; 0 removes the bound. It is for a
// producer whose consumer is not trusted; call it before the first Reserve.
func (p *Producer) BoundTries(n int) { p.tries = n }

// CommitQuiet publishes the record as Commit does, but does not wake the
// consumer: it reports whether the consumer said it sleeps, and leaves the
// Wake to the caller.
func (v Reservation) CommitQuiet() (sleeping bool) {
	atomic.StoreUint64((*uint64)(v.rec), v.word|committed)
	return atomic.LoadUint32(v.p.r.sleeping) != 0
}

// Wake wakes the consumer if it still says it sleeps: Commit's wake, for
// callers of CommitQuiet. Only the goroutine whose CAS clears the word
// makes the system call; it reports whether this one did.
func (p *Producer) Wake() bool {
	if atomic.CompareAndSwapUint32(p.r.sleeping, 1, 0) {
		futexWake(p.r.sleeping)
		p.wakes.Add(1)
		return true
	}
	return false
}

// Backlog is how many bytes the ring holds that the consumer has not yet
// said it consumed: head less the shared tail. It is the consumer's word,
// for decisions that only concern it (when to wake it); a hostile consumer
// can make it say anything.
func (p *Producer) Backlog() uint64 {
	return atomic.LoadUint64(p.r.head) - atomic.LoadUint64(p.r.tail)
}

// CloseFd closes the ring's memfd, once it has been handed to the consumer,
// and keeps the mapping: a producer that lives long need not hold a
// descriptor for it. Close then only unmaps.
func (p *Producer) CloseFd() error {
	if p.fd < 0 {
		return nil
	}
	var err error
	if p.ownFd {
		err = unix.Close(p.fd)
	}
	p.fd = -1
	return err
}
