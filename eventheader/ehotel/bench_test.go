package ehotel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader/ehotel"
)

// benchRecord is the benchmarks' record: INFO, a string body and four
// scalar attributes.
func benchRecord() log.Record {
	var r log.Record
	r.SetSeverity(log.SeverityInfo)
	r.SetBody(attribute.StringValue("request served"))
	r.AddAttributes(attribute.String("path", "/index.html"), attribute.Int("status", 200),
		attribute.Float64("dur", 1.5), attribute.Bool("cached", true))
	return r
}

// benchEnable turns the INFO tracepoint on in the subsystem's trace buffer
// (as `echo 1 > enable` does), which overwrites and needs no reader.
func benchEnable(b *testing.B, e *env, x *ehotel.Exporter) {
	b.Helper()
	tp := x.Tracepoint(log.SeverityInfo)
	if err := e.sys.SetFtrace(e.sys.Lookup("user_events", tp.Name()), true); err != nil {
		b.Fatal(err)
	}
	if !tp.Enabled() {
		b.Fatal("not enabled")
	}
}

// BenchmarkProcessor is the processor alone, on an SDK record: Enabled,
// and OnEmit while nobody listens (a load of the enable word) and while
// the trace buffer records (the event built and written).
func BenchmarkProcessor(b *testing.B) {
	e := newEnv(b)
	p := newProcessor(b, e, "BenchProc")
	r := sdkRecord(b, context.Background(), benchRecord(), sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "bench"))))
	ctx := context.Background()
	params := sdklog.EnabledParameters{Severity: log.SeverityInfo}
	b.Run("Enabled/disabled", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if p.Enabled(ctx, params) {
				n++
			}
		}
		sink = n
	})
	b.Run("OnEmit/disabled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.OnEmit(ctx, &r)
		}
	})
	benchEnable(b, e, p.Exporter())
	b.Run("OnEmit/enabled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := p.OnEmit(ctx, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var sink int

// noop is a processor doing nothing: the SDK's own cost.
type noop struct{}

func (noop) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (noop) OnEmit(context.Context, *sdklog.Record) error           { return nil }
func (noop) Shutdown(context.Context) error                         { return nil }
func (noop) ForceFlush(context.Context) error                       { return nil }

// BenchmarkSDK is what a program pays per record through the SDK's
// Logger.Emit: the SDK with a processor that does nothing; this package's
// Processor, disabled and enabled, and disabled behind a Logger.Enabled
// check; and this package's Exporter behind the SDK's BatchProcessor and
// SimpleProcessor, where the records are copied (and queued) before the
// exporter can see that nobody listens.
func BenchmarkSDK(b *testing.B) {
	ctx := context.Background()
	r := benchRecord()
	emit := func(b *testing.B, proc sdklog.Processor, check bool) {
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(proc))
		b.Cleanup(func() { lp.Shutdown(ctx) })
		logger := lp.Logger("bench")
		params := log.EnabledParameters{Severity: log.SeverityInfo}
		b.ReportAllocs()
		for b.Loop() {
			if !check || logger.Enabled(ctx, params) {
				logger.Emit(ctx, r)
			}
		}
	}
	b.Run("noop-processor", func(b *testing.B) { emit(b, noop{}, false) })
	for _, on := range []bool{false, true} {
		state := map[bool]string{false: "disabled", true: "enabled"}[on]
		b.Run("ehotel-processor/"+state, func(b *testing.B) {
			e := newEnv(b)
			p := newProcessor(b, e, "BenchSDK")
			if on {
				benchEnable(b, e, p.Exporter())
			}
			emit(b, p, false)
		})
		if !on {
			b.Run("ehotel-processor/disabled-checked", func(b *testing.B) {
				e := newEnv(b)
				emit(b, newProcessor(b, e, "BenchSDK"), true)
			})
		}
		b.Run("batch+ehotel-exporter/"+state, func(b *testing.B) {
			e := newEnv(b)
			x := newExporter(b, e, "BenchBatch")
			if on {
				benchEnable(b, e, x)
			}
			emit(b, sdklog.NewBatchProcessor(x), false)
		})
		b.Run("simple+ehotel-exporter/"+state, func(b *testing.B) {
			e := newEnv(b)
			x := newExporter(b, e, "BenchSimple")
			if on {
				benchEnable(b, e, x)
			}
			emit(b, sdklog.NewSimpleProcessor(x), false)
		})
	}
}

// BenchmarkSpanProcessor is the span processor's OnEnd on an ended SDK span
// of four attributes, two of them well-known: while nobody listens (a load
// of the enable word) and while the trace buffer takes the events.
func BenchmarkSpanProcessor(b *testing.B) {
	e := newEnv(b)
	p := newSpanProcessor(b, e, "BenchSpan")
	var ended sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder{&ended}), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
	defer tp.Shutdown(context.Background())
	_, s := tp.Tracer("bench").Start(context.Background(), "GET /index.html", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.Int("http.response.status_code", 200),
			attribute.String("path", "/index.html"), attribute.Bool("cached", true)))
	s.End()
	b.Run("disabled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.OnEnd(ended)
		}
	})
	b.Run("enabled", func(b *testing.B) {
		x := p.Exporter()
		if err := e.sys.SetFtrace(e.sys.Lookup("user_events", x.Tracepoint().Name()), true); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p.OnEnd(ended)
		}
	})
}

// BenchmarkMetricExporter is one Export of goldenMetrics (five data points
// of the four aggregations): while nobody listens, and while the trace
// buffer takes the records. Its one slice and one map attribute value
// allocate in attribute.Value's copying accessors (AsStringSlice, AsMap);
// scalar values allocate nothing.
func BenchmarkMetricExporter(b *testing.B) {
	e := newEnv(b)
	x := newMetricExporter(b, e)
	rm := goldenMetrics()
	b.Run("disabled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x.Export(context.Background(), rm)
		}
	})
	b.Run("enabled", func(b *testing.B) {
		if err := e.sys.SetFtrace(e.sys.Lookup("user_events", "otlp_metrics"), true); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := x.Export(context.Background(), rm); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(5*b.N), "ns/point")
	})
}
