package shmring

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// # Ring sets
//
// A ring set is R rings in one memfd, one per CPU the consumer drains
// apart: a producer publishes into the ring of the CPU it runs on (struct
// rseq's cpu_id, read right before it reserves), so that the threads of a
// process on different CPUs never share a head line, and a consumer — the
// daemon's drainer of ring index k — takes ring k of every producer. Each
// ring is, byte for byte, the ring described above, at file offset
// P + k·(P+S), after a first page the set keeps reserved (zero): P +
// R·(P+S) bytes in all.
//
// R is the consumer's choice (the daemon says it in its Hello reply), and
// the consumer takes the geometry from the memfd's size and its own R —
// the memfd sealed against growing and shrinking, S a valid data size —
// and checks every ring's header as it checks a ring's (AttachSet): the
// set has no header of its own to believe or not. With fewer rings than
// CPUs a ring holds the records of CPUs k, k+R, …: still correct for a
// consumer that merges its rings by time, since each ring is in its
// producer's reservation order. A migration between the CPU read and the
// reservation puts a record in another CPU's ring: harmless, the ring
// takes any number of producers, and the record's CPU field says where
// its producer read it.
//
// Every ring keeps its own drop counters, sleeping word and key: a
// producer's losses are per ring (and told in band in that ring, by the
// caller), and a consumer sleeps on each ring with its own watermark. All
// rings of a set wake their consumer through one eventfd (WakeByEventfd).

// MaxSetRings bounds the rings of a set.
const MaxSetRings = 1024

// ringOffset is the file offset of ring k's header page in a set of rings
// of size data bytes.
func ringOffset(page, size uint64, k int) int64 {
	return int64(page + uint64(k)*(page+size))
}

// A SetProducer publishes into the rings of a set: For(cpu) is the ring of
// CPU cpu. Its methods are safe for any number of goroutines, as a
// Producer's.
type SetProducer struct {
	fd     int
	ownFd  bool
	rings  []*Producer
	mask   uint32 // len(rings)-1 when that is a power of two
	pow2   bool
	wakeFd int // the eventfd every ring wakes by, or -1
}

// CreateSet makes a set of n rings of size data bytes each in a new memfd,
// sealed against shrinking and growing, and maps it for producing. The
// caller sends SetProducer.Fd to the consumer. Shared memory is allocated
// when first written: the rings of CPUs the process never runs on cost
// address space, not memory.
func CreateSet(n, size int) (*SetProducer, error) {
	fd, p, s, err := setMemfd("uetrace-ringset", "ring set", n, size)
	if err != nil {
		return nil, err
	}
	sp := &SetProducer{fd: fd, ownFd: true, wakeFd: -1}
	if err := sp.mapRings(n, p, s); err != nil {
		return nil, err
	}
	for _, r := range sp.rings {
		r.r.initHeader()
	}
	return sp, nil
}

// setMemfd makes the memfd of a set of n rings of size data bytes each
// (what: a "ring set" or a "stream set"), P + n·(P+S) bytes, sealed, and
// returns it with P and S.
func setMemfd(name, what string, n, size int) (fd int, page, s uint64, err error) {
	s = uint64(max(size, 0))
	if err := checkSetLen(n, what); err != nil {
		return -1, 0, 0, err
	}
	if err := checkSize(s); err != nil {
		return -1, 0, 0, err
	}
	page = pageSize()
	fd, err = SealedMemfd(name, uint64(ringOffset(page, s, n)))
	return fd, page, s, err
}

// checkSetLen checks the number of rings of a set.
func checkSetLen(n int, what string) error {
	if n < 1 || n > MaxSetRings {
		return fmt.Errorf("%s: %d rings: want 1 to %d: %w", what, n, MaxSetRings, unix.EINVAL)
	}
	return nil
}

// mapRings maps the n rings of the set for producing; on failure it
// closes the set.
func (sp *SetProducer) mapRings(n int, page, size uint64) error {
	sp.rings = make([]*Producer, 0, n)
	for k := range n {
		r, err := mapRingAt(sp.fd, ringOffset(page, size, k), page, size, unix.PROT_READ|unix.PROT_WRITE)
		if err != nil {
			sp.Close()
			return err
		}
		sp.rings = append(sp.rings, &Producer{r: r, fd: -1, wakeFd: -1})
	}
	sp.pow2 = n&(n-1) == 0
	sp.mask = uint32(n - 1)
	return nil
}

