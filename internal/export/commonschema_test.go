package export_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// keep is a log processor keeping every record the SDK emits.
type keep struct{ records []sdklog.Record }

func (k *keep) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (k *keep) OnEmit(_ context.Context, r *sdklog.Record) error {
	k.records = append(k.records, r.Clone())
	return nil
}
func (k *keep) Shutdown(context.Context) error   { return nil }
func (k *keep) ForceFlush(context.Context) error { return nil }

// otlpValue is what the SDK's OTLP exporter sends for v.
func otlpValue(v attribute.Value) otlp.Value {
	switch v.Type() {
	case attribute.STRING:
		return otlp.StringValue(v.AsString())
	case attribute.INT64:
		return otlp.IntValue(v.AsInt64())
	case attribute.FLOAT64:
		return otlp.DoubleValue(v.AsFloat64())
	case attribute.BOOL:
		return otlp.BoolValue(v.AsBool())
	case attribute.SLICE:
		var a []otlp.Value
		for _, x := range v.AsSlice() {
			a = append(a, otlpValue(x))
		}
		return otlp.ArrayValue(a)
	case attribute.MAP:
		var m []otlp.KeyValue
		for _, kv := range v.AsMap() {
			m = append(m, otlp.KeyValue{Key: string(kv.Key), Value: otlpValue(kv.Value)})
		}
		return otlp.MapValue(m)
	}
	return otlp.Value{}
}

// TestCommonSchemaLogs: log records an OpenTelemetry SDK writes through
// user_events in Common Schema (ehotel, as the Rust exporter lays them
// out) arrive at the Collector as the records the SDK had — time,
// severity, body, event name, trace and span ids, attributes in their
// types, service.name and service.instance.id in the resource — beside
// uetrace's own attributes; only what the layout does not carry differs
// (the trace flags; event_id moved last).
func TestCommonSchemaLogs(t *testing.T) {
	sys := subsys.New(subsys.Options{NumCPU: 1})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proc, err := ehotel.NewProcessor("CSProv", &ehotel.Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:CSProv_*", false); err != nil {
		t.Fatal(err)
	}
	var sdk keep
	lp := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"), attribute.String("service.instance.id", "pod-7"))),
		sdklog.WithProcessor(proc), sdklog.WithProcessor(&sdk))
	defer lp.Shutdown(context.Background())
	logger := lp.Logger("cs")

	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0, 0xf0, 2}, TraceFlags: trace.FlagsSampled}))
	var full log.Record
	full.SetTimestamp(time.Unix(1_704_112_496, 789_123_456))
	full.SetSeverity(log.SeverityWarn2)
	full.SetSeverityText("WARN2")
	full.SetBody(attribute.StringValue("disk almost full"))
	full.SetEventName("disk.alert")
	full.AddAttributes(
		attribute.String("path", "/var"),
		attribute.Int64("event_id", 42),
		attribute.Bool("retry", true),
		attribute.Float64("ratio", 0.97),
		attribute.Slice("tags", attribute.StringValue("a"), attribute.Int64Value(2)),
		attribute.Map("m", attribute.Float64("x", 1.5), attribute.Bool("y", false)),
	)
	logger.Emit(ctx, full)
	var bare log.Record
	bare.SetTimestamp(time.Unix(1_704_112_497, 0))
	bare.SetSeverity(log.SeverityInfo)
	bare.SetBody(attribute.MapValue(attribute.Int64("code", 7)))
	logger.Emit(context.Background(), bare)

	srv := newServer(t)
	exp := newExporter(t, srv, otlp.HTTP, export.Options{})
	recs, err := ss.Read(context.Background(), make([]byte, 1<<20), nil)
	if err != nil || len(recs) != 2 {
		t.Fatalf("read %d records: %v", len(recs), err)
	}
	for _, r := range recs {
		ev, err := perfdata.NewEvent("user_events", r.Event.Name(), []byte(r.Event.Def().Format(r.Event.Name(), r.Event.ID())))
		if err != nil {
			t.Fatal(err)
		}
		// Raw need not outlive Add: a live source's ring is written over
		// at once.
		raw := append([]byte(nil), r.Raw...)
		if err := exp.Add(context.Background(), &perfdata.Sample{Event: ev, Wall: 1, PID: 4242, TID: 4243, CPU: 0, Raw: raw}); err != nil {
			t.Fatal(err)
		}
		for j := range raw {
			raw[j] = 'X'
		}
	}
	closeAndCheck(t, exp, time.Minute)
	if len(srv.reqs) != 1 || len(srv.reqs[0]) != 1 {
		t.Fatalf("%d requests", len(srv.reqs))
	}
	rl := srv.reqs[0][0]
	wantRes := []otlp.KeyValue{
		{Key: "host.name", Value: rl.Resource[0].Value}, // the machine's
		{Key: "process.pid", Value: otlp.IntValue(4242)},
		{Key: "service.name", Value: otlp.StringValue("checkout")},
		{Key: "service.instance.id", Value: otlp.StringValue("pod-7")},
	}
	if diff := cmp.Diff(wantRes, rl.Resource); diff != "" {
		t.Errorf("resource (-want +got):\n%s", diff)
	}
	for i, sr := range sdk.records {
		got := rl.Records[i]
		tp := []string{"CSProv_L3K1", "CSProv_L4K1"}[i]
		want := otlp.Record{
			Time:           uint64(sr.Timestamp().UnixNano()),
			ObservedTime:   got.ObservedTime, // when export took it
			SeverityNumber: int32(sr.Severity()),
			SeverityText:   sr.SeverityText(),
			EventName:      sr.EventName(),
			Body:           otlpValue(sr.Body()),
			Attributes: []otlp.KeyValue{
				{Key: export.AttrTracepoint, Value: otlp.StringValue("user_events:" + tp)},
				{Key: export.AttrThreadID, Value: otlp.IntValue(4243)},
				{Key: export.AttrCPU, Value: otlp.IntValue(0)},
				{Key: export.AttrEHProvider, Value: otlp.StringValue("CSProv")},
			},
		}
		if id := sr.TraceID(); id.IsValid() {
			want.TraceID = id[:]
		}
		if id := sr.SpanID(); id.IsValid() {
			want.SpanID = id[:]
		}
		var eventID *otlp.KeyValue
		sr.WalkAttributes(func(kv attribute.KeyValue) bool {
			a := otlp.KeyValue{Key: string(kv.Key), Value: otlpValue(kv.Value)}
			if kv.Key == "event_id" && kv.Value.Type() == attribute.INT64 {
				eventID = &a // the layout moves it to PartB: it comes back last
			} else {
				want.Attributes = append(want.Attributes, a)
			}
			return true
		})
		if eventID != nil {
			want.Attributes = append(want.Attributes, *eventID)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b otlp.Value) bool {
			// Doubles by value, the rest as they are.
			if a.Kind == otlp.Double && b.Kind == otlp.Double {
				return math.Float64frombits(a.Num) == math.Float64frombits(b.Num)
			}
			return cmp.Equal(a.Kind, b.Kind) && a.Str == b.Str && a.Num == b.Num && cmp.Equal(a.Bytes, b.Bytes) &&
				cmp.Equal(a.Array, b.Array) && cmp.Equal(a.Map, b.Map)
		})); diff != "" {
			t.Errorf("record %d (-the SDK's +exported):\n%s", i, diff)
		}
	}
}
