package usereventsreceiver

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
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
//     (BenchmarkE2EReceiver), mixSamples: what the Collector's receiver
//     takes there, its source apart.
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
			r.mapper = newMapper("h", "", otlp.Scope{Name: metadata.ScopeName})
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

// mixSamples are 300 samples of the events internal/export's end-to-end
// benchmarks write (its testFile; a test helper of another package): in
// turn a plain user event of 6 fields (integers of each sign, a u64 past
// int64, a char array, a __rel_loc string), and an EventHeader event of
// 8 fields with a struct, an array and an activity id at two levels —
// two tracepoints of one layout.
func mixSamples(tb testing.TB) []perfdata.Sample {
	tb.Helper()
	event := func(name string, id int, command string) (*eventdef.Event, *perfdata.Event) {
		def, err := eventdef.Parse(name + " " + command)
		if err != nil {
			tb.Fatal(err)
		}
		ev, err := perfdata.NewEvent("user_events", name, []byte(def.Format(name, id)))
		if err != nil {
			tb.Fatal(err)
		}
		return def, ev
	}
	x, xev := event("x", 1001, "u32 seq; s64 neg; char[8] c; __rel_loc char[] msg; u8 d; u64 big")
	_, info := event("UetraceTest_L4K5", 1002, eventheader.CommandTypes)
	_, errev := event("UetraceTest_L2K5", 1003, eventheader.CommandTypes)
	var (
		samples []perfdata.Sample
		enc     eventdef.Encoder
		bld     eventheader.Builder
		payload []byte
		err     error
	)
	act := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for i := range 300 {
		ev := xev
		switch i % 3 {
		case 0:
			enc.Reset(x, nil)
			enc.Uint(uint64(i))
			enc.Int(-int64(i))
			enc.String("c")
			enc.String(fmt.Sprintf("message %d ünïcode", i))
			enc.Uint(uint64(i % 256))
			enc.Uint(math.MaxUint64 - uint64(i))
			payload, err = enc.Payload()
		default:
			lvl := eventheader.LevelInformation
			ev = info
			if i%3 == 2 {
				lvl, ev = eventheader.LevelError, errev
			}
			bld.Reset("Request", eventheader.Header{Level: lvl, Opcode: 1, ID: 7, Version: 2})
			bld.SetActivityID(&act, nil)
			bld.AddInt64("seq", int64(i), 0)
			bld.AddString("path", fmt.Sprint("/p/", i), eventheader.FormatDefault, 0)
			bld.AddBool("ok", i%2 == 0, 0)
			bld.AddFloat64("ratio", float64(i)/4, 0)
			bld.StructField("pt", 2, 0)
			bld.AddInt32("x", int32(i), 0)
			bld.AddInt32("y", -int32(i), 0)
			bld.ArrayField("arr", eventheader.EncodingValue16, eventheader.FormatDefault, 0, 3)
			bld.AppendValue16(uint16(i))
			bld.AppendValue16(2)
			bld.AppendValue16(3)
			bld.AddUint32("err", 2, eventheader.FormatErrno, 0)
			payload, err = bld.AppendEvent(nil)
		}
		if err != nil {
			tb.Fatal(err)
		}
		raw := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
		binary.NativeEndian.PutUint16(raw, uint16(ev.Format.ID)) // common_type, as the kernel writes it
		raw = append(raw, payload...)
		samples = append(samples, perfdata.Sample{Event: ev, Wall: 1, PID: 4242, TID: 4242 + uint32(i%3),
			CPU: uint32(i % 2), Comm: "exportme", ProcessComm: "exportme", Raw: raw})
	}
	return samples
}
