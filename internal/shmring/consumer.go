package shmring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotReady is Next's answer when there is no committed record at the
// tail now: the ring is empty, or a producer has reserved but not yet
// committed the next record. Try again later, or Wait.
var ErrNotReady = fmt.Errorf("no committed record at the ring's tail yet: %w", unix.EAGAIN)

// A Record is one record as the consumer copied it out of the ring.
type Record struct {
	Meta
	Payload []byte // in the buffer passed to Next
}

// Stats are the consumer's counts. Every byte the consumer's tail passed is
// in Bytes or Discarded.
type Stats struct {
	Records   uint64 // records delivered
	Bytes     uint64 // their bytes in the ring, headers and padding included
	Torn      uint64 // records never committed whose length was known, skipped after ProducerGone
	TooLong   uint64 // committed records larger than Next's buffer, skipped
	Discarded uint64 // bytes skipped without delivery: torn and too-long records, and garbage
	BadHead   uint64 // times head was behind the tail or more than the ring's size ahead of it
}

// A Consumer drains a ring it treats as hostile: see the package doc. It is
// for one goroutine.
type Consumer struct {
	r    *ring
	tail uint64 // ours; the shared one is written, never read back
	pub  uint64 // the tail last published
	// head is where the last head the consumer believed said the
	// reserved bytes end: tail <= head <= tail+S. Records before it are
	// taken without loading the shared head again, so that its line —
	// which every producer's CAS takes — does not move to the consumer's
	// core per record (see Next).
	head uint64
	// batch is how far the tail moves past pub before take publishes it:
	// an eighth of the ring, or never (DeferPublish) — a field, so that the
	// choice costs the per-record path nothing.
	batch    uint64
	deferred bool // publishes only when told (DeferPublish)
	gone     bool
	stats    Stats
}

// Attach maps the ring in memfd fd for consuming. It checks the memfd's
// size and seals and the header's constant fields; the mapping does not keep
// fd, which the caller may close.
func Attach(fd int) (*Consumer, error) {
	page, size, err := geometry(fd)
	if err != nil {
		return nil, err
	}
	// The data read-only: nothing the consumer does writes there.
	r, err := mapRing(fd, page, size, unix.PROT_READ)
	if err != nil {
		return nil, err
	}
	if err := r.checkHeader(); err != nil {
		r.unmap()
		return nil, err
	}
	return newConsumer(r), nil
}

// newConsumer is the consumer of a mapped ring whose header was checked.
func newConsumer(r *ring) *Consumer {
	// Resume where a previous consumer stopped. Any value is safe: every
	// position is validated.
	pub := atomic.LoadUint64(r.tail)
	return &Consumer{r: r, tail: pub &^ 7, pub: pub, head: pub &^ 7, batch: r.size / 8}
}

// Tail is the consumer's tail: the ring position of the next record it
// reads. The shared tail, which the producers see, may be behind it (it is
// published in batches, or only when told: DeferPublish).
func (c *Consumer) Tail() uint64 { return c.tail }

// Head is where the producers say the reserved bytes end: their word, as
// hostile as the rest of the ring.
func (c *Consumer) Head() uint64 { return atomic.LoadUint64(c.r.head) }

// Resume makes the consumer go on at ring position tail, without
// publishing it: a consumer that hands its ring to another reader for a
// while (internal/handover) takes it back where that reader stopped. Any
// value is safe, as at Attach — every position is validated — and it is
// rounded down to 8, as records lie. The head the consumer believed is
// forgotten (it was relative to the old tail), and the next publishing
// point stores the tail even if the consumer has not moved since: the
// shared tail may be one the other reader has not yet published.
func (c *Consumer) Resume(tail uint64) {
	c.tail = tail &^ 7
	c.head = c.tail
	// No tail is odd (tails are 8-aligned), so the next publish stores;
	// and take's batch counts from here (the tail is 1 past this).
	c.pub = c.tail - 1
}

// DeferPublish makes the consumer publish its tail only when told
// (PublishTail), never on its own — not in batches, not when it runs dry
// or sleeps: for a reader that may have to give back what it read (a
// pass over a handed ring whose commit fails, internal/handover) and so
// must not let the producers reuse that space before it knows.
func (c *Consumer) DeferPublish() {
	c.deferred = true
	c.batch = ^uint64(0)
}

