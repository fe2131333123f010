package report_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/perfdata"
)

const (
	benchSamples = 100_000
	benchRound   = 1000 // samples per round, half from each CPU
)

// writeBenchFile writes benchSamples samples of x (u32, s64, char[8], a
// 16-byte __rel_loc string, u8) from four threads on two CPUs, as uetrace
// record writes them: in rounds, each round one CPU's ring and then the
// other's, so each round is two interleaved runs in time order.
func writeBenchFile(b *testing.B) string {
	b.Helper()
	x := mustParse(b, xCommand)
	f := newFile(b, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0, xID1))
	for tid := int32(1001); tid <= 1004; tid++ {
		f.comm(xID0, 1000, tid, fmt.Sprintf("worker-%d", tid), 0, 0)
	}
	var enc eventdef.Encoder
	var buf []byte
	ts := uint64(1_000_000_000)
	for base := 0; base < benchSamples; base += benchRound {
		for cpu := range uint32(2) {
			for i := base + int(cpu); i < base+benchRound && i < benchSamples; i += 2 {
				tid := int32(1001 + i%4)
				enc.Reset(x, buf[:0])
				enc.Uint(uint64(i))
				enc.Int(-int64(i) * 1_000_003)
				enc.String("ctx")
				enc.String(fmt.Sprintf("request %08d", i))
				enc.Uint(uint64(i % 256))
				p, err := enc.Payload()
				if err != nil {
					b.Fatal(err)
				}
				buf = p
				f.sample(xID0+uint64(cpu), 1000, tid, ts+uint64(i)*1000, cpu, rawRecord(xID, tid, p))
			}
		}
		f.round()
	}
	return f.close()
}

func benchReport(b *testing.B, format report.Format) {
	path := writeBenchFile(b)
	var out countWriter
	b.ReportAllocs()
	for b.Loop() {
		r, err := perfdata.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		sum, err := report.Write(&out, r, format)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Samples != benchSamples {
			b.Fatalf("%d samples, want %d", sum.Samples, benchSamples)
		}
		r.Close()
	}
	events := float64(benchSamples) * float64(b.N)
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	b.ReportMetric(float64(out)/events, "B/event")
}

// countWriter is io.Discard that counts.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

func BenchmarkReportText(b *testing.B)     { benchReport(b, report.Text) }
func BenchmarkReportJSON(b *testing.B)     { benchReport(b, report.JSON) }
func BenchmarkReportPerfetto(b *testing.B) { benchReport(b, report.Perfetto) }
