package shmring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// # Streams: the roles reversed, and the records opaque
//
// A stream is the ring a trusted writer — the daemon, delivering a
// session's records — fills with finished records of the reader's own
// format, and a reader in another process takes as it lies: the bytes
// between its tail and the head, a ring's worth at a time, written to a
// file without being looked at, as perf record writes the kernel's mmap
// rings. It is perf's mmap ring: data_head written by the writer (one
// release store per batch), data_tail by the reader, no record header of
// the ring's own, no reservation protocol — one writer per stream (the
// caller serialises others), so nothing is ever "reserved, not yet
// committed" for the reader to wait on.
//
// A stream is a memfd of P+S bytes laid out as a ring is (see Layout) with
// its own magic ("UETSTRM" and a 1), or ring k of a stream set — R streams
// in one memfd behind a set header page ("UETSSET" and a 1), as a ring set
// is laid out. The words used are head (64: the writer's, bytes ever
// written), tail (128: the reader's, bytes ever consumed) and sleeping
// (192: the reader's watermark, see StreamReader.SleepAt). The data area is
// mapped twice, so [tail, head) is always one slice, whatever the wrap.
//
// The reader trusts the writer as perf trusts the kernel, but still never
// reads outside its window: a head more than S past its tail is not
// believed. The writer trusts the reader for nothing: the tail is believed
// only between the tail it believed last and its own head (a reader that
// lies gets a ring that looks full and loses its own records, which the
// writer counts), the writer never reads the data area, and a reader that
// keeps its sleeping word set costs at most one wake per streamWakeBytes
// written or per streamWakeGap — never one per record.

const (
	streamMagic    = 0x014d525453544555 // "UETSTRM\x01", little-endian
	streamSetMagic = 0x0154455353544555 // "UETSSET\x01", little-endian
	streamVersion  = 1
)

// A stream's writer wakes a sleeping reader at most once per
// streamWakeGap, or sooner once it has written a streamWakeFrac of the
// stream since the last wake: a reader asleep with a watermark it keeps
// reached (or a low one) cannot make the writer pay a system call per
// batch, and a legitimate reader asleep at a large watermark is woken as
// soon as it is reached (its watermark is more than the fraction).
const (
	streamWakeGap  = 100 * time.Microsecond
	streamWakeFrac = 8 // 1/8 of the stream
)

// streamClock is the writer's clock for the wake gap: CLOCK_MONOTONIC,
// read only when a wake is due.
func streamClock() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// A StreamWriter writes into one stream. It is for one goroutine at a time.
type StreamWriter struct {
	r    *ring
	head uint64 // ours: bytes written, published or not
	pub  uint64 // the head last published
	tail uint64 // the reader's tail, as last believed

	wakeFd    int           // the set's eventfd, or -1: FUTEX_WAKE
	lastWake  time.Duration // streamClock-relative, at the last wake
	wakeHead  uint64        // head at the last wake
	wakes     uint64
	badTail   uint64
	noWakeGap uint64
}

// A StreamSet is the writer's side of a set of streams: one StreamWriter
// per ring index, the memfd to send, and the eventfd they wake the reader
// by.
type StreamSet struct {
	fd      int
	hdr     unsafe.Pointer
	writers []*StreamWriter
	wakeFd  int
}

// CreateStreamSet makes a set of n streams of size data bytes each in a new
// memfd, sealed against shrinking and growing, maps it for writing, and
// makes the eventfd every stream wakes the reader by. The caller sends Fd
// and WakeFd to the reader.
func CreateStreamSet(n, size int) (*StreamSet, error) {
	if size < 0 {
		size = 0
	}
	s := uint64(size)
	if n < 1 || n > MaxSetRings {
		return nil, fmt.Errorf("a stream set of %d streams: want 1 to %d: %w", n, MaxSetRings, unix.EINVAL)
	}
	if err := checkSize(s); err != nil {
		return nil, err
	}
	p := pageSize()
	total := p + uint64(n)*(p+s)
	fd, err := unix.MemfdCreate("uetrace-stream", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("creating the streams' memory: memfd_create: %w", err)
	}
	ss := &StreamSet{fd: fd, wakeFd: -1}
	fail := func(err error) (*StreamSet, error) {
		ss.Close()
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		return fail(fmt.Errorf("sizing the streams' memfd to %d bytes: ftruncate: %w", total, err))
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail(fmt.Errorf("sealing the streams' memfd: fcntl F_ADD_SEALS: %w", err))
	}
	if ss.wakeFd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		ss.wakeFd = -1
		return fail(fmt.Errorf("eventfd: %w", err))
	}
	if ss.hdr, err = unix.MmapPtr(fd, 0, nil, uintptr(p), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		ss.hdr = nil
		return fail(fmt.Errorf("mapping the streams' header: mmap: %w", err))
	}
	for k := range n {
		r, err := mapRingAt(fd, ringOffset(p, s, k), p, s, unix.PROT_READ|unix.PROT_WRITE)
		if err != nil {
			return fail(fmt.Errorf("stream %d: %w", k, err))
		}
		*r.u32(offVersion) = streamVersion
		*r.u32(offDataOffset) = uint32(p)
		*r.u64(offSize) = s
		atomic.StoreUint64(r.u64(offMagic), streamMagic)
		ss.writers = append(ss.writers, &StreamWriter{r: r, wakeFd: ss.wakeFd, lastWake: -streamWakeGap})
	}
	*(*uint32)(unsafe.Add(ss.hdr, 8)) = streamVersion
	*(*uint32)(unsafe.Add(ss.hdr, offSetRings)) = uint32(n)
	*(*uint64)(unsafe.Add(ss.hdr, offSetSize)) = s
	atomic.StoreUint64((*uint64)(ss.hdr), streamSetMagic)
	return ss, nil
}

