package shmring

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// payload34 is the payload: 34 bytes, as a u32, a u64 and a short
// string with its __rel_loc would take.
var payload34 = []byte("0123456789abcdefghijklmnopqrstuvwx")

var benchMeta = Meta{Time: 123456789, WriteIndex: 1, TID: 4242, CPU: 1}

// drainAll empties the ring.
func drainAll(c *Consumer, buf []byte) (n int) {
	for {
		if _, err := c.Next(buf); err != nil {
			return n
		}
		n++
	}
}

// BenchmarkFloor is the physical limit of the design: the same header and
// a 34-byte payload published into a memfd ring, no validation, no event.
//
// write: one goroutine; the ring is emptied outside the timer whenever it is
// half full, so every write lands (drops/op stays 0) and only the producer
// is measured.
//
// parallel: b.RunParallel (-cpu 1,8) while a consumer goroutine drains
// concurrently, as the daemon would from another core; drops/op says how
// many writes found the ring full because the consumer did not keep up (on
// a two-core machine with eight writers it cannot: the figure per write is
// then partly the drop path's).
func BenchmarkFloor(b *testing.B) {
	b.Run("write", func(b *testing.B) {
		p, c := pair(b, 1<<22)
		buf := make([]byte, c.Size())
		half := uint64(c.Size() / 2)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if !p.Write(benchMeta, payload34) {
				b.Fatal("dropped")
			}
			if atomic.LoadUint64(p.r.head)-c.tail > half {
				b.StopTimer()
				drainAll(c, buf)
				b.StartTimer()
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		p, c := pair(b, 1<<24)
		buf := make([]byte, c.Size())
		var stop atomic.Bool
		var wg sync.WaitGroup
		var read int
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := c.Next(buf); err == nil {
					read++
				} else {
					c.Wait(time.Millisecond)
				}
			}
			read += drainAll(c, buf)
		}()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p.Write(benchMeta, payload34)
			}
		})
		b.StopTimer()
		stop.Store(true)
		wg.Wait()
		dropped, _ := p.Dropped()
		if uint64(read)+dropped != uint64(b.N) {
			b.Fatalf("%d written, %d read + %d dropped", b.N, read, dropped)
		}
		b.ReportMetric(float64(dropped)/float64(b.N), "drops/op")
		b.ReportMetric(float64(p.Wakes())/float64(b.N), "wakes/op")
	})
}

// BenchmarkDrain is the consumer's rate: copying out and checking records
// of a 34-byte payload from a full ring, per record. The ring is refilled
// outside the timer.
func BenchmarkDrain(b *testing.B) {
	p, c := pair(b, 1<<22)
	buf := make([]byte, c.Size())
	fill := func() int {
		n := 0
		for p.Write(benchMeta, payload34) {
			n++
		}
		return n
	}
	b.ReportAllocs()
	b.StopTimer()
	avail := fill()
	b.StartTimer()
	for i := 0; i < b.N; i++ {
		if avail == 0 {
			b.StopTimer()
			avail = fill()
			b.StartTimer()
		}
		rec, err := c.Next(buf)
		if err != nil {
			if errors.Is(err, ErrNotReady) {
				b.Fatalf("record %d: the ring is empty", i)
			}
			b.Fatal(err)
		}
		if len(rec.Payload) != len(payload34) {
			b.Fatalf("a payload of %d bytes", len(rec.Payload))
		}
		avail--
	}
}
