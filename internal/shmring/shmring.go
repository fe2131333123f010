// Package shmring is a ring of trace records in shared memory: any number of
// goroutines of one producer process publish records into a memfd without a
// system call or a lock, and one consumer in another process — the daemon —
// drains them without a system call per record, sleeping on a futex in the
// ring when there is nothing to read.
//
// It is the transport only. It knows nothing of events, formats, payload
// validation, pids or clocks: the producer's caller validates the payload
// with the kernel's rules before it writes, and supplies the timestamp, tid
// and CPU it wants recorded; the consumer's caller decides what a write index
// means, whose records these are (from the socket's SO_PEERCRED, never from
// the ring) and when the producer is dead. It is not a multi-consumer ring
// and not an overwrite ring: a full ring drops the new record, as the
// kernel's ring buffer does in its non-overwrite mode, and counts it.
//
// A producer process may publish into a ring set instead (set.go): R such
// rings in one memfd, one per CPU index, so that its threads on different
// CPUs never share a head, and a consumer per ring index drains ring k of
// every producer — the kernel's per-CPU buffers, in shared memory.
//
// A stream (stream.go) is the same layout with the roles reversed: a
// trusted writer, the daemon, fills it with finished records of the
// reader's format, which the reader takes as they lie — perf's mmap ring.
//
// # Layout
//
// A ring is a memfd of P+S bytes, P the page size (4096 on x86-64) and S the
// data size, a power of two from P to MaxSize. All integers are in the
// machine's byte order: a ring never leaves the machine. The first page is
// the header; each word that one side writes often is alone on its 64-byte
// cache line, so the producers' stores to head and the consumer's to tail
// do not bounce one line between the cores:
//
//	offset  size  field          written by
//	     0     8  magic          producer, once ("UETRING" and a 1)
//	     8     4  version        producer, once (1)
//	    12     4  data offset    producer, once (P: the data starts at the second page)
//	    16     8  data size      producer, once (S)
//	    24     8  key            producer, once (random; see Records)
//	    32    32  zero
//	    64     8  head           producers: bytes ever reserved (monotonic; CAS)
//	   128     8  tail           consumer: bytes ever consumed (monotonic)
//	   192     4  sleeping       consumer sets 1 before it sleeps; the first publisher to see it clears it and wakes
//	   256     8  dropped        producers: records dropped because the ring was full
//	   264     8  dropped bytes  producers: their bytes (record sizes, aligned)
//	   272  P-272 zero
//	     P     S  data           records, at head and tail modulo S
//
// The data area is mapped twice, back to back, on both sides: the S bytes
// at file offset P appear at P and again at P+S of a 2S-byte window, so the
// bytes at ring position x are at window offset x mod S and the next S-1
// bytes follow contiguously, whatever the wrap. A record that crosses the end
// of the data area is one copy for the producer and one bounds check and one
// copy for the consumer. The alternative, a padding record at the end, costs
// the producer a second reservation and a second publish on every wrap,
// wastes up to a record of space, and gives a hostile producer one more
// record type to lie with; the double mapping costs S of address space
// (no memory: it is the same pages) and two mmap calls at setup.
//
// # Records
//
// A record is a 32-byte header and the payload, padded with zeros to a
// multiple of 8 bytes; its position in the ring is always 8-aligned:
//
//	offset  size  field
//	     0     4  length | committed  bits 0-30: header + payload bytes (unpadded); bit 31: committed
//	     4     4  stamp               uint32(position/8) XOR key
//	     8     8  time                CLOCK_MONOTONIC, nanoseconds, as the caller took it
//	    16     4  write index         the producer's write_index of the event
//	    20     4  tid                 as the caller supplies it
//	    24     4  cpu                 as the caller supplies it
//	    28     4  check               uint32(position/2^35) XOR key/2^32
//	    32     n  payload
//
// Bytes 0-7 are one 64-bit word, the record's first word: its only stores
// are single-copy atomic 64-bit ones (an aligned MOV on amd64, an atomic
// store elsewhere), so the consumer reads length, committed bit and
// stamp from one load and never sees a mix of two stores. The stamp says
// where a header belongs: a header left from an earlier lap, or a word of an
// old payload, does not carry the stamp of the position it is found at —
// except by chance, one in 2^32 for a payload word, which is why a committed
// record must also carry the check, written with the payload and read from
// the consumer's copy: together stamp and check are the record's whole
// 64-bit position under a random 64-bit key.
//
// # Publishing, and the memory-ordering argument
//
// A producer (Producer.Reserve) loads head, loads tail, and if the record
// fits in S-(head-tail) it moves head forward by the record's size with one
// compare-and-swap, retrying when another goroutine won; the bytes
// [head, head+size) are then its own. The tail it compares with is the one
// a producer of the process last loaded; only when the record does not fit
// under it does it load the shared tail again — tail only grows, so an old
// one makes the ring look fuller, never emptier, and the line the consumer
// stores its tail in is read by the producers' core once per batch of the
// consumer's, not once per record. It stores the first word with the
// committed bit clear (one 64-bit store: from now on the length is known),
// writes the rest of the header and the payload with ordinary stores, and
// stores the first word again with the committed bit set. Go's atomic
// operations are sequentially consistent, so this last store is a release:
// a consumer that loads the committed word (an acquire) sees every byte
// written before it. The first store need not be one: on amd64 it is a
// plain MOV, which the architecture's store order keeps before the commit
// (and which does not wait for the record's cache line as an XCHG would),
// and the producer asks the CPU for the line a few records ahead with
// PREFETCHW, so that the lines the consumer read a lap ago come back while
// the producer is still writing elsewhere.
// The consumer loads the first word before head, so a committed record's end
// is never beyond the head it then reads: the producer's CAS came before its
// stores. It keeps the last head it believed and delivers the records
// before it without loading head again; it loads head when those are used
// up (before looking at the next record, so that it does not pull the line
// of the record a producer is writing now to its core for nothing), and
// again, after the first word, before any verdict other than "deliver" —
// so every skip, every "not ready" and every count is decided on a head
// read after the record's first word, as if nothing were cached. The line
// holding head, which every producer's CAS takes, then moves to the
// consumer's core once per batch, not once per record.
//
// The consumer copies a committed record out of the ring, then publishes a
// tail past it (Go's atomic store: a release). A producer that loads that tail
// (an acquire) and reuses the space writes after the consumer's copy. The
// consumer publishes in batches — once an eighth of the ring has been copied
// out since the last time, when it finds nothing more, and before it sleeps —
// so that the line holding tail does not move between cores per record; a
// producer may therefore find the ring up to S/8 fuller than it is, and drop.
//
// A consumer may hand its ring to another reader for a while and take it
// back (internal/handover: the daemon gives a producer's set to a tracer
// that reads it in place): the position to go on from is the consumer's
// tail (Consumer.Tail), and the one it takes back is whatever the other
// reader stopped at (Consumer.Resume — any value is safe, as every
// position is validated). The other reader maps the same memfd (AttachSet)
// and publishes its tail only once what it read is its own for good
// (Consumer.DeferPublish, Consumer.PublishTail): space the producers may
// reuse must hold nothing the first consumer could still have to read.
//
// # Sleeping and waking
//
// The wakeup is the Dekker pattern on two words. The consumer (Consumer.Wait)
// stores sleeping=1, then looks at the record at the tail; only if it is not
// committed does it FUTEX_WAIT on sleeping while it still holds 1. A producer
// stores its committed word, then loads sleeping; if it reads 1 it swaps it to
// 0 by CAS and, if the CAS won, FUTEX_WAKEs. Under sequential consistency one
// of the two stores comes first: either the consumer's re-check sees the
// committed record and does not sleep, or the producer sees sleeping=1 and
// wakes; FUTEX_WAIT itself returns at once if sleeping is no longer 1, so a
// wake that lands between the re-check and the wait is not lost either. Only
// the first publisher after the consumer said it sleeps makes the system call
// (the CAS admits one): the empty → non-empty edge as the sleeping consumer
// sees it. The edge is not taken from the producer's view of the ring at
// reservation time: with several goroutines, the record at the tail may be
// another goroutine's still uncommitted one, the consumer sleeps on it, and a
// rule "wake only if the ring was empty before my reservation" would let the
// later records' publishers all skip the wake. While the consumer is awake,
// publishing costs one load of a cache line that nobody writes.
//
// The sleeping word may hold a watermark instead of 1 (Consumer.SleepAt):
// w > 1 says "wake me when the ring holds w bytes or more". A publisher
// that reads w after its commit loads head and compares it with its copy
// of the tail, and only if that passes with the shared tail, which the
// consumer published before it stored w; if the ring holds w bytes it
// takes the word from w to 0 by CAS and wakes. The consumer, having stored
// w, sleeps only if the record at its tail is not committed or the ring
// holds less than w: by the same two-store argument, either it sees the
// record (and the head) that makes the ring full enough, or that record's
// publisher sees its word — head, not the end of the publisher's own
// record, so that the commit of a record at the tail behind later ones
// wakes it too. Records below the watermark wait for the consumer's
// timeout: the price of one wake per w bytes rather than one per burst,
// which for a Go consumer (a wake costs it tens of microseconds of CPU) is
// what costs most at a few million records a second.
//
// Wait sleeps on one ring. A consumer of many rings sleeps on all of them at
// once with epoll instead: each producer wakes by adding 1 to an eventfd of
// its own (Producer.WakeByEventfd) rather than by FUTEX_WAKE, and the
// consumer says it sleeps in each ring and looks (Consumer.Sleep), waits in
// epoll_wait on the eventfds, and says it is awake (Consumer.Awake) — the same
// two-word protocol, one eventfd per ring. (futex_waitv(2) would do for up to
// 128 rings; an epoll set has no such limit, and a consumer that never reads
// the eventfds, edge-triggered, cannot be blocked by a producer that plays
// with their flags.)
//
// # Reading in place
//
// Next copies a record out into the consumer's buffer. Peek finds the same
// record with the same checks and hands it over where it lies (a View: the
// header's words loaded once each, the payload still in the ring); the
// caller copies the payload once, straight into its own consumer's buffer,
// validates that copy — never the ring again, which the producer may be
// rewriting — and Advances: the kernel's pattern for a write (reserve in
// the consumer's buffer, copy the user's bytes in, validate them there,
// commit or discard: trace_event_buffer_reserve, user_event_ftrace).
// Either way the tail moves only past records delivered or skipped by the
// rules below (one walk for both: Consumer.find).
//
// # Hostile memory
//
// A producer can write anything anywhere in the ring at any time, before,
// during and after the consumer reads it. The consumer is built so that
// nothing it reads there can make it fault, read outside its mapping, block,
// loop without progress or deliver bytes it did not validate:
//
//   - The data size, key and page size come from the memfd's size (fstat) and
//     from one read of the header at Attach; the memfd must be sealed against
//     shrinking and growing, so no access to the mapping can SIGBUS. The
//     consumer maps the data area read-only.
//   - The consumer keeps its own tail; the shared one is written, never read
//     back. Head is a hint: if head-tail is more than S (head behind tail, or
//     absurdly ahead) the consumer counts a bad head and treats the ring as
//     empty until head is believable again; it never moves its tail on the
//     word of a head it does not believe. The head it keeps is one it
//     believed, and stays within S of its tail (the tail never passes it).
//   - Every record is read at tail mod S in the 2S window, at most S bytes:
//     never outside it, whatever the length says. A record is accepted only if
//     its stamp and check match its position, its length is 32..S and it ends
//     at or before head; its first word and its check are loaded once each;
//     the other header fields and the payload are taken from the consumer's
//     copy, never read again from the ring (Peek: the header fields loaded
//     once each, the payload copied once by the caller, who reads only its
//     copy).
//   - Next does bounded work: each step moves the tail forward by at least 8
//     bytes or returns, and one call skips at most S bytes before it returns
//     ErrNotReady. With head still, a drain loop ends within S bytes; with a
//     producer that keeps publishing, the caller bounds its batch.
//
// A hostile producer can still make its own ring useless — stall it behind a
// record it never commits, fill it with records that say anything a record
// may say, lie in its drop counters, or clear the sleeping word so the
// consumer's Wait returns at once — but it cannot touch another producer's
// ring, and the consumer's caller, not the ring, says whose records they are.
//
// # Torn records
//
// A producer killed while it holds a reservation leaves one of two things at
// that position: a first word with a matching stamp and the committed bit
// clear (killed after its first store: the length is known), or whatever the
// space held before (killed between its CAS and its first store: the length
// is lost). While the producer lives, both mean "not yet" and Next returns
// ErrNotReady. Once the caller declares it gone (Consumer.ProducerGone), Next
// skips a torn record by its length, counting it in Stats.Torn, and in the
// second case scans forward 8 bytes at a time for the next position whose
// first word carries that position's stamp and a plausible length, counting
// the skipped bytes in Stats.Discarded; if there is none, everything up to
// head is discarded.
//
// The guarantee, for a producer that is not hostile: every record whose
// committed word was stored before the producer died is delivered, and only
// those — with two exceptions of the order of chance of a random key: the
// scan in the second case may stop at a word of an old payload that happens
// to equal its position's stamp with a plausible length (a 32-bit match under
// the random key: about one in four billion per old payload word scanned) and
// then skip that false record's length, losing the committed records it
// covers; and such a word delivered as a record would need its check to match
// as well (64 bits). The same 64-bit argument covers a live producer's
// reservation the consumer finds before the producer's first store: stale
// bytes are not taken for a record. Records that were never committed are
// counted in Stats.Torn when their length was written, and as bytes in
// Stats.Discarded when it was not. A hostile producer can forge anything,
// in its own ring.
package shmring

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring geometry limits. The data size is a power of two between the page size
// and MaxSize; MaxSize keeps a record's length in the 31 bits of its first
// word.
const (
	MaxSize = 1 << 30
)