// PublishTail publishes the consumer's tail now: the producers may reuse
// the space before it. With DeferPublish, the only way the tail is
// published.
func (c *Consumer) PublishTail() {
	if c.tail != c.pub {
		atomic.StoreUint64(c.r.tail, c.tail)
		c.pub = c.tail
	}
}

// Close unmaps the ring. The caller closes the memfd.
func (c *Consumer) Close() error { return c.r.unmap() }

// Size is the ring's data size: the largest record it can hold, and so the
// buffer Next needs to deliver any record.
func (c *Consumer) Size() int { return int(c.r.size) }

// Stats returns the consumer's counts.
func (c *Consumer) Stats() Stats { return c.stats }

// Dropped is what the producers say they dropped because the ring was full.
// It is their claim: a hostile producer can write anything there.
func (c *Consumer) Dropped() (records, bytes uint64) {
	return atomic.LoadUint64(c.r.dropped), atomic.LoadUint64(c.r.dropBytes)
}

// ProducerGone tells the consumer the producer process is dead (or is to be
// treated so): a record at the tail that is not committed will never be,
// and Next skips it and counts it instead of waiting.
func (c *Consumer) ProducerGone() { c.gone = true }

// Pending is how many bytes lie between the consumer's tail and head; 0 if
// head is not believable.
func (c *Consumer) Pending() int {
	a, ok := c.avail(atomic.LoadUint64(c.r.head))
	if ok {
		c.head = c.tail + a
	}
	return int(a)
}

// loadHead loads the shared head, counts it if it is not believable, and
// returns how many bytes it says follow the tail (0 for a head not
// believed), remembering where they end.
func (c *Consumer) loadHead() uint64 {
	a, ok := c.avail(atomic.LoadUint64(c.r.head))
	if !ok {
		c.stats.BadHead++
	}
	c.head = c.tail + a
	return a
}

// avail is how many bytes head says follow the tail, rounded down to 8 (a
// producer only ever moves head by multiples of 8; keeping the tail aligned
// keeps every first-word load aligned). A head behind the tail or more than
// the ring ahead of it is a lie: nothing is available until it is believable
// again — the consumer never moves its tail on the word of a head it does
// not believe, so a head scribbled for a moment costs nothing once put back.
func (c *Consumer) avail(h uint64) (uint64, bool) {
	a := h - c.tail
	if a > c.r.size {
		return 0, false
	}
	return a &^ 7, true
}

// Next copies the record at the tail into buf and moves the tail past it.
// The record's Payload is a slice of buf. A record longer than buf is
// skipped and counted; pass Size bytes to receive any record. With nothing
// committed at the tail it returns ErrNotReady. Each call does at most
// O(Size) work.
func (c *Consumer) Next(buf []byte) (Record, error) {
	rec, _, err := c.NextGrow(buf, 0)
	return rec, err
}

// NextGrow is Next for a reader that sizes its buffer to the records it
// meets: a record longer than buf and at most most bytes is read into a
// buffer grown for it, which NextGrow returns for the next call; only a
// record longer than most is skipped and counted. A ring's reader then
// holds about its largest record, not the largest any record may be.
func (c *Consumer) NextGrow(buf []byte, most int) (Record, []byte, error) {
	rec, n, sz, ok := c.find(max(uint64(len(buf)), uint64(max(most, 0))))
	if !ok {
		return Record{}, buf, ErrNotReady
	}
	if sz > uint64(len(buf)) {
		buf = make([]byte, min(max(sz, 2*uint64(len(buf))), uint64(most)))
	}
	// Copy once, then read only the copy: the producer may be rewriting
	// the ring as we read it. sz <= Size, and the window holds Size bytes
	// after any position.
	out := buf[:sz]
	copy(out, unsafe.Slice((*byte)(rec), sz))
	c.take(sz)
	return Record{
		Meta: Meta{
			Time:       binary.NativeEndian.Uint64(out[8:]),
			WriteIndex: binary.NativeEndian.Uint32(out[16:]),
			TID:        binary.NativeEndian.Uint32(out[20:]),
			CPU:        binary.NativeEndian.Uint32(out[24:]),
		},
		Payload: out[HeaderSize:n],
	}, buf, nil
}

