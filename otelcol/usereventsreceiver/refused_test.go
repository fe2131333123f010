package usereventsreceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/perfdata"
)

// TestRefusedCounted: items a pipeline refuses, and items of a signal no
// pipeline of the receiver takes, are counted in the receiver's refused
// metrics; items taken are counted accepted.
func TestRefusedCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer tel.Shutdown(context.Background())
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	r := newReceiver(set, createDefaultConfig(), func() {})
	r.logs = consumertest.NewErr(errors.New("the pipeline is full"))
	var err error
	r.mapper = newMapper("h", "", otlp.Scope{Name: metadata.ScopeName}, r.cfg.BatchSize)
	if r.obs, err = newObs(r); err != nil {
		t.Fatal(err)
	}
	def, err := eventdef.Parse("refused_ev u32 n")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := perfdata.NewEvent("user_events", "refused_ev", []byte(def.Format("refused_ev", 7)))
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 12)
	binary.NativeEndian.PutUint16(raw, 7)
	for range 3 {
		r.add(&perfdata.Sample{Event: ev, Wall: 1, PID: 1, TID: 1, Raw: raw})
	}
	r.flush(context.Background())

	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("orders")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	m.Gauge().DataPoints().AppendEmpty().SetIntValue(2)
	var mar pmetric.ProtoMarshaler
	req, err := mar.MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	r.consumeMetrics(context.Background(), [][]byte{req}) // no metrics pipeline

	for name, want := range map[string]int64{
		"otelcol_receiver_refused_log_records":   3,
		"otelcol_receiver_refused_metric_points": 2,
	} {
		got, err := tel.GetMetric(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		sum, ok := got.Data.(metricdata.Sum[int64])
		if !ok || len(sum.DataPoints) != 1 || sum.DataPoints[0].Value != want {
			t.Errorf("%s = %+v, want %d", name, got.Data, want)
		}
	}
}
