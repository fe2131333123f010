package handover

import (
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/testutil"
)

// BenchmarkHandoverPass is the reader's cost per record of a handed ring
// — what the daemon's drainer spent on it before (BenchmarkDaemonDeliver,
// consumer=stream): a batch of records of the daemon benchmark's event (a
// 34-byte payload) published into the ring outside the timer, then passes
// of at most most records each — Begin, the checks, the sample laid out
// and the payload copied and validated in the output, Commit, the tail
// published — until the ring is empty. The output is taken outside the
// timer, as a recording would write it out. cpu-ns/record is the
// process's CPU while the timer runs (the reader's only: no other
// goroutine runs then).
func BenchmarkHandoverPass(b *testing.B) {
	for _, most := range []int{256, 4096} {
		b.Run(fmt.Sprintf("most=%d", most), func(b *testing.B) { benchPass(b, most) })
	}
}

func benchPass(b *testing.B, most int) {
	def, err := eventdef.Parse("bench_deliver u32 a; u64 b; u32 c; char[16] d; u16 e")
	if err != nil {
		b.Fatal(err)
	}
	sp, err := shmring.CreateSet(1, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer sp.Close()
	ctl, err := CreateControl(1)
	if err != nil {
		b.Fatal(err)
	}
	defer ctl.Close()
	g := Grant{ID: 1, Rings: 1, PID: int32(os.Getpid()), Comm: "bench", LossSince: time.Now(),
		Events: []Event{{SampleID: wire.SampleID(30), Def: def}}}
	set, err := OpenSet(g, sp.Fd(), ctl.Fd())
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	ctl.Give(0, 0)
	out := NewStream(true)
	p := sp.Ring(0)
	payload := make([]byte, 34)
	tid := uint32(unix.Gettid())
	const batch = 4096
	n := 0
	var cpu time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		out.Reset()
		for range batch {
			if !p.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: 0, TID: tid, CPU: 0}, payload) {
				b.Fatal("ring full")
			}
		}
		n += batch
		b.StartTimer()
		c0 := testutil.CPUTime()
		for got := 0; got < batch; {
			k, gone := set.Pass(0, out, most)
			if gone || k == 0 {
				b.Fatalf("gone %v after %d records", gone, got)
			}
			got += k
		}
		cpu += testutil.CPUTime() - c0
	}
	b.StopTimer()
	if d := ctl.Counts(0).Delivered; d != uint64(n) {
		b.Fatalf("%d delivered of %d", d, n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/record")
}
