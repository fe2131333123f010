package ehotel_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader/ehotel"
)

// fixedIDs gives the spans of a test known ids: testTraceID, and span ids
// 0x11…, 0x22…, … in the order spans start.
type fixedIDs struct{ n byte }

func (g *fixedIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return testTraceID, g.NewSpanID(context.Background(), testTraceID)
}

func (g *fixedIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.n += 0x11
	var id trace.SpanID
	for i := range id {
		id[i] = g.n
	}
	return id
}

// newSpanProcessor is NewSpanProcessor on e's File, shut down when the test
// ends.
func newSpanProcessor(t testing.TB, e *env, name string) *ehotel.SpanProcessor {
	t.Helper()
	p, err := ehotel.NewSpanProcessor(name, &ehotel.Options{File: e.f})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exporter().Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// emitSpans ends two spans through an SDK TracerProvider over p: a client
// span with every field the layout has (parent, a link, well-known and
// other attributes, an error status) and its parent, a server span with
// the fewest.
func emitSpans(t *testing.T, p sdktrace.SpanProcessor) {
	t.Helper()
	res := resource.NewSchemaless(
		attribute.String("service.name", "checkout"),
		attribute.String("service.instance.id", "pod-7"),
		attribute.String("host.name", "not-exported"),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(p),
		sdktrace.WithIDGenerator(&fixedIDs{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tr := tp.Tracer("golden")
	ctx, parent := tr.Start(context.Background(), "checkout", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(testTime.Add(-time.Second)))
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xff, 1}, SpanID: trace.SpanID{0xee, 2}})
	_, child := tr.Start(ctx, "GET /cart", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(testTime.Add(-250*time.Millisecond)), trace.WithLinks(trace.Link{SpanContext: link}),
		trace.WithAttributes(
			attribute.String("http.request.method", "GET"),
			attribute.String("cart", "c-1"),
			attribute.String("url.full", "https://shop/cart"),
			attribute.Int("items", 3),
			attribute.Bool("cached", false),
		))
	child.SetStatus(codes.Error, "upstream timed out")
	child.End(trace.WithTimestamp(testTime))
	parent.End(trace.WithTimestamp(time.Unix(1_704_112_497, 0)))
}

// TestSpanGoldenJSON ends spans through the SDK and this package's span
// processor and decodes the events into Microsoft's decoder's JSON: the
// Rust trace exporter's layout (export_span in
// opentelemetry-user-events-trace/src/trace/exporter.rs) field by field —
// __csver__, PartA, PartB (with parentId, links, the well-known attributes
// under their Common Schema names, statusMessage), then PartC.
func TestSpanGoldenJSON(t *testing.T) {
	e := newEnv(t)
	p := newSpanProcessor(t, e, "SpanProv")
	ss := e.attach(t, "user_events:SpanProv_*", p.Exporter().Tracepoint())
	emitSpans(t, p)
	want := []string{
		`{ "n": "SpanProv:Span", "__csver__": 1024, ` +
			`"PartA": { "time": "2024-01-01T12:34:56.789Z", "ext_dt_traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "ext_dt_spanId": "2222222222222222", "ext_cloud_role": "checkout", "ext_cloud_roleInstance": "pod-7" }, ` +
			`"PartB": { "_typeName": "Span", "name": "GET /cart", "startTime": "2024-01-01T12:34:56.539Z", "success": false, "kind": 2, "parentId": "1111111111111111", ` +
			`"links": "[{\"toTraceId\":\"ff010000000000000000000000000000\",\"toSpanId\":\"ee02000000000000\"}]", "httpMethod": "GET", "httpUrl": "https://shop/cart", "statusMessage": "upstream timed out" }, ` +
			`"PartC": { "cart": "c-1", "items": 3, "cached": false }, ` +
			`"meta": { "level": 4, "keyword": "0x1" } }`,
		`{ "n": "SpanProv:Span", "__csver__": 1024, ` +
			`"PartA": { "time": "2024-01-01T12:34:57Z", "ext_dt_traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "ext_dt_spanId": "1111111111111111", "ext_cloud_role": "checkout", "ext_cloud_roleInstance": "pod-7" }, ` +
			`"PartB": { "_typeName": "Span", "name": "checkout", "startTime": "2024-01-01T12:34:55.789Z", "success": true, "kind": 1 }, ` +
			`"meta": { "level": 4, "keyword": "0x1" } }`,
	}
	for i, g := range readBack(t, ss, len(want)) {
		if g.tracepoint != "SpanProv_L4K1" || g.json != want[i] {
			t.Errorf("span %d:\n got %s %s\nwant SpanProv_L4K1 %s", i, g.tracepoint, g.json, want[i])
		}
	}
}

// TestSpanBytesAsRust compares the events byte for byte with what the Rust
// trace exporter's calls make eventheader_dynamic write, built without
// package eventheader (rustEvent): kind and __csver__ are i32 literals
// there, value32; success a bool, value8.
func TestSpanBytesAsRust(t *testing.T) {
	e := newEnv(t)
	p := newSpanProcessor(t, e, "SpanBytes")
	ss := e.attach(t, "user_events:SpanBytes_*", p.Exporter().Tracepoint())
	emitSpans(t, p)
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

	var child rustEvent
	child.reset("Span")
	child.addValue("__csver__", rsValue32, rsUnsignedInt, u32(1024))
	child.addStruct("PartA", 5)
	child.addStr("time", "2024-01-01T12:34:56.789Z")
	child.addStr("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736")
	child.addStr("ext_dt_spanId", "2222222222222222")
	child.addStr("ext_cloud_role", "checkout")
	child.addStr("ext_cloud_roleInstance", "pod-7")
	child.addStruct("PartB", 10)
	child.addStr("_typeName", "Span")
	child.addStr("name", "GET /cart")
	child.addStr("startTime", "2024-01-01T12:34:56.539Z")
	child.addValue("success", rsValue8, rsBoolean, []byte{0})
	child.addValue("kind", rsValue32, rsUnsignedInt, u32(2))
	child.addStr("parentId", "1111111111111111")
	child.addStr("links", `[{"toTraceId":"ff010000000000000000000000000000","toSpanId":"ee02000000000000"}]`)
	child.addStr("httpMethod", "GET")
	child.addStr("httpUrl", "https://shop/cart")
	child.addStr("statusMessage", "upstream timed out")
	child.addStruct("PartC", 3)
	child.addStr("cart", "c-1")
	child.addI64("items", 3)
	child.addValue("cached", rsValue8, rsBoolean, []byte{0})

	var parent rustEvent
	parent.reset("Span")
	parent.addValue("__csver__", rsValue32, rsUnsignedInt, u32(1024))
	parent.addStruct("PartA", 5)
	parent.addStr("time", "2024-01-01T12:34:57Z")
	parent.addStr("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736")
	parent.addStr("ext_dt_spanId", "1111111111111111")
	parent.addStr("ext_cloud_role", "checkout")
	parent.addStr("ext_cloud_roleInstance", "pod-7")
	parent.addStruct("PartB", 5)
	parent.addStr("_typeName", "Span")
	parent.addStr("name", "checkout")
	parent.addStr("startTime", "2024-01-01T12:34:55.789Z")
	parent.addValue("success", rsValue8, rsBoolean, []byte{1})
	parent.addValue("kind", rsValue32, rsUnsignedInt, u32(1))

	want := [][]byte{child.bytes(4), parent.bytes(4)}
	for i, g := range readBack(t, ss, 2) {
		if !bytes.HasPrefix(g.raw, want[i]) || len(g.raw)-len(want[i]) >= 8 || strings.Trim(string(g.raw[len(want[i]):]), "\x00") != "" {
			t.Errorf("span %d:\n got % x\nwant % x (then perf's zero padding)", i, g.raw, want[i])
		}
	}
}

// TestSpanStatusMessage: an error's description is PartB's statusMessage
// unless the span reports httpStatusCode (Common Schema: "If you report
// httpStatusCode, statusMessage should not be reported"); an Ok or Unset
// status is success, with no message.
func TestSpanStatusMessage(t *testing.T) {
	e := newEnv(t)
	p := newSpanProcessor(t, e, "StatusProv")
	ss := e.attach(t, "user_events:StatusProv_*", p.Exporter().Tracepoint())
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("status")
	for _, c := range []struct {
		code  codes.Code
		desc  string
		attrs []attribute.KeyValue
	}{
		{codes.Error, "refused", []attribute.KeyValue{attribute.Int("http.response.status_code", 503)}},
		{codes.Error, "refused", nil},
		{codes.Ok, "", nil},
	} {
		_, s := tr.Start(context.Background(), "s", trace.WithAttributes(c.attrs...))
		s.SetStatus(c.code, c.desc)
		s.End()
	}
	want := []string{
		`"success": false, "kind": 0, "httpStatusCode": 503 }`,
		`"success": false, "kind": 0, "statusMessage": "refused" }`,
		`"success": true, "kind": 0 }`,
	}
	for i, g := range readBack(t, ss, len(want)) {
		if !strings.Contains(g.json, want[i]) {
			t.Errorf("span %d: no %s in\n%s", i, want[i], g.json)
		}
	}
}

// TestSpanNotWritten: nothing is written for an unsampled span, nor while
// nobody listens, nor after Shutdown; a disabled OnEnd allocates nothing.
func TestSpanNotWritten(t *testing.T) {
	e := newEnv(t)
	p := newSpanProcessor(t, e, "QuietProv")
	var ended sdktrace.ReadOnlySpan
	rec := recorder{&ended}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	_, s := tp.Tracer("quiet").Start(context.Background(), "nobody listens")
	s.End()
	if n := testing.AllocsPerRun(100, func() { p.OnEnd(ended) }); n != 0 {
		t.Errorf("OnEnd with the tracepoint disabled: %v allocations", n)
	}

	ss := e.attach(t, "user_events:QuietProv_*", p.Exporter().Tracepoint())
	unsampled := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithSampler(sdktrace.NeverSample()))
	defer unsampled.Shutdown(context.Background())
	_, s = unsampled.Tracer("quiet").Start(context.Background(), "unsampled")
	s.End()
	_, s = tp.Tracer("quiet").Start(context.Background(), "sampled")
	s.End()
	got := readBack(t, ss, 1)
	if !strings.Contains(got[0].json, `"name": "sampled"`) {
		t.Errorf("the first span written is not the sampled one: %s", got[0].json)
	}
	x := p.Exporter()
	x.Shutdown(context.Background())
	if err := x.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{ended}); err == nil {
		t.Error("ExportSpans after Shutdown: no error")
	}
}

// recorder keeps the last span that ended.
type recorder struct{ last *sdktrace.ReadOnlySpan }

func (r recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r recorder) OnEnd(s sdktrace.ReadOnlySpan)                   { *r.last = s }
func (r recorder) Shutdown(context.Context) error                  { return nil }
func (r recorder) ForceFlush(context.Context) error                { return nil }
