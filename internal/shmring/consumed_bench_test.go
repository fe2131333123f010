package shmring

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkFloorConsumed is BenchmarkFloor/write with a consumer draining
// concurrently from another goroutine (GOMAXPROCS >= 2: another core), as
// the daemon drains a client's ring: what the producer pays for the cache
// lines the two sides share, under two consumer policies.
//
// tight: the consumer drains until Next finds nothing, then looks again
// at once (yielding in between, as the daemon's drainer polls before it
// sleeps): it reads each record right after its commit, so the lines of
// the record being written move between the cores.
//
// nap: after a drain the consumer sleeps (a timer, not the ring's futex:
// the producer makes no wake) before it looks again; records pile up and
// are drained in a batch, each line moving once, long after the producer
// left it. After napIdle empty looks it would sleep on the ring (Wait);
// the producer here never stops, so it does not.
//
// drops/op must stay 0 (the ring never fills during a nap); batch is the
// records per drain.
func BenchmarkFloorConsumed(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("the consumer needs a core of its own: GOMAXPROCS >= 2")
	}
	for _, nap := range []time.Duration{0, 50 * time.Microsecond} {
		name := "tight"
		if nap > 0 {
			name = "nap"
		}
		b.Run(name, func(b *testing.B) {
			// 16 MiB: room for 230 000 records, so that a nap the
			// scheduler stretches on a loaded machine does not fill it.
			p, c := pair(b, 1<<24)
			buf := make([]byte, c.Size())
			var stop atomic.Bool
			var wg sync.WaitGroup
			var read, drains int
			wg.Go(func() {
				for !stop.Load() {
					n := drainAll(c, buf)
					read += n
					if n > 0 {
						drains++
					}
					if nap > 0 {
						time.Sleep(nap)
					} else {
						runtime.Gosched()
					}
				}
				read += drainAll(c, buf)
			})
			b.ReportAllocs()
			for b.Loop() {
				p.Write(benchMeta, payload34)
			}
			b.StopTimer()
			stop.Store(true)
			wg.Wait()
			dropped, _ := p.Dropped()
			if uint64(read)+dropped != uint64(b.N) {
				b.Fatalf("%d written, %d read + %d dropped", b.N, read, dropped)
			}
			b.ReportMetric(float64(dropped)/float64(b.N), "drops/op")
			b.ReportMetric(float64(read)/float64(max(drains, 1)), "batch")
		})
	}
}
