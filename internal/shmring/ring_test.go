package shmring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pairInSet, when not negative, makes pair return that ring of a set of
// pairSetRings rings instead of a ring of its own (TestRingsOfASet).
var pairInSet = -1

const pairSetRings = 3

// pair is a ring created for producing and attached for consuming, as two
// processes would: two mappings of one memfd.
func pair(t testing.TB, size int) (*Producer, *Consumer) {
	t.Helper()
	if pairInSet >= 0 {
		return setPair(t, size, pairInSet)
	}
	p, err := Create(size)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Attach(p.Fd())
	if err != nil {
		p.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p, c
}

// payloadFor is a record's payload that says who wrote it: stream and
// sequence number, then a length and bytes that follow from them, so the
// reader can check every byte.
func payloadFor(buf []byte, stream, seq uint32) []byte {
	n := 8 + int(seq*7+stream)%57
	b := buf[:n]
	binary.LittleEndian.PutUint32(b, stream)
	binary.LittleEndian.PutUint32(b[4:], seq)
	for i := 8; i < n; i++ {
		b[i] = byte(int(seq) + i*int(stream+1))
	}
	return b
}

// checkPayload returns the stream and sequence a payload claims, or an
// error if any byte is not what payloadFor would have written.
func checkPayload(p []byte) (stream, seq uint32, err error) {
	if len(p) < 8 {
		return 0, 0, fmt.Errorf("payload of %d bytes", len(p))
	}
	stream, seq = binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:])
	var want [64]byte
	if w := payloadFor(want[:], stream, seq); string(w) != string(p) {
		return stream, seq, fmt.Errorf("stream %d record %d: payload %x, want %x", stream, seq, p, w)
	}
	return stream, seq, nil
}

func metaFor(stream, seq uint32) Meta {
	return Meta{Time: uint64(seq)*1000 + 7, WriteIndex: stream, TID: 1000 + stream, CPU: seq % 4}
}

func checkRecord(t testing.TB, rec Record) (stream, seq uint32) {
	t.Helper()
	stream, seq, err := checkPayload(rec.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Meta != metaFor(stream, seq) {
		t.Fatalf("stream %d record %d: meta %+v, want %+v", stream, seq, rec.Meta, metaFor(stream, seq))
	}
	return stream, seq
}

func TestCreateRejectsBadSizes(t *testing.T) {
	for _, size := range []int{-1, 0, 8, 4095, 4096 + 8, 3 << 12, MaxSize * 2} {
		if p, err := Create(size); !errors.Is(err, unix.EINVAL) {
			if err == nil {
				p.Close()
			}
			t.Errorf("Create(%d): %v, want EINVAL", size, err)
		}
	}
}

func TestAttachRejects(t *testing.T) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := Attach(fds[0]); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Attach(a pipe): %v, want EINVAL", err)
	}

	// A memfd that could shrink under the consumer's feet.
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, int64(os.Getpagesize()+4096))
	if _, err := Attach(fd); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Attach(an unsealed memfd): %v, want EINVAL", err)
	}

	// A sealed memfd without a ring's header.
	p, err := Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	atomic.StoreUint64(p.r.u64(offMagic), 0)
	if _, err := Attach(p.Fd()); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Attach(no magic): %v, want EINVAL", err)
	}
	atomic.StoreUint64(p.r.u64(offMagic), magic)
	*p.r.u64(offSize) = 8192
	if _, err := Attach(p.Fd()); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Attach(a header that lies about the size): %v, want EINVAL", err)
	}
	*p.r.u64(offSize) = 4096
	*p.r.u32(offVersion) = 2
	if _, err := Attach(p.Fd()); !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("Attach(version 2): %v, want EPROTONOSUPPORT", err)
	}
}