// find is the one walk of the ring both ways of reading share (NextGrow
// copies the record it finds, Peek hands it over where it lies): it
// returns the committed record at the tail — stamped and checked for its
// position, 32..limit bytes, ending at or before a head read after its
// first word — with its length n and its size sz in the ring, without
// moving the tail past it. On its way it skips, moving the tail and
// counting, committed records longer than limit and, once the producer is
// gone, torn records and garbage; it stops (ok false, the tail published)
// at a record not yet committed, at the head, or after skipping Size
// bytes.
func (c *Consumer) find(limit uint64) (rec unsafe.Pointer, n, sz uint64, ok bool) {
	r := c.r
	var skipped uint64
	for skipped < r.size {
		t := c.tail
		// The bytes the last head believed says are reserved after the
		// tail. The shared head is loaded only when they are used up — and
		// then before the data: at the end of what is known, the record at
		// the tail is the one a producer is writing now, and reading its
		// line for nothing would pull it away from the producer's core.
		a := c.head - t
		if a == 0 {
			if a = c.loadHead(); a == 0 {
				break
			}
		}
		rec = r.at(t)
		w := atomic.LoadUint64((*uint64)(rec))
		n = uint64(uint32(w) & lenMask)
		sz = align8(n)
		done := uint32(w)&committed != 0
		stamped := uint32(w>>32) == r.stamp(t) && n >= HeaderSize
		valid := c.valid(rec, t, stamped, done, sz, a)
		if !valid || !done {
			// Every other verdict than "deliver" is made on a head loaded
			// after the first word, as if nothing were cached: a committed
			// record's end is then never beyond that head (its CAS
			// preceded its stores), so a record is not skipped for a head
			// that was merely old.
			if a = c.loadHead(); a == 0 {
				break
			}
			valid = c.valid(rec, t, stamped, done, sz, a)
		}
		switch {
		case valid && done && sz <= limit:
			return rec, n, sz, true
		case valid && done:
			c.stats.TooLong++
		case !c.gone:
			// Reserved and not yet committed, or the first store not yet
			// made: the producer is on its way. Or garbage, which a live
			// producer may fix; it stalls only its own ring.
			c.publish()
			return nil, 0, 0, false
		case valid:
			c.stats.Torn++
		default:
			sz = c.resync(a)
		}
		c.advance(sz)
		c.stats.Discarded += sz
		skipped += sz
	}
	c.publish()
	return nil, 0, 0, false
}

// take moves the tail past a record of sz bytes that was delivered, and
// publishes the tail once an eighth of the ring has been taken since it
// last did.
func (c *Consumer) take(sz uint64) {
	c.advance(sz)
	c.stats.Records++
	c.stats.Bytes += sz
	if c.tail-c.pub >= c.batch {
		c.publish()
	}
}

func (c *Consumer) advance(sz uint64) { c.tail += sz }

// valid says whether the record at rec, position t, whose first word
// carries its stamp (stamped) and says sz bytes, is whole within the a
// bytes head says follow the tail, and, if committed (done), carries its
// check too — stored before the committed word, so visible now: the
// second half of the record's position.
func (c *Consumer) valid(rec unsafe.Pointer, t uint64, stamped, done bool, sz, a uint64) bool {
	if !stamped || sz > a {
		return false
	}
	return !done || atomic.LoadUint32((*uint32)(unsafe.Add(rec, 28))) == c.r.check(t)
}

// resync finds, after the producer died, how far the next plausible record
// header is from the tail: the first 8-aligned position within a bytes
// whose first word carries its own stamp and a length that ends by a. With
// none, all a bytes are garbage.
func (c *Consumer) resync(a uint64) uint64 {
	r := c.r
	for off := uint64(8); off+8 <= a; off += 8 {
		q := c.tail + off
		w := atomic.LoadUint64((*uint64)(r.at(q)))
		n := uint64(uint32(w) & lenMask)
		if uint32(w>>32) == r.stamp(q) && n >= HeaderSize && off+align8(n) <= a {
			return off
		}
	}
	return a
}

// publish gives the producers the space the consumer has copied out. It is
// batched (an eighth of the ring, or when the consumer runs dry or sleeps)
// so that the line holding tail does not move between cores per record;
// a consumer that publishes only when told (DeferPublish) does not here.
func (c *Consumer) publish() {
	if !c.deferred {
		c.PublishTail()
	}
}

