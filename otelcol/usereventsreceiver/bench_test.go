package usereventsreceiver

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/export/exporttest"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/perfdata"
)

// BenchmarkReceiver is the receiver's own work per event, source apart:
// mapping a sample into pdata, batching (512) and giving the batches to
// pipelines that take them and do nothing:
//
//   - plain: a plain user event of 3 fields (u32, s64, char[16]);
//   - eventheader: an EventHeader event of 8 fields, a struct of 1, an
//     array of 3, and activity ids;
//   - commonschema: OpenTelemetry's Common Schema log records and spans
//     (PartA, PartB, PartC with a JSON array and a struct);
//   - mix: the events of internal/export's end-to-end benchmarks
//     (BenchmarkE2EReceiver; exporttest's mix): what the Collector's
//     receiver takes there, its source apart.
func BenchmarkReceiver(b *testing.B) {
	def, err := eventdef.Parse("bench_ev u32 n; s64 v; char[16] s")
	if err != nil {
		b.Fatal(err)
	}
	ev, err := perfdata.NewEvent("user_events", "bench_ev", []byte(def.Format("bench_ev", 1234)))
	if err != nil {
		b.Fatal(err)
	}
	raw := make([]byte, 8+4+8+16)
	binary.NativeEndian.PutUint16(raw, 1234)
	binary.NativeEndian.PutUint32(raw[8:], 7)
	binary.NativeEndian.PutUint64(raw[12:], 42)
	copy(raw[20:], "hello, world")
	te := newTestEvents(b)
	eh := ehSamples(rand.New(rand.NewPCG(1, 2)))
	n := len(eh)
	for _, tc := range []struct {
		name    string
		samples []perfdata.Sample
	}{
		{"plain", []perfdata.Sample{{Event: ev, Wall: 1, PID: 100, TID: 101, Comm: "bench", Raw: raw}}},
		{"eventheader", samplesOf(te.eh, eh[n-32:n-12])},
		{"commonschema", samplesOf(te.eh, eh[n-12:])},
		{"mix", mixSamples(b)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
			r.logs, r.traces = consumertest.NewNop(), consumertest.NewNop()
			r.mapper = newMapper("h", "", otlp.Scope{Name: metadata.ScopeName}, r.cfg.BatchSize)
			if r.obs, err = newObs(r); err != nil {
				b.Fatal(err)
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				r.add(&tc.samples[i])
				if i++; i == len(tc.samples) {
					i = 0
				}
			}
		})
	}
}

func samplesOf(ev *perfdata.Event, raws [][]byte) []perfdata.Sample {
	var out []perfdata.Sample
	for _, raw := range raws {
		out = append(out, perfdata.Sample{Event: ev, Wall: 1, PID: 100, TID: 101, Comm: "bench", Raw: raw})
	}
	return out
}

// mixSamples are 300 samples of the mix of export's end-to-end
// benchmarks (exporttest).
func mixSamples(tb testing.TB) []perfdata.Sample {
	tb.Helper()
	mix := exporttest.NewMix()
	formats := mix.Formats()
	events := map[uint16]*perfdata.Event{}
	for id, name := range map[uint16]string{exporttest.XID: "x", exporttest.EHInfoID: exporttest.EHInfo, exporttest.EHErrID: exporttest.EHErr} {
		ev, err := perfdata.NewEvent("user_events", name, formats[id])
		if err != nil {
			tb.Fatal(err)
		}
		events[id] = ev
	}
	var samples []perfdata.Sample
	for i := range 300 {
		id, payload, err := mix.Event(i)
		if err != nil {
			tb.Fatal(err)
		}
		raw := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
		binary.NativeEndian.PutUint16(raw, id) // common_type, as the kernel writes it
		raw = append(raw, payload...)
		samples = append(samples, perfdata.Sample{Event: events[id], Wall: 1, PID: 4242, TID: 4242 + uint32(i%3),
			CPU: uint32(i % 2), Comm: "exportme", ProcessComm: "exportme", Raw: raw})
	}
	return samples
}
