package record_test

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/realtime"
)

// The zero-loss rate, issue 31's figure: the highest rate paced producers
// sustain through the daemon into uetrace record's file with nothing lost
// anywhere — not in a producer's ring, not in the session — found by a
// geometric bisection between -zl.lo and -zl.hi. A rate counts as
// zero-loss when most of -zl.trials trials at it lose nothing and the
// producers really wrote at it (at least 97 % of it: a producer that could
// not keep up is no proof); every trial's accounting is checked exactly
// (written = recorded + lost, per producer no record twice). The daemon is
// a process of its own, as uetrace serve; the recording is this process.
//
//	go test ./internal/record -run '^$' -bench ZeroLoss -benchtime 1x -timeout 60m
var (
	zlLo        = flag.Float64("zl.lo", 0.25e6, "lowest rate tried, events/s (all producers together)")
	zlHi        = flag.Float64("zl.hi", 16e6, "highest rate tried, events/s")
	zlSteps     = flag.Int("zl.steps", 7, "bisection steps (geometric)")
	zlSeconds   = flag.Float64("zl.seconds", 1.0, "seconds of writing per trial")
	zlSessionKB = flag.Int("zl.sessionkb", 16<<10, "the session's streams, KiB in all")
	zlRingKB    = flag.Int("zl.ringkb", 0, "each producer ring's KiB (UETRACE_RING_KB; 0: the default share)")
	zlTrials    = flag.Int("zl.trials", 3, "trials per rate; zero-loss when most are")
	zlProducers = flag.String("zl.producers", "1,2", "producer counts to search, comma-separated")
	zlNoHand    = flag.Bool("zl.nohandover", false, "keep every record on the daemon's path (no ring set handed to the recording)")
	zlRealtime  = flag.Int("zl.realtime", 0, "the recording's threads at this SCHED_FIFO priority, as uetrace record -r (0: normal; the daemon and the producers stay normal)")
)

// zlTrial is one rate's verdict, with the last trial's figures.
type zlTrial struct {
	rate               float64
	r                  e2eResult
	ok                 bool
	achieved, lostFrac float64
	daemonNs, recordNs float64 // CPU per record delivered
	producerNs         float64 // CPU per record written
}

func zlRun(tb testing.TB, producers int, rate float64) zlTrial {
	n := int(max(rate**zlSeconds, 200_000))
	r := e2eRun(tb, e2eConfig{count: n, bufferKB: *zlSessionKB, ringKB: *zlRingKB, daemonProcess: true, rate: rate, producers: producers, noHandOver: *zlNoHand})
	r.check(tb)
	tr := zlTrial{rate: rate, r: r}
	tr.achieved = float64(r.written) / r.produce.Seconds()
	tr.lostFrac = float64(r.lost) / float64(r.written)
	deliv := float64(r.samples + r.lost - r.producerDropped)
	tr.daemonNs = float64(r.daemonCPU.Nanoseconds()) / deliv
	tr.recordNs = float64((r.cpu - r.daemonCPU).Nanoseconds()) / deliv
	tr.producerNs = float64(r.producerCPU.Nanoseconds()) / float64(r.written)
	tr.ok = r.lost == 0 && tr.achieved >= 0.97*rate
	tb.Logf("%d producers at %6.2f M/s: wrote %d at %6.2f M/s, recorded %d, lost %d (%.3f %%, %d in the producers' rings); CPU per record: daemon %.0f ns, record %.0f ns, producers %.0f ns; drainers slept %d times, woken %d; %d sets handed over, %d records read from them",
		producers, rate/1e6, r.written, tr.achieved/1e6, r.samples, r.lost, 100*tr.lostFrac, r.producerDropped,
		tr.daemonNs, tr.recordNs, tr.producerNs, r.rings.Sleeps, r.rings.Woken, r.handOvers, r.handed)
	return tr
}

// zlJudged runs trials at rate until most of -zl.trials agree.
func zlJudged(tb testing.TB, producers int, rate float64) zlTrial {
	oks, fails := 0, 0
	var last zlTrial
	for oks <= *zlTrials/2 && fails <= *zlTrials/2 {
		tr := zlRun(tb, producers, rate)
		if tr.ok {
			oks++
		} else {
			fails++
		}
		last = tr
	}
	last.ok = oks > *zlTrials/2
	return last
}

// zlSearch is the bisection: the highest rate found zero-loss (none: the
// zero trial, rate 0), and the lowest found lossy above it (nil if none).
func zlSearch(tb testing.TB, producers int) (best zlTrial, above *zlTrial) {
	lo, hi := *zlLo, *zlHi
	if tr := zlJudged(tb, producers, lo); !tr.ok {
		return zlTrial{}, &tr
	} else {
		best = tr
	}
	for range *zlSteps {
		mid := math.Sqrt(lo * hi)
		if tr := zlJudged(tb, producers, mid); tr.ok {
			lo, best = mid, tr
		} else {
			hi = mid
			above = &tr
		}
	}
	return best, above
}

// BenchmarkZeroLoss searches the zero-loss rate for each producer count
// of -zl.producers and reports it (events/s), the loss at the lowest
// rate found lossy above it (above-lost-%; 0 when none was), and at the
// zero-loss rate the CPU per record: the daemon's (daemon-ns/delivered),
// the recording's (record-ns/delivered), the producers' (producer-ns/write).
// Run it with -benchtime 1x: each iteration is a whole search.
func BenchmarkZeroLoss(b *testing.B) {
	if *zlRealtime > 0 {
		if err := realtime.Set(*zlRealtime); err != nil {
			b.Fatal(err)
		}
	}
	var counts []int
	for _, f := range strings.Split(*zlProducers, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			b.Fatalf("-zl.producers %q: %q is not a producer count", *zlProducers, f)
		}
		counts = append(counts, n)
	}
	for _, n := range counts {
		b.Run(fmt.Sprintf("producers=%d", n), func(b *testing.B) {
			var best zlTrial
			var above *zlTrial
			for b.Loop() {
				best, above = zlSearch(b, n)
			}
			b.ReportMetric(best.rate, "events/s")
			lostAbove := 0.0
			if above != nil {
				lostAbove = 100 * above.lostFrac
				b.Logf("zero-loss %.2f M/s; above it %.2f M/s lost %.3f %%", best.rate/1e6, above.rate/1e6, lostAbove)
			}
			b.ReportMetric(lostAbove, "above-lost-%")
			b.ReportMetric(best.daemonNs, "daemon-ns/delivered")
			b.ReportMetric(best.recordNs, "record-ns/delivered")
			b.ReportMetric(best.producerNs, "producer-ns/write")
		})
	}
}