// ready says whether Next would deliver or skip something now.
func (c *Consumer) ready() bool {
	w := atomic.LoadUint64((*uint64)(c.r.at(c.tail)))
	a, _ := c.avail(atomic.LoadUint64(c.r.head))
	if a == 0 {
		return false
	}
	if c.gone {
		return true
	}
	n := uint64(uint32(w) & lenMask)
	return uint32(w)&committed != 0 && uint32(w>>32) == c.r.stamp(c.tail) && n >= HeaderSize && align8(n) <= a &&
		atomic.LoadUint32((*uint32)(unsafe.Add(c.r.at(c.tail), 28))) == c.r.check(c.tail)
}

// Wait sleeps until a producer publishes a record at the tail, or for at
// most timeout, and reports whether Next has something now. It may return
// early (a signal, a wake for a record behind an uncommitted one, a producer
// clearing the word); callers loop. The timeout is what keeps a producer
// that never commits, or lies, from holding the consumer asleep.
func (c *Consumer) Wait(timeout time.Duration) bool {
	ready, _ := c.wait(1, timeout)
	return ready
}

// wait is Wait with a watermark w (see SleepAt), also returning how the
// futex wait ended (nil if there was none), for the tests.
func (c *Consumer) wait(w uint32, timeout time.Duration) (bool, error) {
	if timeout <= 0 {
		c.publish()
		return c.ready(), nil
	}
	// Say we sleep, then look: the store pairs with the producer's load
	// after its committed store (see the package doc).
	if !c.SleepAt(w) {
		return true, nil
	}
	// Sleeps only while the word is still w: a producer that cleared it
	// since the look above makes this return at once.
	err := futexWait(c.r.sleeping, max(w, 1), timeout)
	c.Awake()
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		err = nil
	}
	return c.ready(), err
}

// Sleep is Wait's first half for a consumer that sleeps on many rings at
// once, woken by their producers' eventfds (Producer.SetWakeFd) through
// epoll: it says the consumer sleeps, then looks. It reports false if
// Next has something now — the consumer must not sleep, and the word is
// cleared again — and true if the consumer may sleep: the next producer
// to publish will wake it. After the sleep, Awake.
func (c *Consumer) Sleep() bool { return c.SleepAt(1) }

// SleepAt is Sleep with a watermark: the consumer says it sleeps until the
// ring holds w bytes or more — its sleeping word holds w — and the first
// producer whose commit leaves the ring that full wakes it (w ≤ 1: any
// commit, as Sleep). It reports false, the word cleared again, when the
// consumer must not sleep: a record is ready at the tail and the ring
// already holds w bytes (or the producer is gone: what is left is to be
// drained, not waited for). A consumer that takes its ring in large
// pieces — LTTng's sub-buffer hand-over, perf's wakeup_watermark, ftrace's
// buffer_percent — makes its producers pay a wake-up once per w bytes,
// not once per burst, and wakes itself as rarely; a record below the
// watermark waits for the consumer's own timeout.
//
// The watermark is measured from the tail the consumer publishes here to
// the head a producer loads after its commit: a producer decides on the
// shared tail, so its older copy of it never wakes the consumer early (see
// Producer.wake).
func (c *Consumer) SleepAt(w uint32) bool {
	w = max(w, 1)
	c.publish()
	atomic.StoreUint32(c.r.sleeping, w)
	if c.ready() && (w == 1 || c.gone || uint64(c.Pending()) >= uint64(w)) {
		atomic.StoreUint32(c.r.sleeping, 0)
		return false
	}
	return true
}

// Woken reports whether the consumer's sleeping word is clear: a producer
// took it to wake the consumer (or the consumer is awake). Unlike the other
// methods it may be called from any goroutine: a consumer of many rings
// that sleeps on one eventfd for all learns so which rings woke it.
func (c *Consumer) Woken() bool { return atomic.LoadUint32(c.r.sleeping) == 0 }

// Awake says the consumer no longer sleeps, so that producers stop paying
// for wakes.
func (c *Consumer) Awake() { atomic.StoreUint32(c.r.sleeping, 0) }

// Interrupt makes a Wait in progress on another goroutine return now, as a
// producer's wake would: the consumer's owner uses it to stop a drainer
// asleep on a ring whose producer is gone, without waiting out its
// timeout. It is the one Consumer method safe to call concurrently with
// the others; it touches only the shared sleeping word. It clears the word
// and wakes whatever the word holds — unlike a producer's wake it does not
// trust the word to say 1 while the consumer sleeps, since the producer
// may have scribbled on it — at the cost of a system call each time.
func (c *Consumer) Interrupt() {
	atomic.StoreUint32(c.r.sleeping, 0)
	futexWake(c.r.sleeping)
}