// HeaderSize is the size of a record's header; a record is HeaderSize bytes
// and its payload, padded to 8.
const HeaderSize = 32

const (
	magic   = 0x01474e4952544555 // "UETRING\x01", little-endian
	version = 1

	offMagic      = 0
	offVersion    = 8
	offDataOffset = 12
	offSize       = 16
	offKey        = 24
	offHead       = 64
	offTail       = 128
	offSleeping   = 192
	offDropped    = 256
	offDropBytes  = 264

	committed = 1 << 31
	lenMask   = committed - 1
)

// ring is one side's view: the header page and the data area twice.
type ring struct {
	base  unsafe.Pointer // start of the mapping: the header page
	total uintptr        // bytes mapped: P + 2S
	page  uint64         // P
	size  uint64         // S
	mask  uint64         // S-1
	key   uint64
	data  unsafe.Pointer // base + P: the 2S window

	head, tail, dropped, dropBytes *uint64
	sleeping                       *uint32
}

func (r *ring) u64(off uintptr) *uint64 { return (*uint64)(unsafe.Add(r.base, off)) }
func (r *ring) u32(off uintptr) *uint32 { return (*uint32)(unsafe.Add(r.base, off)) }

// at returns the address of ring position pos in the window; the S-1 bytes
// after it are mapped too.
func (r *ring) at(pos uint64) unsafe.Pointer { return unsafe.Add(r.data, pos&r.mask) }

