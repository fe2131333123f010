package daemon

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// BenchmarkRingDeliver is the daemon's side of the fast path per record:
// a batch of 34-byte records published into a connection's ring set (the
// ring of CPU 0), then Flush — drainer 0 checks each again and writes it into
// the trace buffer of an enabled event. The producer's publish is in the
// figure too (BenchmarkFloor in internal/shmring says how little it is);
// what remains is the daemon's cost, the bound on what one connection's
// ring delivers per second. own: every record of the producer's own
// thread; madeup8000: each of a cycle of 8 000 thread ids no task has, as a
// hostile producer makes them up — the drainer's cost of checking them is
// the producer's ration (package ringcheck), after which they cost what own does.
func BenchmarkRingDeliver(b *testing.B) {
	own := uint32(unix.Gettid())
	b.Run("tid=own", func(b *testing.B) { benchRingDeliver(b, func(int) uint32 { return own }) })
	b.Run("tid=madeup8000", func(b *testing.B) { benchRingDeliver(b, func(i int) uint32 { return madeUpTID(i, 8000) }) })
}

func benchRingDeliver(b *testing.B, tid func(i int) uint32) {
	s := serve(b, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 2})})
	_, c, idx := producer(b, s, "bench_deliver u32 a; u64 b; u32 c; char[16] d; u16 e")
	if err := writeFile(c, "events/user_events/bench_deliver/enable", "1"); err != nil {
		b.Fatal(err)
	}
	ring := shareTestRing(b, c, 1<<20)
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

// BenchmarkDaemonDeliver is the daemon's cost per record delivered into a
// session's streams (what uetrace record reads) or the trace buffer, from
// ring sets (the drainers; ring=v2, the Ring request's version), with 1 or 4
// producer connections: a batch published into each producer's ring (the
// publish outside the timer), then Flush. The drainers' figure is their
// merge of one CPU's rings, the checks, and the one copy into the
// consumer's buffer, each record validated there. With the stream
// consumer, lost/record is what its streams lost of those records (their
// LOST records' counts, and the losses Sync hands over) — read, as the
// streams are emptied, outside the timer.
func BenchmarkDaemonDeliver(b *testing.B) {
	for _, consumer := range []string{"stream", "ftrace"} {
		for _, producers := range []int{1, 4} {
			name := fmt.Sprintf("consumer=%s/ring=v%d/producers=%d", consumer, wire.RingSet, producers)
			b.Run(name, func(b *testing.B) { benchDaemonDeliver(b, consumer, producers) })
		}
	}
}

func benchDaemonDeliver(b *testing.B, consumer string, producers int) {
	sys := subsys.New(subsys.Options{NumCPU: 2})
	s := serve(b, Config{Subsystem: sys, Rings: 2})
	const event = "bench_deliver u32 a; u64 b; u32 c; char[16] d; u16 e"
	var rcs []*ringClient
	for range producers {
		_, c, idx := producer(b, s, event)
		rcs = append(rcs, &ringClient{c: c, idx: idx, ring: shareTestRing(b, c, 4<<20)})
	}
	var st *client.SessionStreams
	var lost uint64 // the stream consumer's: its LOST records' counts, and Sync's
	countLost := func(sr streamRec) { lost += sr.n }
	consume := func() {
		for k := range st.Len() {
			r := st.Reader(k)
			eachStreamRec(b, r.Available(), countLost)
			r.Consume(len(r.Available()))
		}
	}
	switch consumer {
	case "stream":
		ss := newSession(b, s, client.SessionOptions{Comm: true})
		var err error
		if st, err = ss.ShareStreams(4 << 20); err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		if _, err := ss.Attach("bench_deliver", false); err != nil {
			b.Fatal(err)
		}
	case "ftrace":
		if err := writeFile(rcs[0].c, "events/user_events/bench_deliver/enable", "1"); err != nil {
			b.Fatal(err)
		}
	}
	payload := make([]byte, 34)
	tid := uint32(unix.Gettid())
	const batch = 4096
	n := 0
	var cpu time.Duration // the process's CPU while the timer runs
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if st != nil {
			consume()
		}
		for i := range batch {
			rc := rcs[i%producers]
			if !rc.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: rc.idx, TID: tid, CPU: uint32(i/producers) % 2}, payload) {
				b.Fatal("ring full")
			}
		}
		n += batch
		b.StartTimer()
		c0 := testutil.CPUTime()
		s.Flush()
		cpu += testutil.CPUTime() - c0
	}
	b.StopTimer()
	if got := s.RingStats().Delivered; got != uint64(n) {
		b.Fatalf("%d delivered of %d", got, n)
	}
	if st != nil {
		l, _, err := st.Sync()
		if err != nil {
			b.Fatal(err)
		}
		lost += l
		consume()
		// Beside the figure, what the streams lost of it.
		b.ReportMetric(float64(lost)/float64(n), "lost/record")
	}
	// Wall time per record, and CPU: a set's records go to both CPUs'
	// rings, whose drainers deliver them at once — the CPU a record costs
	// is about twice its wall time here.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/record")
}
