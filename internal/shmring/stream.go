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
// Streams come in sets: R streams in one memfd, each laid out as a ring
// is (see Layout) with its own magic ("UETSTRM" and a 1), at file offset
// P + k·(P+S) as in a ring set, behind a set header page:
//
//	offset  size  field
//	     0     8  magic          "UETSSET" and a 1
//	     8     4  version        1
//	    12     4  streams        R
//	    16     8  data size      S
//	    64     4  sleeping       the reader: 1 while it sleeps on the set
//
// A stream's words are head (64: the writer's, bytes ever written), tail
// (128: the reader's, bytes ever consumed) and sleeping (192: the reader's
// watermark, see StreamReader.SleepAt). The data area is mapped twice, so
// [tail, head) is always one slice, whatever the wrap. The reader of R
// streams sleeps on all at once (Streams.Wait): it says so in the set's
// word, then sets each stream's watermark and looks; a writer whose stream
// reached its watermark takes that stream's word, clears the set's and
// FUTEX_WAKEs it — the Dekker pattern of a ring (see Sleeping and waking)
// with the set's word stored first, so that a writer who sees a stream's
// watermark also sees the reader asleep. No descriptor is needed for it,
// and none is kept.
//
// The reader trusts the writer as perf trusts the kernel, but still never
// reads outside its window: a head more than S past its tail is not
// believed. The writer trusts the reader for nothing: the tail is believed
// only between the tail it believed last and its own head (a reader that
// lies gets a ring that looks full and loses its own records, which the
// writer counts), the writer never reads the data area, and a reader that
// keeps its sleeping word set costs at most one wake per streamWakeFrac of
// the stream written or per streamWakeGap — never one per record.

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
	set  *uint32 // the set's sleeping word
	head uint64  // ours: bytes written, published or not
	pub  uint64  // the head last published
	tail uint64  // the reader's tail, as last believed

	lastWake  time.Duration // streamClock's, at the last wake
	wakeHead  uint64        // head at the last wake
	wakes     uint64
	badTail   uint64
	noWakeGap uint64
}

// A StreamSet is the writer's side of a set of streams: one StreamWriter
// per ring index, and the memfd to send.
type StreamSet struct {
	fd      int
	hdr     unsafe.Pointer
	writers []*StreamWriter
}

// The set's header page: its magic and version where a ring's are
// (offMagic, offVersion), then these.
const (
	offSetStreams  = 12
	offSetSize     = 16
	offSetSleeping = 64 // the reader's: 1 while it sleeps on the set
)

// checkSetHeader checks the mapped header page of a stream set of n
// streams of size bytes: its magic, version, stream count and size, each
// read once.
func checkSetHeader(hdr unsafe.Pointer, size uint64, n int) error {
	if m := atomic.LoadUint64((*uint64)(unsafe.Add(hdr, offMagic))); m != streamSetMagic {
		return fmt.Errorf("stream set: bad magic %#x, not a uetrace stream set: %w", m, unix.EINVAL)
	}
	if v := atomic.LoadUint32((*uint32)(unsafe.Add(hdr, offVersion))); v != streamVersion {
		return fmt.Errorf("stream set: version %d, this side speaks %d: %w", v, streamVersion, unix.EPROTONOSUPPORT)
	}
	if r := atomic.LoadUint32((*uint32)(unsafe.Add(hdr, offSetStreams))); r != uint32(n) {
		return fmt.Errorf("stream set: the header says %d streams, this side takes %d: %w", r, n, unix.EINVAL)
	}
	if s := atomic.LoadUint64((*uint64)(unsafe.Add(hdr, offSetSize))); s != size {
		return fmt.Errorf("stream set: the header says streams of %d bytes, the memfd holds %d: %w", s, size, unix.EINVAL)
	}
	return nil
}

// CreateStreamSet makes a set of n streams of size data bytes each in a new
// memfd, sealed against shrinking and growing, and maps it for writing.
// The caller sends Fd to the reader.
func CreateStreamSet(n, size int) (*StreamSet, error) {
	fd, p, s, err := setMemfd("uetrace-stream", "stream set", n, size)
	if err != nil {
		return nil, err
	}
	ss := &StreamSet{fd: fd}
	if ss.hdr, err = unix.MmapPtr(fd, 0, nil, uintptr(p), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		ss.hdr = nil
		ss.Close()
		return nil, fmt.Errorf("mapping the streams' header: mmap: %w", err)
	}
	set := (*uint32)(unsafe.Add(ss.hdr, offSetSleeping))
	for k := range n {
		r, err := mapRingAt(fd, ringOffset(p, s, k), p, s, unix.PROT_READ|unix.PROT_WRITE)
		if err != nil {
			ss.Close()
			return nil, fmt.Errorf("stream %d: %w", k, err)
		}
		r.writeHeader(streamMagic, streamVersion)
		ss.writers = append(ss.writers, &StreamWriter{r: r, set: set, lastWake: -streamWakeGap})
	}
	*(*uint32)(unsafe.Add(ss.hdr, offVersion)) = streamVersion
	*(*uint32)(unsafe.Add(ss.hdr, offSetStreams)) = uint32(n)
	*(*uint64)(unsafe.Add(ss.hdr, offSetSize)) = s
	atomic.StoreUint64((*uint64)(unsafe.Add(ss.hdr, offMagic)), streamSetMagic)
	return ss, nil
}