// stamp is what the first word of a record at position pos carries.
func (r *ring) stamp(pos uint64) uint32 { return uint32(pos>>3) ^ uint32(r.key) }

// check is what a committed record at position pos carries at offset 28.
func (r *ring) check(pos uint64) uint32 { return uint32(pos>>35) ^ uint32(r.key>>32) }

func align8(n uint64) uint64 { return (n + 7) &^ 7 }

// mapRing maps the memfd: its header page read-write, its data area twice
// after it with dataProt. The window is reserved first as one inaccessible
// anonymous mapping so that the three fixed mappings replace it and nothing
// else can be mapped in between.
func mapRing(fd int, page, size uint64, dataProt int) (*ring, error) {
	return mapRingAt(fd, 0, page, size, dataProt)
}

// mapRingAt is mapRing for a ring whose header page is at file offset foff
// of the memfd: ring k of a set.
func mapRingAt(fd int, foff int64, page, size uint64, dataProt int) (*ring, error) {
	total := uintptr(page + 2*size)
	base, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("reserving %d bytes of address space for the ring: mmap: %w", total, err)
	}
	maps := []struct {
		at   uintptr
		off  int64
		len  uintptr
		prot int
	}{
		{0, foff, uintptr(page), unix.PROT_READ | unix.PROT_WRITE},
		{uintptr(page), foff + int64(page), uintptr(size), dataProt},
		{uintptr(page + size), foff + int64(page), uintptr(size), dataProt},
	}
	for _, m := range maps {
		if _, err := unix.MmapPtr(fd, m.off, unsafe.Add(base, m.at), m.len, m.prot, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
			unix.MunmapPtr(base, total)
			return nil, fmt.Errorf("mapping the ring's memfd at offset %d: mmap: %w", m.off, err)
		}
	}
	r := &ring{base: base, total: total, page: page, size: size, mask: size - 1, data: unsafe.Add(base, page)}
	r.head, r.tail = r.u64(offHead), r.u64(offTail)
	r.dropped, r.dropBytes = r.u64(offDropped), r.u64(offDropBytes)
	r.sleeping = r.u32(offSleeping)
	return r, nil
}