// Fd is the set's memfd, to send to the reader.
func (ss *StreamSet) Fd() int { return ss.fd }

// WakeFd is the eventfd the streams wake the reader by, to send with Fd.
func (ss *StreamSet) WakeFd() int { return ss.wakeFd }

// Len is the number of streams.
func (ss *StreamSet) Len() int { return len(ss.writers) }

// Writer is the writer of stream k.
func (ss *StreamSet) Writer(k int) *StreamWriter { return ss.writers[k] }

// CloseFds closes the memfd and the eventfd once they have been handed to
// the reader, keeping the mappings; the writers' wakes then go by
// FUTEX_WAKE on the sleeping word — which wakes nobody who waits on the
// eventfd, so close them only when the reader has them or is gone.
func (ss *StreamSet) CloseFds() {
	for _, w := range ss.writers {
		w.wakeFd = -1
	}
	if ss.fd >= 0 {
		unix.Close(ss.fd)
		ss.fd = -1
	}
	if ss.wakeFd >= 0 {
		unix.Close(ss.wakeFd)
		ss.wakeFd = -1
	}
}

// Close unmaps the set and closes its descriptors. No writer may be in
// use.
func (ss *StreamSet) Close() error {
	var err error
	for _, w := range ss.writers {
		if e := w.r.unmap(); e != nil && err == nil {
			err = e
		}
	}
	ss.writers = nil
	if ss.hdr != nil {
		unix.MunmapPtr(ss.hdr, uintptr(pageSize()))
		ss.hdr = nil
	}
	ss.CloseFds()
	return err
}

// Size is the stream's data size: the most it holds.
func (w *StreamWriter) Size() int { return int(w.r.size) }

// Reserve returns n bytes of room at the head — a slice of the stream's
// window, contiguous whatever the wrap — or nil when the reader has not
// freed that much: the caller drops what it was to write, and counts it.
// n is a multiple of 8 from 8 to Size; what is written there is the
// reader's once Commit and Publish have been called.
func (w *StreamWriter) Reserve(n int) []byte {
	sz := uint64(n)
	if n <= 0 || sz > w.r.size || sz&7 != 0 {
		return nil
	}
	if w.head+sz-w.tail > w.r.size {
		w.loadTail()
		if w.head+sz-w.tail > w.r.size {
			return nil
		}
	}
	return unsafe.Slice((*byte)(w.r.at(w.head)), n)
}

// loadTail believes the reader's tail if it lies between the tail believed
// before and the head: a tail that goes back, or past what was written,
// is the reader's lie, ignored and counted.
func (w *StreamWriter) loadTail() {
	t := atomic.LoadUint64(w.r.tail) &^ 7
	if t-w.tail <= w.head-w.tail {
		w.tail = t
		return
	}
	w.badTail++
}

// Commit adds the n bytes of the last Reserve to the stream; the reader
// sees them after Publish.
func (w *StreamWriter) Commit(n int) { w.head += uint64(n) }

// Pending is what the writer has written and the reader not yet freed, as
// far as the writer knows.
func (w *StreamWriter) Pending() int { return int(w.head - w.tail) }

// Publish makes what was committed visible to the reader — one release
// store — and wakes the reader if it sleeps and the stream holds its
// watermark, at most once per streamWakeGap or per streamWakeFrac of the
// stream written (see streamWakeGap). It reports whether it woke the
// reader.
func (w *StreamWriter) Publish() bool {
	if w.head == w.pub {
		return false
	}
	atomic.StoreUint64(w.r.head, w.head)
	w.pub = w.head
	// The load that pairs with the reader's store of its word (see
	// StreamReader.SleepAt): either the reader sees this head, or this
	// sees the word.
	s := atomic.LoadUint32(w.r.sleeping)
	if s == 0 {
		return false
	}
	if w.head-w.tail < uint64(s) {
		w.loadTail()
		if w.head-w.tail < uint64(s) {
			return false
		}
	}
	if w.head-w.wakeHead < w.r.size/streamWakeFrac {
		if now := streamClock(); now-w.lastWake < streamWakeGap {
			w.noWakeGap++
			return false
		}
	}
	if !atomic.CompareAndSwapUint32(w.r.sleeping, s, 0) {
		return false
	}
	if w.wakeFd >= 0 {
		eventfdAdd(w.wakeFd)
	} else {
		futexWake(w.r.sleeping)
	}
	w.lastWake, w.wakeHead = streamClock(), w.head
	w.wakes++
	return true
}

