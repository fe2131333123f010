package userevents_test

import (
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// ringEvent opens a File on a daemon in a child process with the ring
// transport, and registers and enables the benchmarks' event.
func ringEvent(b *testing.B) *userevents.Event {
	o := userevents.Options{Backend: userevents.Daemon, Socket: benchDaemon(b), Transport: userevents.RingTransport}
	return daemontest.EnabledEvent(b, o, "bench_write u32 a; u64 b; u32 c; char[16] d; u16 e")
}

// BenchmarkDaemonRingWrite is Write on the daemon backend's fast path: the
// enable check, the client-side checks, the stamp and the publish into the
// ring, 34-byte payload. Records the daemon could not drain in time are
// dropped (and counted): "dropped/op" says how many.
func BenchmarkDaemonRingWrite(b *testing.B) {
	ev := ringEvent(b)
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		if err := ev.Write(payload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ev.Dropped())/float64(b.N), "dropped/op")
	// The writer's CPU time per write: on a machine loaded by other work
	// the writer is not running all the time ns/op counts.
	b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkDaemonRingWriteParallel is the same with GOMAXPROCS goroutines
// writing at once (run with -cpu 1,8): each publishes into the ring of the
// CPU it runs on; those on one CPU contend on its ring's head.
func BenchmarkDaemonRingWriteParallel(b *testing.B) {
	ev := ringEvent(b)
	b.ReportAllocs()
	b.ResetTimer() // RunParallel does not: the daemon's start is not a write
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := ev.Write(payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(ev.Dropped())/float64(b.N), "dropped/op")
}