func (r *ring) unmap() error {
	if r.base == nil {
		return nil
	}
	err := unix.MunmapPtr(r.base, r.total)
	r.base = nil
	if err != nil {
		return fmt.Errorf("unmapping the ring: munmap: %w", err)
	}
	return nil
}

// pageSize is P for this machine.
func pageSize() uint64 { return uint64(unix.Getpagesize()) }

// checkSize says whether size is a valid data size here.
func checkSize(size uint64) error {
	p := pageSize()
	if size < p || size > MaxSize || size&(size-1) != 0 {
		return fmt.Errorf("ring data size %d is not a power of two from the page size %d to %d: %w", size, p, MaxSize, unix.EINVAL)
	}
	return nil
}

// Create makes a ring of size data bytes in a new memfd, sealed against
// shrinking and growing, and maps it for producing. The caller sends
// Producer.Fd to the consumer.
func Create(size int) (*Producer, error) {
	if size < 0 {
		return nil, checkSize(0)
	}
	s := uint64(size)
	if err := checkSize(s); err != nil {
		return nil, err
	}
	p := pageSize()
	fd, err := SealedMemfd("uetrace-ring", p+s)
	if err != nil {
		return nil, err
	}
	r, err := mapRing(fd, p, s, unix.PROT_READ|unix.PROT_WRITE)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	r.initHeader()
	return &Producer{r: r, fd: fd, ownFd: true, wakeFd: -1}, nil
}