// TestOrderAndWrap writes records of every size class through a small ring
// many times over, reading in bursts, so records cross the end of the data
// area at every offset; each comes out whole, in order.
func TestOrderAndWrap(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	var pb [64]byte
	var next, read uint32
	var full uint64
	for round := 0; round < 2000; round++ {
		for i := 0; i < round%37+1; i++ {
			if !p.Write(metaFor(3, next), payloadFor(pb[:], 3, next)) {
				full++ // read some first, then write this one again
				break
			}
			next++
		}
		for i := 0; i < round%41+1; i++ {
			rec, err := c.Next(buf)
			if errors.Is(err, ErrNotReady) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if _, seq := checkRecord(t, rec); seq != read {
				t.Fatalf("record %d came out as the %dth", seq, read)
			}
			read++
		}
	}
	for {
		rec, err := c.Next(buf)
		if errors.Is(err, ErrNotReady) {
			break
		}
		if _, seq := checkRecord(t, rec); seq != read {
			t.Fatalf("record %d came out as the %dth", seq, read)
		}
		read++
	}
	if read != next {
		t.Fatalf("read %d records, wrote %d", read, next)
	}
	if d, _ := p.Dropped(); d != full {
		t.Fatalf("the ring counted %d records dropped, Write reported %d", d, full)
	}
	if st := c.Stats(); st.Records != uint64(read) || st.Discarded != 0 || st.Torn != 0 || st.BadHead != 0 {
		t.Fatalf("stats %+v", st)
	}
	if h := atomic.LoadUint64(p.r.head); h < 20*4096 {
		t.Fatalf("only %d bytes went through a 4096-byte ring: not enough wraps to mean anything", h)
	}
}

// TestFullRingAccounting fills the ring without reading: the writes that
// do not fit are dropped and counted, records and bytes, and what was
// written is what is read plus what was dropped.
func TestFullRingAccounting(t *testing.T) {
	p, c := pair(t, 4096)
	var pb [64]byte
	var ok, dropped, droppedBytes uint64
	for i := uint32(0); i < 500; i++ {
		pl := payloadFor(pb[:], 1, i)
		if p.Write(metaFor(1, i), pl) {
			ok++
		} else {
			dropped++
			droppedBytes += align8(uint64(HeaderSize + len(pl)))
		}
	}
	if dropped == 0 {
		t.Fatal("500 records fit a 4096-byte ring")
	}
	if d, db := p.Dropped(); d != dropped || db != droppedBytes {
		t.Fatalf("the ring counted %d dropped records of %d bytes; Write said %d of %d", d, db, dropped, droppedBytes)
	}
	if d, db := c.Dropped(); d != dropped || db != droppedBytes {
		t.Fatalf("the consumer sees %d dropped records of %d bytes, want %d of %d", d, db, dropped, droppedBytes)
	}
	buf := make([]byte, c.Size())
	var read uint64
	prev := -1
	for {
		rec, err := c.Next(buf)
		if errors.Is(err, ErrNotReady) {
			break
		}
		_, seq := checkRecord(t, rec)
		if int(seq) <= prev {
			t.Fatalf("record %d after %d", seq, prev)
		}
		prev = int(seq)
		read++
	}
	if read != ok || read+dropped != 500 {
		t.Fatalf("read %d, written %d, dropped %d of 500", read, ok, dropped)
	}
	// A record larger than the ring never fits: dropped too.
	if p.Write(Meta{}, make([]byte, 4096)) {
		t.Fatal("a record larger than the ring was written")
	}
	if d, _ := p.Dropped(); d != dropped+1 {
		t.Fatalf("dropped %d, want %d", d, dropped+1)
	}
	// And once read, there is room again.
	if !p.Write(Meta{}, make([]byte, 4096-HeaderSize)) {
		t.Fatal("a record the size of the emptied ring was dropped")
	}
	if rec, err := c.Next(buf); err != nil || len(rec.Payload) != 4096-HeaderSize {
		t.Fatalf("Next: %d bytes, %v", len(rec.Payload), err)
	}
}

