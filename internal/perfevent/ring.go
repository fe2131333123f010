package perfevent

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// struct perf_event_mmap_page: the offsets uetrace writes or reads.
const (
	pgVersion       = 0
	pgCompatVersion = 4
	pgLock          = 8
	pgIndex         = 12
	pgOffset        = 16
	pgTimeEnabled   = 24
	pgTimeRunning   = 32
	pgCapabilities  = 40
	pgSize          = 72
	pgDataHead      = 1024
	pgDataTail      = 1032
	pgDataOffset    = 1040
	pgDataSize      = 1048

	// userpgSize is offsetof(struct perf_event_mmap_page, __reserved),
	// which the kernel writes into size.
	userpgSize = 96
	// capBit0IsDeprecated is cap_bit0_is_deprecated: the only capability
	// bit set, as no counter is readable from user space (no rdpmc, no
	// time conversion).
	capBit0IsDeprecated = 1 << 1
)

// MaxRingBytes bounds a ring's data area: larger is EPERM, as perf_mmap
// answers a mapping beyond perf_event_mlock_kb without CAP_IPC_LOCK. The
// daemon holds each ring's pages.
const MaxRingBytes = 64 << 20

// ring is a perf mmap ring in a memfd: the metadata page and 2^n data
// pages, written by uetrace as the kernel writes its own
// (kernel/events/ring_buffer.c), read in place by the caller, who maps the
// same memfd. One writer at a time (the Event's lock); the reader is not
// trusted: it may write anything anywhere in the mapping.
type ring struct {
	mem       []byte // the whole mapping
	data      []byte // the data pages
	mask      uint64
	head      uint64 // bytes ever written: ours, published as data_head
	tail      uint64 // the reader's data_tail, as last believed
	overwrite bool   // mapped without PROT_WRITE: the kernel ignores data_tail then
	watermark uint64 // bytes between wakeups (rb->watermark)
	wakeup    uint64 // head at which the last watermark wakeup was due (rb->wakeup)
	events    int    // samples since the last wakeup_events wakeup
	lost      uint64 // records lost since the last PERF_RECORD_LOST (rb->lost)
	paused    bool   // PERF_EVENT_IOC_PAUSE_OUTPUT
	poll      bool   // a wakeup is pending for poll (rb->poll)
}

// ringLayout checks a mapping's length as perf_mmap does: one metadata page
// and zero or a power of two of data pages; it returns the data size.
func ringLayout(length, page int) (int, error) {
	if length < page || length%page != 0 {
		return 0, fmt.Errorf("mmap of %d bytes: not a whole number of pages, the first the metadata page: %w", length, unix.EINVAL)
	}
	n := length/page - 1
	if n&(n-1) != 0 {
		return 0, fmt.Errorf("mmap of %d data pages: not a power of two: %w", n, unix.EINVAL)
	}
	if n*page > MaxRingBytes {
		return 0, fmt.Errorf("mmap of %d data bytes: more than the %d uetrace gives a ring: %w", n*page, MaxRingBytes, unix.EPERM)
	}
	return n * page, nil
}

// newRing sizes memfd to length (checked by ringLayout), maps it and
// writes the metadata page. watermark is wakeup_watermark, 0 for half the
// ring.
func newRing(memfd, length, page int, writable bool, watermark uint64) (*ring, error) {
	size, err := ringLayout(length, page)
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(memfd, int64(length)); err != nil {
		return nil, fmt.Errorf("sizing the ring's memfd to %d bytes: %w", length, err)
	}
	mem, err := unix.Mmap(memfd, 0, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the ring's memfd: %w", err)
	}
	r := &ring{mem: mem, data: mem[page:], mask: uint64(size) - 1, overwrite: !writable}
	// rb->watermark: min(size, wakeup_watermark), or half the ring.
	r.watermark = min(uint64(size), watermark)
	if r.watermark == 0 {
		r.watermark = uint64(size) / 2
	}
	r.put32(pgSize, userpgSize)
	r.put64(pgCapabilities, capBit0IsDeprecated)
	r.put64(pgDataOffset, uint64(page))
	r.put64(pgDataSize, uint64(size))
	return r, nil
}

func (r *ring) u64(off int) *uint64     { return (*uint64)(unsafe.Pointer(&r.mem[off])) }
func (r *ring) put64(off int, v uint64) { atomic.StoreUint64(r.u64(off), v) }
func (r *ring) put32(off int, v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&r.mem[off])), v)
}

// space is the room for a record of n bytes: CIRC_SPACE(head, tail, size),
// which keeps one byte free, as ring_buffer_has_space. The reader's
// data_tail is believed only between the tail believed last and the head;
// anything else leaves the last one.
func (r *ring) space(n int) bool {
	if r.overwrite {
		return n <= len(r.data)
	}
	if t := atomic.LoadUint64(r.u64(pgDataTail)); t-r.tail <= r.head-r.tail {
		r.tail = t
	}
	return (r.tail-r.head-1)&r.mask >= uint64(n)
}

// write copies parts, which add up to n bytes, at the head, wrapping at
// the end of the data pages. The caller has checked space.
func (r *ring) write(n int, parts ...[]byte) {
	pos := r.head & r.mask
	for _, p := range parts {
		k := copy(r.data[pos:], p)
		copy(r.data, p[k:])
		pos = (pos + uint64(len(p))) & r.mask
	}
	r.head += uint64(n)
	// The kernel's head - rb->wakeup > rb->watermark: a wakeup is due
	// every watermark bytes.
	if r.head-r.wakeup > r.watermark {
		r.wakeup += r.watermark
		r.poll = true
	}
}

// publish makes what was written visible: the release store of data_head
// orders the record's bytes before it (the kernel's smp_wmb before
// data_head, which perf pairs with an acquire load).
func (r *ring) publish() { r.put64(pgDataHead, r.head) }

// setCounts writes the counter fields of the metadata page
// (perf_event_update_userpage): the count in offset, the times; index 0
// says no counter can be read in user space.
func (r *ring) setCounts(count, enabled, running uint64) {
	seq := (*uint32)(unsafe.Pointer(&r.mem[pgLock]))
	atomic.AddUint32(seq, 1)
	r.put64(pgOffset, count)
	r.put64(pgTimeEnabled, enabled)
	r.put64(pgTimeRunning, running)
	atomic.AddUint32(seq, 1)
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem, r.data = nil, nil
	}
}