// setGeometry is what AttachSet, OpenSet and AttachStreams learn from a
// memfd that is to hold n rings (what: a "ring set" or a "stream set"):
// its size and seals checked, the ring size derived from its size and n,
// never from a header.
func setGeometry(fd, n int, what string) (page, size uint64, err error) {
	st, err := SealedSize(fd, what)
	if err != nil {
		return 0, 0, err
	}
	page = pageSize()
	if err := checkSetLen(n, what); err != nil {
		return 0, 0, err
	}
	rest := uint64(st) - page
	if uint64(st) <= page || rest%uint64(n) != 0 || rest/uint64(n) <= page {
		return 0, 0, fmt.Errorf("%s: the memfd's %d bytes are not a first page and %d rings: %w", what, st, n, unix.EINVAL)
	}
	size = rest/uint64(n) - page
	if err := checkSize(size); err != nil {
		return 0, 0, fmt.Errorf("%s: the memfd's %d bytes are not a first page and %d rings of a valid data size: %w", what, st, n, err)
	}
	return page, size, nil
}

// OpenSet maps for producing a set of n rings another process created (a
// child that inherited its memfd; the C interposer's library maps its
// process's set the same way). The caller keeps ownership of fd.
func OpenSet(fd, n int) (*SetProducer, error) {
	page, size, err := setGeometry(fd, n, "ring set")
	if err != nil {
		return nil, err
	}
	sp := &SetProducer{fd: fd, wakeFd: -1}
	if err := sp.mapRings(n, page, size); err != nil {
		return nil, err
	}
	for k, p := range sp.rings {
		if err := p.r.checkHeader(); err != nil {
			sp.Close()
			return nil, fmt.Errorf("ring set: ring %d: %w", k, err)
		}
	}
	return sp, nil
}

// AttachSet maps for consuming the set of n rings in memfd fd: n is the
// consumer's own count (its drainers), the ring size follows from the
// memfd's size, which must be sealed against shrinking and growing; every
// ring's header is checked as Attach checks one (the set has none of its
// own: its first page is reserved). Consumer
// k drains ring k. The mappings do not keep fd, which the caller may
// close; each Consumer is closed on its own.
func AttachSet(fd, n int) ([]*Consumer, error) {
	page, size, err := setGeometry(fd, n, "ring set")
	if err != nil {
		return nil, err
	}
	out := make([]*Consumer, 0, n)
	for k := range n {
		r, err := mapRingAt(fd, ringOffset(page, size, k), page, size, unix.PROT_READ)
		if err == nil {
			if err = r.checkHeader(); err != nil {
				r.unmap()
			}
		}
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("ring set: ring %d: %w", k, err)
		}
		out = append(out, newConsumer(r))
	}
	return out, nil
}

// Fd is the set's memfd, to send to the consumer.
func (sp *SetProducer) Fd() int { return sp.fd }

// Len is the number of rings.
func (sp *SetProducer) Len() int { return len(sp.rings) }

// Size is each ring's data size in bytes.
func (sp *SetProducer) Size() int { return int(sp.rings[0].r.size) }

// Ring is the producer of ring k.
func (sp *SetProducer) Ring(k int) *Producer { return sp.rings[k] }

// For is the ring of CPU cpu: ring Index(cpu).
func (sp *SetProducer) For(cpu uint32) *Producer { return sp.rings[sp.Index(cpu)] }

// Index is the index of CPU cpu's ring: cpu mod Len.
func (sp *SetProducer) Index(cpu uint32) int {
	if sp.pow2 {
		return int(cpu & sp.mask)
	}
	return int(cpu % uint32(len(sp.rings)))
}

// Dropped is what the set's rings counted as dropped, all together.
func (sp *SetProducer) Dropped() (records, bytes uint64) {
	for _, p := range sp.rings {
		r, b := p.Dropped()
		records += r
		bytes += b
	}
	return records, bytes
}

// WakeByEventfd makes every ring of the set wake its consumer by adding 1
// to one eventfd, instead of FUTEX_WAKE (see Producer.WakeByEventfd): one
// descriptor per set, which a consumer in Go can wait on in its runtime's
// netpoller. It returns the eventfd, to send with the set's memfd; the
// SetProducer owns it. Call it once, before the first Reserve.
func (sp *SetProducer) WakeByEventfd() (int, error) {
	fd, err := newWakeFd(&sp.wakeFd)
	for _, p := range sp.rings {
		p.wakeFd = sp.wakeFd
	}
	return fd, err
}

// Close unmaps the set, closes its eventfd and, if CreateSet made it, its
// memfd. No method may be running or be called after.
func (sp *SetProducer) Close() error {
	var err error
	for _, p := range sp.rings {
		if e := p.r.unmap(); e != nil && err == nil {
			err = e
		}
	}
	sp.rings = nil
	if sp.wakeFd >= 0 {
		unix.Close(sp.wakeFd)
		sp.wakeFd = -1
	}
	if sp.ownFd && sp.fd >= 0 {
		if e := unix.Close(sp.fd); e != nil && err == nil {
			err = e
		}
	}
	sp.fd = -1
	return err
}