// TestConcurrentProducers has eight goroutines write at once into a small
// ring while a consumer drains it: each goroutine's records come out whole
// and in its order, and per goroutine, written = read + dropped exactly.
func TestConcurrentProducers(t *testing.T) {
	const writers, each = 8, 20000
	p, c := pair(t, 16384)
	var wrote, dropped [writers]uint64
	var wg sync.WaitGroup
	var done atomic.Bool
	for g := range uint32(writers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var pb [64]byte
			iov := make([][]byte, 2)
			for i := range uint32(each) {
				pl := payloadFor(pb[:], g, i)
				var ok bool
				if i%2 == 0 {
					ok = p.Write(metaFor(g, i), pl)
				} else {
					iov[0], iov[1] = pl[:5], pl[5:]
					ok = p.Writev(metaFor(g, i), iov)
				}
				if ok {
					wrote[g]++
				} else {
					dropped[g]++
				}
			}
		}()
	}
	go func() { wg.Wait(); done.Store(true) }()

	buf := make([]byte, c.Size())
	var read [writers]uint64
	last := [writers]int64{-1, -1, -1, -1, -1, -1, -1, -1}
	for {
		finished := done.Load() // before the read that finds the ring empty
		rec, err := c.Next(buf)
		if errors.Is(err, ErrNotReady) {
			if finished {
				break
			}
			c.Wait(time.Millisecond)
			continue
		}
		g, seq := checkRecord(t, rec)
		if g >= writers || int64(seq) <= last[g] {
			t.Fatalf("stream %d: record %d after %d", g, seq, last[g])
		}
		last[g] = int64(seq)
		read[g]++
	}
	var totalDropped uint64
	for g := range writers {
		if wrote[g] != read[g] || wrote[g]+dropped[g] != each {
			t.Errorf("goroutine %d: wrote %d, read %d, dropped %d of %d", g, wrote[g], read[g], dropped[g], each)
		}
		totalDropped += dropped[g]
	}
	if d, _ := c.Dropped(); d != totalDropped {
		t.Errorf("the ring counted %d dropped, the writers %d", d, totalDropped)
	}
	if st := c.Stats(); st.Discarded != 0 || st.BadHead != 0 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d dropped of %d", totalDropped, writers*each)
}

// TestTornKnownLength: a producer reserved, wrote its header and stopped. The
// consumer waits for it while it lives; once told it is gone, it skips the
// record by its length, counts it, and delivers the committed ones after it.
func TestTornKnownLength(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	var pb [64]byte
	p.Write(metaFor(0, 0), payloadFor(pb[:], 0, 0))
	v, ok := p.Reserve(Meta{}, 20)
	if !ok {
		t.Fatal("Reserve dropped into an empty ring")
	}
	copy(v.Payload(), "half of a payload")
	for i := uint32(1); i < 4; i++ {
		p.Write(metaFor(0, i), payloadFor(pb[:], 0, i))
	}
	if _, err := c.Next(buf); err != nil {
		t.Fatal(err)
	}
	for range 3 { // never anything while the producer lives
		if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
			t.Fatalf("Next behind an uncommitted record: %v, want ErrNotReady", err)
		}
	}
	if ready, err := c.wait(1, time.Millisecond); ready || !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("wait behind an uncommitted record: %v, %v; want false, ETIMEDOUT", ready, err)
	}
	c.ProducerGone()
	for i := uint32(1); i < 4; i++ {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, seq := checkRecord(t, rec); seq != i {
			t.Fatalf("record %d, want %d", seq, i)
		}
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next at the end: %v", err)
	}
	st := c.Stats()
	if st.Torn != 1 || st.Discarded != align8(HeaderSize+20) || st.Records != 4 {
		t.Fatalf("stats %+v, want 4 records and 1 torn of %d bytes", st, align8(HeaderSize+20))
	}
}