// StreamWriterStats are a writer's counts of its reader's behaviour.
type StreamWriterStats struct {
	Wakes   uint64 // wake-ups made
	BadTail uint64 // tails not believed: back, or past the head
	Delayed uint64 // wakes put off by the wake gap
}

// Stats returns the writer's counts.
func (w *StreamWriter) Stats() StreamWriterStats {
	return StreamWriterStats{Wakes: w.wakes, BadTail: w.badTail, Delayed: w.noWakeGap}
}

// A StreamReader reads one stream in place. It is for one goroutine.
type StreamReader struct {
	r       *ring
	tail    uint64
	badHead uint64
}

// AttachStreams maps for reading the set of n streams in memfd fd, as the
// writer made it: the geometry from the memfd's size and n, the set's and
// each stream's header checked. Reader k reads stream k; each is closed on
// its own.
func AttachStreams(fd, n int) ([]*StreamReader, error) {
	page, size, err := setGeometry(fd, n)
	if err != nil {
		return nil, err
	}
	if err := checkStreamSetHeader(fd, page, size, n); err != nil {
		return nil, err
	}
	out := make([]*StreamReader, 0, n)
	for k := range n {
		r, err := mapRingAt(fd, ringOffset(page, size, k), page, size, unix.PROT_READ)
		if err == nil {
			if err = r.checkKind(streamMagic, streamVersion, "stream"); err != nil {
				r.unmap()
			}
		}
		if err != nil {
			for _, sr := range out {
				sr.Close()
			}
			return nil, fmt.Errorf("stream %d: %w", k, err)
		}
		t := atomic.LoadUint64(r.tail)
		out = append(out, &StreamReader{r: r, tail: t})
	}
	return out, nil
}

// checkStreamSetHeader is checkSetHeader for a stream set.
func checkStreamSetHeader(fd int, page, size uint64, n int) error {
	return checkHeaderPage(fd, page, size, n, streamSetMagic, streamVersion, "stream set")
}

// Size is the stream's data size.
func (sr *StreamReader) Size() int { return int(sr.r.size) }

// Available returns the bytes between the reader's tail and the writer's
// head, in the stream's memory: valid until Consume frees them, read-only.
// A head more than the stream's size ahead of the tail (or behind it) is
// not believed: nothing is available until it is believable again (counted
// in BadHead).
func (sr *StreamReader) Available() []byte {
	n := atomic.LoadUint64(sr.r.head) - sr.tail
	if n > sr.r.size {
		sr.badHead++
		return nil
	}
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(sr.r.at(sr.tail)), n)
}

// Consume frees the first n bytes Available returned, publishing the tail.
func (sr *StreamReader) Consume(n int) {
	sr.tail += uint64(n)
	atomic.StoreUint64(sr.r.tail, sr.tail)
}

// BadHead is how many times the head was not believed.
func (sr *StreamReader) BadHead() uint64 { return sr.badHead }

// SleepAt says the reader sleeps until the stream holds w bytes or more
// (w ≥ 1), then looks: it reports false, the word cleared again, when the
// stream already holds that much — do not sleep. After the sleep (on the
// set's eventfd, or Wait), Awake.
func (sr *StreamReader) SleepAt(w uint32) bool {
	w = max(w, 1)
	atomic.StoreUint32(sr.r.sleeping, w)
	if n := atomic.LoadUint64(sr.r.head) - sr.tail; n >= uint64(w) && n <= sr.r.size {
		atomic.StoreUint32(sr.r.sleeping, 0)
		return false
	}
	return true
}

// Awake says the reader no longer sleeps.
func (sr *StreamReader) Awake() { atomic.StoreUint32(sr.r.sleeping, 0) }

// Wait sleeps on the stream's word until the writer wakes it (a writer
// without an eventfd) or timeout, after SleepAt said to sleep.
func (sr *StreamReader) Wait(w uint32, timeout time.Duration) {
	err := futexWait(sr.r.sleeping, max(w, 1), timeout)
	if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ETIMEDOUT) {
		time.Sleep(timeout) // cannot fail on a mapped word; never spin if it did
	}
	sr.Awake()
}

// Close unmaps the stream.
func (sr *StreamReader) Close() error { return sr.r.unmap() }
