package shmring

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// streamPair is a stream set of n streams of size bytes, written here and
// attached for reading as another process would.
func streamPair(t testing.TB, n, size int) (*StreamSet, *Streams) {
	t.Helper()
	ss, err := CreateStreamSet(n, size)
	if err != nil {
		t.Fatal(err)
	}
	st, err := AttachStreams(ss.Fd(), n)
	if err != nil {
		ss.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		ss.Close()
	})
	return ss, st
}

// putFrame writes a test record of n bytes (8-aligned, ≥ 16): its length
// and sequence number, then bytes that follow from them.
func putFrame(b []byte, seq uint64) {
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	binary.LittleEndian.PutUint64(b[8:], seq)
	for i := 16; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
}

// checkFrames walks the records putFrame wrote in b, from sequence number
// next on, and returns the next one expected.
func checkFrames(t *testing.T, b []byte, next uint64) uint64 {
	t.Helper()
	for len(b) > 0 {
		n := int(binary.LittleEndian.Uint32(b))
		if n < 16 || n > len(b) {
			t.Fatalf("record %d: length %d of %d bytes left", next, n, len(b))
		}
		if seq := binary.LittleEndian.Uint64(b[8:]); seq != next {
			t.Fatalf("record %d: sequence %d", next, seq)
		}
		for i := 16; i < n; i++ {
			if b[i] != byte(next)+byte(i) {
				t.Fatalf("record %d: byte %d is %d", next, i, b[i])
			}
		}
		b = b[n:]
		next++
	}
	return next
}

// TestStreamRoundTrip: what the writer commits and publishes, the reader
// finds in one slice per pass, in order, across many wraps; a full stream
// refuses a record and takes it once the reader has freed room.
func TestStreamRoundTrip(t *testing.T) {
	const size = 4096
	ss, st := streamPair(t, 2, size)
	w, r := ss.Writer(1), st.Reader(1)
	rng := rand.New(rand.NewPCG(3, 4))
	var seq, next uint64
	full := 0
	for seq < 20000 {
		n := 16 + 8*rng.IntN(40)
		b := w.Reserve(n)
		if b == nil {
			full++
			w.Publish()
			next = checkFrames(t, r.Available(), next)
			r.Consume(len(r.Available()))
			continue
		}
		putFrame(b, seq)
		w.Commit(n)
		seq++
		if rng.IntN(10) == 0 {
			w.Publish()
		}
		if rng.IntN(50) == 0 {
			a := r.Available()
			next = checkFrames(t, a, next)
			r.Consume(len(a))
		}
	}
	w.Publish()
	next = checkFrames(t, r.Available(), next)
	if next != seq || full == 0 {
		t.Fatalf("read %d of %d records; the stream was found full %d times", next, seq, full)
	}
	if len(st.Reader(0).Available()) != 0 {
		t.Fatal("stream 0 has bytes: stream 1's writes leaked")
	}
}

// TestStreamReserveBounds: Reserve takes only 8-aligned sizes from 8 to
// the stream's size.
func TestStreamReserveBounds(t *testing.T) {
	ss, _ := streamPair(t, 1, 4096)
	w := ss.Writer(0)
	for _, n := range []int{0, -8, 12, 4096 + 8} {
		if w.Reserve(n) != nil {
			t.Errorf("Reserve(%d) gave room", n)
		}
	}
	if b := w.Reserve(4096); len(b) != 4096 {
		t.Fatalf("Reserve(4096) of an empty 4096-byte stream: %d bytes", len(b))
	}
}

// TestStreamWatermark: a reader asleep until a stream holds w bytes is
// woken by the Publish that brings one there, once — not by the ones
// before — through the set's word, whichever stream it is.
func TestStreamWatermark(t *testing.T) {
	ss, st := streamPair(t, 2, 1<<16)
	w := ss.Writer(1)
	done := make(chan bool)
	go func() { done <- st.Wait(4096, time.Hour) }()
	// The reader says it sleeps before any write can wake it: wait for
	// its word.
	for atomic.LoadUint32(st.word) != 1 || atomic.LoadUint32(st.Reader(1).r.sleeping) != 4096 {
		time.Sleep(time.Millisecond)
	}
	for i := range 200 {
		b := w.Reserve(64)
		putFrame(b, uint64(i))
		w.Commit(64)
		woke := w.Publish()
		if want := (i+1)*64 == 4096; woke != want {
			t.Fatalf("publish %d (%d bytes held): woke %v, want %v", i, (i+1)*64, woke, want)
		}
	}
	if slept := <-done; !slept {
		t.Fatal("Wait did not sleep on empty streams")
	}
	if st.Wait(4096, time.Hour) {
		t.Fatal("Wait slept on a stream holding 12 KiB at a 4 KiB watermark")
	}
}