// Fd is the set's memfd, to send to the reader.
func (ss *StreamSet) Fd() int { return ss.fd }

// Len is the number of streams.
func (ss *StreamSet) Len() int { return len(ss.writers) }

// Writer is the writer of stream k.
func (ss *StreamSet) Writer(k int) *StreamWriter { return ss.writers[k] }

// CloseFd closes the memfd once it has been handed to the reader, keeping
// the mappings.
func (ss *StreamSet) CloseFd() {
	if ss.fd >= 0 {
		unix.Close(ss.fd)
		ss.fd = -1
	}
}

// Close unmaps the set and closes its memfd. No writer may be in use.
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
	ss.CloseFd()
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
	// The reader stored the set's word before this stream's: clear it
	// and wake whoever waits on it.
	atomic.StoreUint32(w.set, 0)
	futexWake(w.set)
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

// Streams are the reader's side of a set of streams.
type Streams struct {
	rs   []*StreamReader
	hdr  unsafe.Pointer
	word *uint32 // the set's sleeping word
}

// AttachStreams maps for reading the set of n streams in memfd fd, as the
// writer made it: the geometry from the memfd's size and n, the set's and
// each stream's header checked. The mappings do not keep fd.
func AttachStreams(fd, n int) (*Streams, error) {
	page, size, err := setGeometry(fd, n, "stream set")
	if err != nil {
		return nil, err
	}
	hdr, err := unix.MmapPtr(fd, 0, nil, uintptr(page), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the streams' header: mmap: %w", err)
	}
	if err := checkSetHeader(hdr, size, n); err != nil {
		unix.MunmapPtr(hdr, uintptr(page))
		return nil, err
	}
	st := &Streams{hdr: hdr, word: (*uint32)(unsafe.Add(hdr, offSetSleeping))}
	for k := range n {
		r, err := mapRingAt(fd, ringOffset(page, size, k), page, size, unix.PROT_READ)
		if err == nil {
			if err = r.checkKind(streamMagic, streamVersion, "stream"); err != nil {
				r.unmap()
			}
		}
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("stream %d: %w", k, err)
		}
		st.rs = append(st.rs, &StreamReader{r: r, tail: atomic.LoadUint64(r.tail)})
	}
	return st, nil
}

// Len is the number of streams.
func (st *Streams) Len() int { return len(st.rs) }

// Reader is the reader of stream k.
func (st *Streams) Reader(k int) *StreamReader { return st.rs[k] }

// Wait sleeps until a stream holds w bytes or more (w ≥ 1), or for at most
// timeout, and reports whether it slept: false when a stream held that
// much already. It may return early (a signal, a writer clearing the
// word); callers loop.
func (st *Streams) Wait(w uint32, timeout time.Duration) bool {
	// The set's word first: a writer that sees a stream's watermark then
	// sees it too (see Streams in the package doc).
	atomic.StoreUint32(st.word, 1)
	slept := true
	for i, r := range st.rs {
		if !r.SleepAt(w) {
			for _, q := range st.rs[:i] {
				q.Awake()
			}
			slept = false
			break
		}
	}
	if slept {
		err := futexWait(st.word, 1, timeout)
		if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.ETIMEDOUT) {
			time.Sleep(timeout) // cannot fail on a mapped word; never spin if it did
		}
		for _, r := range st.rs {
			r.Awake()
		}
	}
	atomic.StoreUint32(st.word, 0)
	return slept
}

// Close unmaps the streams.
func (st *Streams) Close() error {
	var err error
	for _, r := range st.rs {
		if e := r.r.unmap(); e != nil && err == nil {
			err = e
		}
	}
	st.rs = nil
	if st.hdr != nil {
		unix.MunmapPtr(st.hdr, uintptr(pageSize()))
		st.hdr = nil
	}
	return err
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
// set (Streams.Wait)), Awake.
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
