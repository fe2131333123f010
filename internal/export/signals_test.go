package export_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// bodies is an OTLP/HTTP server keeping each request's body by path.
type bodies struct {
	mu     sync.Mutex
	byPath map[string][][]byte
}

func (b *bodies) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.byPath[r.URL.Path] = append(b.byPath[r.URL.Path], body)
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// TestExportSignals: spans and metrics that OpenTelemetry's SDKs write
// through user_events (ehotel, in the Rust exporters' layouts) go to the
// Collector's trace and metrics services as the SDK had them — a span's
// ids, parent, name, kind, times, status, links and attributes; a
// metrics request byte for byte as the exporter wrote it — and a log
// record beside them to the logs service.
func TestExportSignals(t *testing.T) {
	sys := subsys.New(subsys.Options{NumCPU: 1})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sp, err := ehotel.NewSpanProcessor("SigProv", &ehotel.Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	me := ehotel.NewMetricExporter(&ehotel.Options{File: f})
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	for _, pat := range []string{"user_events:SigProv_*", "user_events:otlp_metrics"} {
		if _, err := ss.AttachMatching(pat, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Register("plain_ev u32 n", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.AttachMatching("user_events:plain_ev", false); err != nil {
		t.Fatal(err)
	}

	// A span with a parent, a link, an error and attributes, one well-known.
	var ended []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp), sdktrace.WithSpanProcessor(recorder{&ended}),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("t").Start(context.Background(), "parent", trace.WithTimestamp(time.Unix(100, 0)))
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}})
	_, child := tp.Tracer("t").Start(ctx, "GET /x", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(time.Unix(100, 5_000)),
		trace.WithLinks(trace.Link{SpanContext: link}),
		trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.Int("items", 3)))
	child.SetStatus(codes.Error, "boom")
	child.End(trace.WithTimestamp(time.Unix(100, 9_000)))
	parent.End(trace.WithTimestamp(time.Unix(101, 0)))

	// A counter, pushed once.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(time.Hour))))
	c, _ := mp.Meter("m").Int64Counter("orders")
	c.Add(context.Background(), 5)
	if err := mp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(context.Background())

	srv := &bodies{byPath: map[string][][]byte{}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	exp, err := export.New(export.Options{Protocol: otlp.HTTP, Endpoint: hs.URL, HostName: "h"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ss.Read(context.Background(), make([]byte, 1<<20), nil)
	if err != nil || len(recs) != 3 {
		t.Fatalf("read %d records: %v", len(recs), err)
	}
	var metricsBuf []byte
	for _, r := range recs {
		ev, err := perfdata.NewEvent("user_events", r.Event.Name(), []byte(r.Event.Def().Format(r.Event.Name(), r.Event.ID())))
		if err != nil {
			t.Fatal(err)
		}
		if r.Event.Name() == export.MetricsEvent {
			metricsBuf = r.Raw[8+16:] // the buffer after protocol, version and its __rel_loc
		}
		if err := exp.Add(context.Background(), &perfdata.Sample{Event: ev, Wall: 1, PID: 7, TID: 8, Raw: r.Raw}); err != nil {
			t.Fatal(err)
		}
	}
	// A plain event: a log record.
	ev, _ := perfdata.NewEvent("user_events", "plain_ev", []byte(sys.Lookup("user_events", "plain_ev").Def().Format("plain_ev", 1)))
	exp.Add(context.Background(), &perfdata.Sample{Event: ev, Wall: 1, PID: 7, TID: 8, Raw: append(make([]byte, 8), 1, 0, 0, 0)})
	closeAndCheck(t, exp, time.Minute)

	if got := srv.byPath["/v1/metrics"]; len(got) != 1 || !bytes.Equal(got[0], metricsBuf) {
		t.Errorf("metrics: %d requests; the first is not the exporter's request as written", len(got))
	}
	if got := srv.byPath["/v1/logs"]; len(got) != 1 {
		t.Errorf("logs: %d requests", len(got))
	}
	traces := srv.byPath["/v1/traces"]
	if len(traces) != 1 {
		t.Fatalf("traces: %d requests", len(traces))
	}
	rss, err := otlp.ParseTraceRequest(traces[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(rss) != 1 || len(rss[0].Spans) != 2 {
		t.Fatalf("traces: %+v", rss)
	}
	if diff := cmp.Diff([]otlp.KeyValue{{Key: "host.name", Value: otlp.StringValue("h")}, {Key: "process.pid", Value: otlp.IntValue(7)},
		{Key: "service.name", Value: otlp.StringValue("checkout")}}, rss[0].Resource); diff != "" {
		t.Errorf("the spans' resource (-want +got):\n%s", diff)
	}
	for i, s := range ended {
		got := rss[0].Spans[i]
		sc, p := s.SpanContext(), s.Parent()
		tid, sid, pid := sc.TraceID(), sc.SpanID(), p.SpanID()
		want := otlp.Span{TraceID: tid[:], SpanID: sid[:], Name: s.Name(), Kind: int32(s.SpanKind()),
			Start: uint64(s.StartTime().UnixNano()), End: uint64(s.EndTime().UnixNano())}
		if p.IsValid() {
			want.ParentSpanID = pid[:]
		}
		if s.Status().Code == codes.Error {
			want.StatusCode, want.StatusMessage = otlp.StatusError, s.Status().Description
		}
		for _, l := range s.Links() {
			lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			want.Links = append(want.Links, otlp.Link{TraceID: lt[:], SpanID: ls[:]})
		}
		want.Attributes = []otlp.KeyValue{
			{Key: export.AttrTracepoint, Value: otlp.StringValue("user_events:SigProv_L4K1")},
			{Key: export.AttrThreadID, Value: otlp.IntValue(8)},
			{Key: export.AttrCPU, Value: otlp.IntValue(0)},
			{Key: export.AttrEHProvider, Value: otlp.StringValue("SigProv")},
		}
		for _, kv := range s.Attributes() {
			want.Attributes = append(want.Attributes, otlp.KeyValue{Key: string(kv.Key), Value: otlpValue(kv.Value)})
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("span %d (-the SDK's +exported):\n%s", i, diff)
		}
	}
}

// recorder keeps every span that ends, in order.
type recorder struct{ ended *[]sdktrace.ReadOnlySpan }

func (r recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r recorder) OnEnd(s sdktrace.ReadOnlySpan)                   { *r.ended = append(*r.ended, s) }
func (r recorder) Shutdown(context.Context) error                  { return nil }
func (r recorder) ForceFlush(context.Context) error                { return nil }
