package usereventsreceiver

import (
	"encoding/binary"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/perfdata"
)

// BenchmarkReceiver is the receiver's own work per event, source apart:
// mapping a plain event's sample, batching, unmarshalling the batch with
// pdata and giving it to a pipeline (one that takes it and does nothing).
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
	r := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
	r.logs = consumertest.NewNop()
	if r.mapper, err = export.NewMapper(export.MapperOptions{HostName: "h"}); err != nil {
		b.Fatal(err)
	}
	if r.obs, err = newObs(r); err != nil {
		b.Fatal(err)
	}
	s := perfdata.Sample{Event: ev, Wall: 1, PID: 100, TID: 101, Comm: "bench", Raw: raw}
	b.ReportAllocs()
	for b.Loop() {
		r.add(&s)
	}
}