// TestTornUnknownLength: a producer moved head and died before its first
// store, over space that still holds a previous lap's records. After it is
// gone, the consumer finds the next committed record by its stamp, and
// counts the bytes in between.
func TestTornUnknownLength(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	var pb [64]byte
	// A lap of old records, read, so the space is free but not blank.
	seq := uint32(0)
	for atomic.LoadUint64(p.r.head) < 4096+1000 {
		if !p.Write(metaFor(0, seq), payloadFor(pb[:], 0, seq)) {
			for {
				if _, err := c.Next(buf); err != nil {
					break
				}
			}
			continue
		}
		seq++
	}
	for {
		if _, err := c.Next(buf); err != nil {
			break
		}
	}
	// The dead reservation: 200 bytes, no store.
	hole := uint64(200)
	atomic.AddUint64(p.r.head, hole)
	first := seq
	for i := 0; i < 5; i++ {
		p.Write(metaFor(1, seq), payloadFor(pb[:], 1, seq))
		seq++
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next at a reservation without a header: %v, want ErrNotReady", err)
	}
	c.ProducerGone()
	before := c.Stats()
	for want := first; want < seq; want++ {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatalf("record %d: %v", want, err)
		}
		if _, got := checkRecord(t, rec); got != want {
			t.Fatalf("record %d, want %d", got, want)
		}
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next at the end: %v", err)
	}
	st := c.Stats()
	if st.Discarded-before.Discarded != hole || st.Torn != 0 {
		t.Fatalf("discarded %d bytes, torn %d; want %d, 0", st.Discarded-before.Discarded, st.Torn, hole)
	}
}

// TestTornAtTheEnd: nothing committed after a dead reservation: everything
// to head is discarded, and the ring is usable again.
func TestTornAtTheEnd(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	atomic.AddUint64(p.r.head, 96)
	c.ProducerGone()
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next: %v", err)
	}
	if st := c.Stats(); st.Discarded != 96 {
		t.Fatalf("stats %+v, want 96 bytes discarded", st)
	}
	if got := atomic.LoadUint64(p.r.tail); got != 96 {
		t.Fatalf("published tail %d, want 96", got)
	}
	if !p.Write(Meta{}, []byte("after")) {
		t.Fatal("dropped")
	}
	if rec, err := c.Next(buf); err != nil || string(rec.Payload) != "after" {
		t.Fatalf("Next: %q, %v", rec.Payload, err)
	}
}

// TestTooLong: a committed record larger than the consumer's buffer is
// skipped and counted; the next one is delivered.
func TestTooLong(t *testing.T) {
	p, c := pair(t, 4096)
	p.Write(Meta{}, make([]byte, 500))
	p.Write(Meta{}, []byte("short"))
	buf := make([]byte, 256)
	rec, err := c.Next(buf)
	if err != nil || string(rec.Payload) != "short" {
		t.Fatalf("Next: %q, %v", rec.Payload, err)
	}
	if st := c.Stats(); st.TooLong != 1 || st.Discarded != align8(HeaderSize+500) {
		t.Fatalf("stats %+v", st)
	}
}

// TestHostileHead: head behind the tail, absurdly ahead, unaligned; the
// consumer reads nothing outside the ring, returns, and counts.
func TestHostileHead(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	p.Write(Meta{}, []byte("one"))
	if _, err := c.Next(buf); err != nil {
		t.Fatal(err)
	}
	for _, h := range []uint64{0, 1, 1<<64 - 8, 1 << 40, 40 + 3, 40 + 4096*1000} {
		atomic.StoreUint64(p.r.head, h)
		for _, gone := range []bool{false, true} {
			c.gone = gone
			for range 3 {
				if _, err := c.Next(buf); err != nil && !errors.Is(err, ErrNotReady) {
					t.Fatalf("head %d: %v", h, err)
				}
			}
			c.Wait(time.Microsecond)
			c.Pending()
		}
	}
	if c.Stats().BadHead == 0 {
		t.Fatal("no bad head counted")
	}
	if c.tail%8 != 0 {
		t.Fatalf("tail %d is not 8-aligned", c.tail)
	}
}