// SealedMemfd makes a memfd of size bytes, sealed against shrinking and
// growing (and further sealing), for a ring, a set, or other memory shared
// with a process not trusted (internal/handover's control words): no
// mapping of it can fault, whatever the other side does.
func SealedMemfd(name string, size uint64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("creating shared memory (%s): memfd_create: %w", name, err)
	}
	if err = unix.Ftruncate(fd, int64(size)); err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sizing and sealing shared memory (%s; ftruncate, F_ADD_SEALS): %w", name, err)
	}
	return fd, nil
}

// newWakeFd makes the eventfd a producer wakes its consumer by, unless
// *fd is one already.
func newWakeFd(fd *int) (int, error) {
	if *fd >= 0 {
		return -1, fmt.Errorf("the ring already wakes its consumer by eventfd %d: %w", *fd, unix.EBUSY)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	*fd = efd
	return efd, nil
}

// initHeader writes a new ring's header: a fresh random key, the geometry,
// the magic last.
func (r *ring) initHeader() {
	var k [8]byte
	unix.Getrandom(k[:], 0) // 8 bytes: getrandom(2) returns them whole once the pool is ready
	r.key = binary.NativeEndian.Uint64(k[:])
	r.writeHeader(magic, version)
}

// writeHeader writes the header of a new ring (or stream: no key) with the
// given magic and version: the version, the geometry and r.key, the magic
// last.
func (r *ring) writeHeader(magic uint64, version uint32) {
	*r.u32(offVersion) = version
	*r.u32(offDataOffset) = uint32(r.page)
	*r.u64(offSize) = r.size
	*r.u64(offKey) = r.key
	// The magic last: a reader of a half-initialised header sees no ring.
	atomic.StoreUint64(r.u64(offMagic), magic)
}

// SealedSize is the size of memfd fd, checked to be a regular file sealed
// against shrinking and growing: no access to a mapping of it can fault.
// what names it in errors.
func SealedSize(fd int, what string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("%s: fstat: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, fmt.Errorf("%s: the descriptor is not a memfd (mode %#o): %w", what, st.Mode, unix.EINVAL)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: fcntl F_GET_SEALS: %w", what, err)
	}
	if seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return 0, fmt.Errorf("%s: the memfd is not sealed against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW): %w", what, unix.EINVAL)
	}
	return st.Size, nil
}

// geometry is what Attach and Open learn from a memfd: checked against its
// size and seals, never against the header alone.
func geometry(fd int) (page, size uint64, err error) {
	st, err := SealedSize(fd, "ring")
	if err != nil {
		return 0, 0, err
	}
	page = pageSize()
	if st <= int64(page) {
		return 0, 0, fmt.Errorf("ring: the memfd has %d bytes, not a header page and data: %w", st, unix.EINVAL)
	}
	size = uint64(st) - page
	if err := checkSize(size); err != nil {
		return 0, 0, fmt.Errorf("ring: the memfd's %d bytes are not a header page and a valid data area: %w", st, err)
	}
	return page, size, nil
}

// checkHeader compares the header's constant fields with the memfd's
// geometry, reading each once, and returns the key.
func (r *ring) checkHeader() error {
	if err := r.checkKind(magic, version, "ring"); err != nil {
		return err
	}
	r.key = atomic.LoadUint64(r.u64(offKey))
	return nil
}

// checkKind checks the header's magic and version (a ring's, a stream's)
// and its geometry against the memfd's.
func (r *ring) checkKind(magic uint64, version uint32, what string) error {
	if m := atomic.LoadUint64(r.u64(offMagic)); m != magic {
		return fmt.Errorf("%s: bad magic %#x, not a uetrace %s: %w", what, m, what, unix.EINVAL)
	}
	if v := atomic.LoadUint32(r.u32(offVersion)); v != version {
		return fmt.Errorf("%s: version %d, this side speaks %d: %w", what, v, version, unix.EPROTONOSUPPORT)
	}
	if d := atomic.LoadUint32(r.u32(offDataOffset)); uint64(d) != r.page {
		return fmt.Errorf("%s: data offset %d, the page size here is %d: %w", what, d, r.page, unix.EINVAL)
	}
	if s := atomic.LoadUint64(r.u64(offSize)); s != r.size {
		return fmt.Errorf("%s: the header says %d data bytes, the memfd holds %d: %w", what, s, r.size, unix.EINVAL)
	}
	return nil
}
