package shmring

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// TestScribbledRing has a hostile producer rewrite the ring while the
// consumer reads it: valid records, and another goroutine storing random
// words over the data area, head and the shared tail. The consumer must not
// fault or loop; every byte its tail passes is delivered or counted; what it
// delivers fits the ring; and the shared tail's scribbles do not move its
// own. The consumer reads with Next, and again in place (Peek, CopyPayload,
// Advance).
func TestScribbledRing(t *testing.T) {
	t.Run("next", func(t *testing.T) { scribbledRing(t, false) })
	t.Run("peek", func(t *testing.T) { scribbledRing(t, true) })
}

func scribbledRing(t *testing.T, peek bool) {
	const size = 8192
	p, c := pair(t, size)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // an honest writer
		defer wg.Done()
		var pb [64]byte
		for i := uint32(0); !stop.Load(); i++ {
			p.Write(metaFor(0, i), payloadFor(pb[:], 0, i))
		}
	}()
	go func() { // the scribbler
		defer wg.Done()
		words := unsafe.Slice((*uint64)(p.r.data), size/8)
		r := rand.New(rand.NewPCG(1, 2))
		for !stop.Load() {
			switch r.IntN(64) {
			case 0, 1:
				// Head garbage for a moment: behind, far ahead, anywhere.
				// (The honest writer drops while it lasts.)
				old := atomic.LoadUint64(p.r.head)
				bad := r.Uint64()
				if r.IntN(2) == 0 {
					bad = old + r.Uint64N(2*size)
				}
				atomic.StoreUint64(p.r.head, bad)
				runtime.Gosched()
				atomic.CompareAndSwapUint64(p.r.head, bad, old)
			case 2:
				// The shared tail garbage for a moment: the consumer must
				// not follow it. (The writer, which does, drops; a tail
				// left garbage would stall this ring's writer for good, as
				// only a producer can do to itself.)
				old := atomic.LoadUint64(p.r.tail)
				bad := r.Uint64()
				atomic.StoreUint64(p.r.tail, bad)
				runtime.Gosched()
				atomic.CompareAndSwapUint64(p.r.tail, bad, old)
			default:
				// Half the time a forged header, right for its position
				// in the lap the consumer is reading, with a random length.
				i := r.IntN(len(words))
				w := r.Uint64()
				if r.IntN(2) == 0 {
					h := atomic.LoadUint64(p.r.head)
					pos := h&^(size-1) + uint64(i*8)
					if pos >= h {
						pos -= size
					}
					w = uint64(r.Uint32N(size)) | uint64(committed) | uint64(p.r.stamp(pos))<<32
					atomic.StoreUint64(&words[(i+3)%len(words)], uint64(p.r.check(pos))<<32)
				}
				atomic.StoreUint64(&words[i], w)
				runtime.Gosched()
			}
		}
	}()
	// Stopped before the test ends, fatally or not: the ring is unmapped
	// after.
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	buf := make([]byte, size)
	start := c.tail
	deadline := time.Now().Add(time.Minute)
	idle := 0
	goneAt := uint64(0)
	for {
		st := c.Stats()
		// Done when records came both before and after the producer was
		// declared gone, and scribbles were thrown away: how many depends
		// on how the scheduler interleaves the three goroutines (the race
		// detector and a loaded machine slow them many times over).
		if c.gone && st.Records > goneAt && st.Discarded > 0 {
			break
		}
		// A scribbled head the writer then built on leaves garbage that
		// stalls a live producer's ring for good (its own loss, by
		// design): a dead producer's is skipped.
		if !c.gone && (st.Records >= 2500 || idle > 100000) {
			c.ProducerGone()
			goneAt = st.Records
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, stats %+v: the scribbler and the writer did not get to run", st)
		}
		before := c.tail
		rec, err := readOne(c, peek, buf)
		idle++
		switch {
		case errors.Is(err, ErrNotReady):
		case err != nil:
			t.Fatal(err)
		case len(rec.Payload) > size-HeaderSize:
			t.Fatalf("a payload of %d bytes from a %d-byte ring", len(rec.Payload), size)
		}
		if err == nil {
			idle = 0
		}
		if c.tail-before > size || c.tail%8 != 0 {
			t.Fatalf("one Next moved the tail from %d to %d", before, c.tail)
		}
	}
	st := c.Stats()
	if st.Bytes+st.Discarded != c.tail-start {
		t.Fatalf("the tail moved %d bytes; %d delivered, %d discarded", c.tail-start, st.Bytes, st.Discarded)
	}
	t.Logf("stats %+v", st)
}

// TestNoAllocs: the producer's paths and the consumer's Next allocate
// nothing.
func TestNoAllocs(t *testing.T) {
	p, c := pair(t, 1<<16)
	buf := make([]byte, c.Size())
	iov := [][]byte{payload34[:10], payload34[10:]}
	for name, f := range map[string]func(){
		"Write":  func() { p.Write(benchMeta, payload34) },
		"Writev": func() { p.Writev(benchMeta, iov) },
		"Reserve+Commit": func() {
			if v, ok := p.Reserve(benchMeta, len(payload34)); ok {
				copy(v.Payload(), payload34)
				v.Commit()
			}
		},
		"Next": func() {
			p.Write(benchMeta, payload34)
			c.Next(buf)
		},
	} {
		if n := testing.AllocsPerRun(1000, func() { f(); drainAll(c, buf) }); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

// TestStaleWordIsNoRecord: a word of an old payload that happens to carry
// the stamp of the position it is found at, in the next lap, committed, with
// a plausible length, is still no record: its check is wrong. The consumer
// waits at it while the producer lives and skips it once it is gone.
func TestStaleWordIsNoRecord(t *testing.T) {
	const size = 4096
	p, c := pair(t, size)
	buf := make([]byte, size)
	// One record at position 0 whose payload holds, at ring offset 64, the
	// first word the next lap's header at 64 would have.
	pl := make([]byte, 200)
	forged := uint64(HeaderSize+40) | committed | uint64(p.r.stamp(size+64))<<32
	binary.NativeEndian.PutUint64(pl[64-HeaderSize:], forged)
	binary.NativeEndian.PutUint32(pl[64-HeaderSize+28:], ^p.r.check(size+64))
	if !p.Write(Meta{}, pl) {
		t.Fatal("dropped")
	}
	if _, err := c.Next(buf); err != nil {
		t.Fatal(err)
	}
	// The next lap: the consumer is at 4096+64, where a producer reserved
	// 200 bytes and has stored nothing yet.
	c.tail = size + 64
	atomic.StoreUint64(p.r.head, size+64+200)
	for range 3 {
		if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
			t.Fatalf("Next at a stale word: %v, want ErrNotReady", err)
		}
	}
	if c.Wait(time.Microsecond) {
		t.Fatal("Wait says a stale word is ready")
	}
	c.ProducerGone()
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Next: %v, want ErrNotReady", err)
	}
	if st := c.Stats(); st.Records != 1 || st.Discarded != 200 {
		t.Fatalf("stats %+v, want the one real record and 200 bytes discarded", st)
	}
}
