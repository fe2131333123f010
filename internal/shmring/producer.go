package shmring

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Meta is what a record carries besides its payload. The ring stores it as
// given: the caller takes the time and knows the tid and CPU.
type Meta struct {
	Time       uint64 // CLOCK_MONOTONIC nanoseconds
	WriteIndex uint32
	TID        uint32
	CPU        uint32
}

// A Producer publishes records into a ring. Its methods may be called by any
// number of goroutines at once; none makes a system call, takes a lock or
// allocates, except the one FUTEX_WAKE when the consumer said it sleeps.
type Producer struct {
	r      *ring
	fd     int
	ownFd  bool
	wakeFd int // an eventfd (ours) to write instead of FUTEX_WAKE, or -1
	wakes  atomic.Uint64
	// tries bounds Reserve's compare-and-swap attempts (0: no bound); see
	// BoundTries.
	tries int
	// tail is the shared tail as a producer last loaded it: the space up
	// to it is known free. Reserve loads the shared one only when this
	// says the record may not fit, so that the line the consumer stores
	// its tail in is not read by the producers' core per record. The
	// shared tail only grows, so an old copy only makes the ring look
	// fuller than it is: never a record written over one not yet read.
	tail atomic.Uint64
}

// Open maps for producing a ring another process created (a child that
// inherited its memfd). The caller keeps ownership of fd.
func Open(fd int) (*Producer, error) {
	page, size, err := geometry(fd)
	if err != nil {
		return nil, err
	}
	r, err := mapRing(fd, page, size, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		return nil, err
	}
	if err := r.checkHeader(); err != nil {
		r.unmap()
		return nil, err
	}
	return &Producer{r: r, fd: fd, wakeFd: -1}, nil
}

// WakeByEventfd makes the producer wake a sleeping consumer by adding 1
// to an eventfd instead of FUTEX_WAKE on the ring's sleeping word: for a
// consumer that sleeps on many rings at once (epoll), which a futex wait
// cannot do. It returns the eventfd, to send to the consumer with the
// ring's memfd; the Producer owns it and closes it in Close. Call it once,
// before the first Reserve.
func (p *Producer) WakeByEventfd() (int, error) { return newWakeFd(&p.wakeFd) }

// Fd is the ring's memfd, to send to the consumer.
func (p *Producer) Fd() int { return p.fd }

// Size is the ring's data size in bytes.
func (p *Producer) Size() int { return int(p.r.size) }

// Dropped is what the ring counted as dropped because it was full: records
// and their bytes, from every producer of this ring.
func (p *Producer) Dropped() (records, bytes uint64) {
	return atomic.LoadUint64(p.r.dropped), atomic.LoadUint64(p.r.dropBytes)
}

// Wakes is how many wake-up system calls (FUTEX_WAKE, or a write to the
// wake eventfd) this Producer made.
func (p *Producer) Wakes() uint64 { return p.wakes.Load() }

// Close unmaps the ring and, if Create made it, closes its memfd. No method
// may be running or be called after.
func (p *Producer) Close() error {
	err := p.r.unmap()
	if p.wakeFd >= 0 {
		unix.Close(p.wakeFd)
		p.wakeFd = -1
	}
	if p.ownFd && p.fd >= 0 {
		if cerr := unix.Close(p.fd); cerr != nil && err == nil {
			err = cerr
		}
		p.fd = -1
	}
	return err
}

// A Reservation is ring space a producer owns until it commits: the record's
// header is written, its payload is to fill. The zero Reservation is the
// result of a dropped record.
type Reservation struct {
	p    *Producer
	rec  unsafe.Pointer
	word uint64 // the first word, committed bit clear
	n    int    // payload bytes
}

// Reserve takes the space for a record of payloadLen bytes and writes its
// header. It reports false if the ring has no room (or the record is larger
// than the ring): the record is then dropped and counted in the ring's drop
// counters, and the caller should count it for its event too.
//
// Between Reserve and Commit the consumer waits at this record: commit soon,
// and always.
func (p *Producer) Reserve(m Meta, payloadLen int) (Reservation, bool) {
	v, ok := p.TryReserve(m, payloadLen)
	if !ok {
		p.drop(align8(uint64(max(payloadLen, 0)) + HeaderSize))
	}
	return v, ok
}

// maxStale bounds the times Reserve looks again at a tail that is ahead of
// the head it loaded.
const maxStale = 64