// TestStreamHostileReader: a reader that keeps its sleeping word set and
// its tail garbage costs the writer at most one wake per eighth of the
// stream written or per streamWakeGap, and its own records only: the
// writer stays in its window and drops (its caller counts) what does not
// fit.
func TestStreamHostileReader(t *testing.T) {
	const size = 1 << 16
	ss, st := streamPair(t, 1, size)
	w, r := ss.Writer(0), st.Reader(0)
	start := time.Now()
	written, dropped := 0, 0
	rng := rand.New(rand.NewPCG(5, 6))
	lo := uintptr(w.r.data)
	for i := range 100000 {
		atomic.StoreUint32(r.r.sleeping, uint32(1+rng.IntN(64)))
		switch rng.IntN(4) {
		case 0:
			atomic.StoreUint64(r.r.tail, rng.Uint64())
		case 1:
			r.Consume(len(r.Available())) // honest for a moment
		}
		b := w.Reserve(64)
		if b == nil {
			dropped++
			continue
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p < lo || p+64 > lo+2*size {
			t.Fatalf("write %d: room at %#x, outside the window %#x+%d", i, p, lo, 2*size)
		}
		w.Commit(64)
		written += 64
		w.Publish()
	}
	ws := w.Stats()
	elapsed := time.Since(start)
	most := uint64(written/(size/streamWakeFrac)) + uint64(elapsed/streamWakeGap) + 1
	if ws.Wakes > most {
		t.Fatalf("%d wakes for %d bytes in %v: at most %d", ws.Wakes, written, elapsed, most)
	}
	if ws.BadTail == 0 || dropped == 0 {
		t.Fatalf("stats %+v, %d dropped: the garbage tails were believed", ws, dropped)
	}
	t.Logf("%d bytes written, %d dropped, in %v: %+v", written, dropped, elapsed, ws)
}

// FuzzStreamWriter drives a writer with a reader whose tail and sleeping
// word are the fuzzer's between any two of its calls: the writer's room
// always lies in its window, what it holds never exceeds the stream, and
// its wakes stay within its budget.
func FuzzStreamWriter(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, uint64(0), uint32(1))
	f.Add([]byte{200, 10, 255, 3, 0, 0, 0, 1}, ^uint64(0), uint32(64))
	const size = 4096
	ss, err := CreateStreamSet(1, size)
	if err != nil {
		f.Fatal(err)
	}
	defer ss.Close()
	f.Fuzz(func(t *testing.T, ops []byte, tail uint64, sleep uint32) {
		w := ss.Writer(0)
		*w = StreamWriter{r: w.r, set: w.set, lastWake: -streamWakeGap}
		atomic.StoreUint64(w.r.head, 0)
		lo := uintptr(w.r.data)
		start := time.Now()
		written := 0
		for i, op := range ops {
			switch op % 4 {
			case 0:
				atomic.StoreUint64(w.r.tail, tail+uint64(i)*uint64(op))
			case 1:
				atomic.StoreUint32(w.r.sleeping, sleep^uint32(op))
			default:
				n := 8 * (1 + int(op)%(size/8))
				b := w.Reserve(n)
				if b != nil {
					if p := uintptr(unsafe.Pointer(&b[0])); p < lo || p+uintptr(n) > lo+2*size {
						t.Fatalf("room at %#x+%d, outside the window %#x+%d", p, n, lo, 2*size)
					}
					w.Commit(n)
					written += n
				}
				w.Publish()
			}
			if p := w.Pending(); p < 0 || p > size {
				t.Fatalf("the writer holds %d bytes of a %d-byte stream", p, size)
			}
		}
		most := uint64(written/(size/streamWakeFrac)) + uint64(time.Since(start)/streamWakeGap) + 1
		if st := w.Stats(); st.Wakes > most {
			t.Fatalf("%d wakes for %d bytes: at most %d", st.Wakes, written, most)
		}
	})
}

