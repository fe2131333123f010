package usereventsreceiver

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
)

// FuzzMetricsRequest: whatever bytes a program writes as an otlp_metrics
// request, the receiver neither panics nor loses it: it becomes metrics,
// or a log record with its bytes.
func FuzzMetricsRequest(f *testing.F) {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("orders")
	m.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(5)
	var mar pmetric.ProtoMarshaler
	good, err := mar.MarshalMetrics(md)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, []byte{})
	f.Add(good, []byte{0x0a, 0xff})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, good)
	// A request that ends short, whose length would take the next one in.
	f.Add([]byte{0x0a, byte(len(good))}, good)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		r := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
		logs, metrics := new(consumertest.LogsSink), new(consumertest.MetricsSink)
		r.logs, r.metrics = logs, metrics
		var err error
		if r.obs, err = newObs(r); err != nil {
			t.Fatal(err)
		}
		r.consumeMetrics(context.Background(), [][]byte{a, b})
		var u pmetric.ProtoUnmarshaler
		wantLogs, wantPoints := 0, 0 // a log record per request that does not parse
		for _, req := range [][]byte{a, b} {
			if md, err := u.UnmarshalMetrics(req); err != nil {
				wantLogs++
			} else {
				wantPoints += md.DataPointCount()
			}
		}
		if logs.LogRecordCount() != wantLogs || metrics.DataPointCount() != wantPoints {
			t.Fatalf("%d log records, %d points; want %d, %d", logs.LogRecordCount(), metrics.DataPointCount(), wantLogs, wantPoints)
		}
	})
}