// TestNoWakeWhileAwake: publishing into a ring whose consumer does not
// sleep makes no system call.
func TestNoWakeWhileAwake(t *testing.T) {
	p, c := pair(t, 1<<16)
	buf := make([]byte, c.Size())
	for i := range 10000 {
		p.Write(Meta{}, []byte("x"))
		if i%16 == 0 {
			for {
				if _, err := c.Next(buf); err != nil {
					break
				}
			}
		}
	}
	if w := p.Wakes(); w != 0 {
		t.Fatalf("%d wakes with no consumer asleep", w)
	}
	for { // empty, so that the consumer really sleeps
		if _, err := c.Next(buf); err != nil {
			break
		}
	}
	// Asleep, then one record: one wake, and the consumer cleared nothing
	// the producer needed.
	woke := make(chan bool)
	go func() {
		ready, err := c.wait(1, time.Minute)
		if err != nil {
			t.Error(err)
		}
		woke <- ready
	}()
	for {
		if atomic.LoadUint32(p.r.sleeping) == 1 {
			break
		}
		time.Sleep(time.Millisecond) // polling for the consumer to go to sleep
	}
	p.Write(Meta{}, []byte("wake up"))
	if !<-woke {
		t.Fatal("woken with nothing ready")
	}
	if w := p.Wakes(); w != 1 {
		t.Fatalf("%d wakes, want 1", w)
	}
}

// TestWaitTimesOut: a consumer waiting on an idle ring returns after its
// timeout, not ready.
func TestWaitTimesOut(t *testing.T) {
	_, c := pair(t, 4096)
	ready, err := c.wait(1, 10*time.Millisecond)
	for errors.Is(err, unix.EINTR) { // a signal to the thread; not what this tests
		ready, err = c.wait(1, 10*time.Millisecond)
	}
	if ready || !errors.Is(err, unix.ETIMEDOUT) {
		t.Fatalf("wait on an empty ring: %v, %v; want false, ETIMEDOUT", ready, err)
	}
	if atomic.LoadUint32(c.r.sleeping) != 0 {
		t.Fatal("the sleeping word stayed set after Wait")
	}
}

// TestWakeupStress races the producer's publish against the consumer going
// to sleep, many times: the producer publishes the next record the moment
// the consumer has taken the previous one, so the consumer is somewhere
// between "found nothing", "said it sleeps", "looked again" and "sleeps".
// A lost wakeup leaves the consumer asleep with a record ready: its
// minute-long futex wait would time out.
func TestWakeupStress(t *testing.T) {
	const n = 20000
	p, c := pair(t, 4096)
	var taken atomic.Uint32
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, c.Size())
		for want := uint32(0); want < n; {
			rec, err := c.Next(buf)
			if err == nil {
				if got := binary.LittleEndian.Uint32(rec.Payload); got != want {
					errc <- fmt.Errorf("record %d, want %d", got, want)
					return
				}
				want++
				taken.Store(want)
				continue
			}
			if _, err := c.wait(1, time.Minute); errors.Is(err, unix.ETIMEDOUT) {
				errc <- fmt.Errorf("lost wakeup: the consumer slept a minute with record %d published (head %d, tail %d)",
					want, atomic.LoadUint64(p.r.head), c.tail)
				return
			}
		}
		errc <- nil
	}()
	var b [4]byte
	for i := uint32(0); i < n; i++ {
		binary.LittleEndian.PutUint32(b[:], i)
		if !p.Write(Meta{}, b[:]) {
			t.Fatalf("record %d dropped with one record in flight", i)
		}
		for taken.Load() <= i {
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
				// Done: the consumer took the last record between our
				// look at taken and this one. Back for the check below.
				errc <- nil
			default:
			}
			// Yield: with two cores the consumer needs one to run on.
			runtime.Gosched()
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records, %d wakes", n, p.Wakes())
	if p.Wakes() == 0 {
		t.Fatal("the consumer never slept: the test raced nothing")
	}
}