// FuzzStreamReader gives a reader arbitrary heads: what Available returns
// always lies in its window and is at most the stream's size.
func FuzzStreamReader(f *testing.F) {
	f.Add(uint64(0), uint64(0))
	f.Add(uint64(100), uint64(5000))
	f.Add(^uint64(0), uint64(8))
	const size = 4096
	ss, err := CreateStreamSet(1, size)
	if err != nil {
		f.Fatal(err)
	}
	defer ss.Close()
	st, err := AttachStreams(ss.Fd(), 1)
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	f.Fuzz(func(t *testing.T, tail, head uint64) {
		r := st.Reader(0)
		r.tail = tail
		atomic.StoreUint64(ss.Writer(0).r.head, head)
		a := r.Available()
		if len(a) > size {
			t.Fatalf("%d bytes available from a %d-byte stream", len(a), size)
		}
		if len(a) > 0 {
			lo := uintptr(r.r.data)
			if p := uintptr(unsafe.Pointer(&a[0])); p < lo || p+uintptr(len(a)) > lo+2*size {
				t.Fatalf("%d bytes at %#x, outside the window %#x+%d", len(a), p, lo, 2*size)
			}
		}
		r.SleepAt(uint32(head))
		r.Awake()
	})
}

// TestAttachStreamsRejects: a stream set is attached only with its own
// ring count and headers; rings sets and stream sets are not each other.
func TestAttachStreamsRejects(t *testing.T) {
	ss, err := CreateStreamSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	for _, n := range []int{1, 3} {
		if _, err := AttachStreams(ss.Fd(), n); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AttachStreams(a set of 2, %d): %v, want EINVAL", n, err)
		}
	}
	if _, err := AttachSet(ss.Fd(), 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachSet(a stream set): %v, want EINVAL", err)
	}
	sp, err := CreateSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := AttachStreams(sp.Fd(), 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachStreams(a ring set): %v, want EINVAL", err)
	}
	w1 := ss.Writer(1).r
	atomic.StoreUint32(w1.u32(offVersion), 7)
	if _, err := AttachStreams(ss.Fd(), 2); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("AttachStreams with stream 1 of version 7: %v, want EPROTONOSUPPORT", err)
	}
}

// BenchmarkStream is the writer's cost per 120-byte record (a perf sample
// of a 64-byte payload), published per batch of 64, with the reader
// freeing what it finds.
func BenchmarkStream(b *testing.B) {
	ss, st := streamPair(b, 1, 1<<20)
	w, r := ss.Writer(0), st.Reader(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := w.Reserve(120)
		if p == nil {
			r.Consume(len(r.Available()))
			continue
		}
		p[0] = byte(i)
		w.Commit(120)
		if i++; i%64 == 0 {
			w.Publish()
		}
	}
}

// TestStreamBadHead: a head more than the stream's size past the tail is
// not believed — nothing is available, and BadHead says so — and once the
// head is believable again the bytes before it are.
func TestStreamBadHead(t *testing.T) {
	const size = 4096
	ss, st := streamPair(t, 1, size)
	sr := st.Reader(0)
	w := ss.Writer(0)
	b := w.Reserve(64)
	putFrame(b, 1)
	w.Commit(64)
	w.Publish()
	if got := len(sr.Available()); got != 64 {
		t.Fatalf("Available: %d bytes, want 64", got)
	}
	atomic.StoreUint64(sr.r.head, sr.tail+size+8) // as a broken writer would
	if got := sr.Available(); got != nil || sr.BadHead() == 0 {
		t.Fatalf("a head %d bytes past the tail: Available %d bytes, BadHead %d; want none and counted", size+8, len(got), sr.BadHead())
	}
	atomic.StoreUint64(sr.r.head, sr.tail+64)
	if got := len(sr.Available()); got != 64 {
		t.Fatalf("the head believable again: Available %d bytes, want 64", got)
	}
}