// TryReserve is Reserve for a record the caller keeps when there is no
// room, to try again later: it counts no drop.
func (p *Producer) TryReserve(m Meta, payloadLen int) (Reservation, bool) {
	r := p.r
	if payloadLen < 0 || uint64(payloadLen) > r.size-HeaderSize {
		return Reservation{}, false
	}
	n := uint64(payloadLen) + HeaderSize
	sz := align8(n)
	var pos uint64
	stale := 0
	for try := 1; ; try++ {
		// Head first, then tail: tail only grows, so a tail newer than
		// this head can only make the room look smaller, never larger.
		h := atomic.LoadUint64(r.head)
		t := p.tail.Load()
		if h-t > r.size-sz {
			// Our copy says there is no room: load the shared tail.
			t = atomic.LoadUint64(r.tail)
			p.tail.Store(t)
			if t-h-1 < r.size && stale < maxStale {
				// A tail ahead of this head: between the two loads
				// other producers reserved and the consumer took their
				// records. The ring is not full; look again — a bounded
				// number of times, since a consumer that lies can keep
				// its tail ahead.
				stale++
				continue
			}
			if h-t > r.size-sz { // also catches a tail ahead of head
				return Reservation{}, false
			}
		}
		if atomic.CompareAndSwapUint64(r.head, h, h+sz) {
			pos = h
			break
		}
		if try == p.tries {
			return Reservation{}, false
		}
	}
	rec := r.at(pos)
	prefetchw(r.at(pos + prefetchAhead))
	word := n | uint64(r.stamp(pos))<<32
	// The first store: from here on a consumer that finds this producer
	// dead knows the length and skips exactly this record.
	storeFirst((*uint64)(rec), word)
	if sz > n && sz > HeaderSize {
		// Zero the padding, before the payload overwrites the rest of the
		// last word: no stale bytes stay in the ring to look like a header
		// to a consumer resynchronising after a crash.
		*(*uint64)(unsafe.Add(rec, sz-8)) = 0
	}
	*(*uint64)(unsafe.Add(rec, 8)) = m.Time
	*(*uint32)(unsafe.Add(rec, 16)) = m.WriteIndex
	*(*uint32)(unsafe.Add(rec, 20)) = m.TID
	*(*uint32)(unsafe.Add(rec, 24)) = m.CPU
	*(*uint32)(unsafe.Add(rec, 28)) = r.check(pos)
	return Reservation{p: p, rec: rec, word: word, n: payloadLen}, true
}

// Stamp sets the time, thread and CPU of a reserved record, over what
// Reserve wrote. A producer that takes its time stamp after it reserved
// gives its consumer a guarantee Reserve's Meta cannot: a record not yet
// reserved when the consumer found the ring empty carries a time later
// than the consumer's clock then — what a consumer merging several rings
// in time order needs (see the daemon).
func (v Reservation) Stamp(time uint64, tid, cpu uint32) {
	*(*uint64)(unsafe.Add(v.rec, 8)) = time
	*(*uint32)(unsafe.Add(v.rec, 20)) = tid
	*(*uint32)(unsafe.Add(v.rec, 24)) = cpu
}

func (p *Producer) drop(sz uint64) {
	atomic.AddUint64(p.r.dropped, 1)
	atomic.AddUint64(p.r.dropBytes, sz)
}

// Payload is the reserved payload space, in the ring. It is valid until
// Commit.
func (v Reservation) Payload() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(v.rec, HeaderSize)), v.n)
}

// Commit publishes the record and wakes the consumer if it said it sleeps
// and the ring now holds what it waits for: any record (a sleeping word of
// 1), or w bytes or more (a watermark w > 1; see Consumer.SleepAt).
func (v Reservation) Commit() {
	// The release: every store above is visible to whoever loads this word
	// committed.
	atomic.StoreUint64((*uint64)(v.rec), v.word|committed)
	// The load that pairs with the consumer's store of its sleeping word
	// (see the package doc): whichever of the two stores came first, either
	// the consumer sees this record or this load sees it sleeping. A line
	// the consumer writes only when it goes to sleep: while it is awake
	// this is a read of a cached line, no traffic.
	if atomic.LoadUint32(v.p.r.sleeping) != 0 {
		v.p.wake()
	}
}

// wake is the rare path of a commit that found the consumer asleep: the
// word is read again (a line the commit just read: kept out of Commit, so
// that Commit stays small enough to be inlined), and the consumer is woken
// if the ring holds what it waits for — any record (1), or w bytes (w > 1).
// For a watermark the producers' copy of the tail is old — it makes the
// ring look fuller than it is — so a check it passes is made again on the
// shared tail, which the consumer published before it said it sleeps:
// that line is read only when a wake is likely, not per record. The ring's
// fill is head, loaded after this commit, not the end of this record: the
// record at the tail may be the last one committed, behind records
// committed while the consumer was looking. The CAS from the word read
// lets one publisher per sleep, the first, pay the system call; the
// consumer clears the word itself when it wakes for any other reason.
func (p *Producer) wake() {
	s := atomic.LoadUint32(p.r.sleeping)
	if s > 1 {
		h := atomic.LoadUint64(p.r.head)
		if h-p.tail.Load() < uint64(s) {
			return
		}
		t := atomic.LoadUint64(p.r.tail)
		p.tail.Store(t)
		if h-t < uint64(s) {
			return
		}
	}
	if s != 0 && atomic.CompareAndSwapUint32(p.r.sleeping, s, 0) {
		if p.wakeFd >= 0 {
			eventfdAdd(p.wakeFd)
		} else {
			futexWake(p.r.sleeping)
		}
		p.wakes.Add(1)
	}
}

// Write publishes one record of payload. It reports false if the record was
// dropped (and counted) because the ring was full.
func (p *Producer) Write(m Meta, payload []byte) bool {
	v, ok := p.Reserve(m, len(payload))
	if !ok {
		return false
	}
	copy(v.Payload(), payload)
	v.Commit()
	return true
}

// Writev publishes one record whose payload is the concatenation of iov,
// as writev(2) gathers it. It reports false if the record was dropped.
func (p *Producer) Writev(m Meta, iov [][]byte) bool {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	v, ok := p.Reserve(m, n)
	if !ok {
		return false
	}
	dst := v.Payload()
	for _, b := range iov {
		dst = dst[copy(dst, b):]
	}
	v.Commit()
	return true
}
