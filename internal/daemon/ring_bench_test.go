package daemon

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
)

// BenchmarkRingDeliver is the daemon's side of the fast path per record:
// a batch of 34-byte records published into a connection's ring, then
// Flush — the merger copies each out, checks it again and writes it into
// the trace buffer of an enabled event. The producer's publish is in the
// figure too (BenchmarkFloor in internal/shmring says how little it is);
// what remains is the daemon's cost, the bound on what one connection's
// ring delivers per second. own: every record of the producer's own
// thread; madeup8000: each of a cycle of 8 000 thread ids no task has, as a
// hostile producer makes them up — the merger's cost of checking them is
// the producer's ration (writer.go), after which they cost what own does.
func BenchmarkRingDeliver(b *testing.B) {
	own := uint32(unix.Gettid())
	b.Run("tid=own", func(b *testing.B) { benchRingDeliver(b, func(int) uint32 { return own }) })
	b.Run("tid=madeup8000", func(b *testing.B) { benchRingDeliver(b, func(i int) uint32 { return madeUpTID(i, 8000) }) })
}

func benchRingDeliver(b *testing.B, tid func(i int) uint32) {
	s := serve(b, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 2})})
	a := newArena(b, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(b, s.sock)
	idx, _, err := c.Register(reg(a.addr(0), 0), "bench_deliver u32 a; u64 b; u32 c; char[16] d; u16 e", false)
	if err != nil {
		b.Fatal(err)
	}
	if err := writeFile(c, "events/user_events/bench_deliver/enable", "1"); err != nil {
		b.Fatal(err)
	}
	ring, err := shmring.Create(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer ring.Close()
	if err := c.ShareRing(ring); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 34)
	const batch = 1000 // 72 bytes each in the ring: well within 1 MiB
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		for range batch {
			i++
			if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: tid(i)}, payload) {
				b.Fatal("ring full")
			}
		}
		s.Flush()
	}
	b.StopTimer()
	st := s.RingStats()
	if st.Delivered != uint64(b.N)*batch {
		b.Fatalf("%d delivered of %d", st.Delivered, b.N*batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}
