package usereventsreceiver

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/userevents"
)

func TestConfigValidate(t *testing.T) {
	if err := createDefaultConfig().Validate(); err != nil {
		t.Fatalf("the default config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"source", func(c *Config) { c.Source = "inprocess" }},
		{"source unknown", func(c *Config) { c.Source = "perf" }},
		{"empty event", func(c *Config) { c.Events = []string{""} }},
		{"event with space", func(c *Config) { c.Events = []string{"a b"} }},
		{"buffer", func(c *Config) { c.BufferKB = -1 }},
		{"batch size", func(c *Config) { c.BatchSize = 0 }},
		{"batch delay", func(c *Config) { c.BatchDelay = 0 }},
		{"socket for kernel", func(c *Config) { c.Source, c.Socket = "kernel", "/x" }},
	} {
		c := createDefaultConfig()
		tc.edit(c)
		if err := c.Validate(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%s: %v, want EINVAL", tc.name, err)
		}
	}
}

// TestReceiver: logs, spans and metrics that OpenTelemetry's Go SDK
// writes through ehotel to a uetrace daemon come out of the receiver's
// three pipelines as the SDK had them, from one source; events that
// register after the receiver started are taken too.
func TestReceiver(t *testing.T) {
	sock := daemontest.Start(t, daemon.Config{})
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Source, cfg.Socket, cfg.BatchDelay = "daemon", sock, 10*time.Millisecond
	set := receivertest.NewNopSettings(metadata.Type)
	logs, spans, metrics := new(consumertest.LogsSink), new(consumertest.TracesSink), new(consumertest.MetricsSink)
	lr, err := f.CreateLogs(context.Background(), set, cfg, logs)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := f.CreateTraces(context.Background(), set, cfg, spans)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.CreateMetrics(context.Background(), set, cfg, metrics)
	if err != nil {
		t.Fatal(err)
	}
	if lr != component.Component(tr) || tr != component.Component(mr) {
		t.Fatal("the logs, traces and metrics receivers of one config are not one receiver")
	}
	host := componenttest.NewNopHost()
	for _, r := range []component.Component{lr, tr, mr} {
		if err := r.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, r := range []component.Component{lr, tr, mr} {
			if err := r.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	defer stop()

	// The writers register now: after the receiver started.
	uf, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer uf.Close()
	proc, err := ehotel.NewProcessor("RecvProv", &ehotel.Options{File: uf})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ehotel.NewSpanProcessor("RecvProv", &ehotel.Options{File: uf})
	if err != nil {
		t.Fatal(err)
	}
	me := ehotel.NewMetricExporter(&ehotel.Options{File: uf})
	res := resource.NewSchemaless(attribute.String("service.name", "checkout"))
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(proc))
	defer lp.Shutdown(context.Background())
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(time.Hour))))
	defer mp.Shutdown(context.Background())

	// The writers write only once the receiver has attached their
	// tracepoints, each as it appears: write until each signal came.
	logger := lp.Logger("recv")
	c, _ := mp.Meter("m").Int64Counter("orders")
	sent := map[trace.SpanID]trace.SpanContext{}
	testutil.Wait(t, "a log record, a span and a data point", func() bool {
		ctx, span := tp.Tracer("t").Start(context.Background(), "GET /orders", trace.WithSpanKind(trace.SpanKindServer))
		span.SetStatus(codes.Error, "boom")
		var rec log.Record
		rec.SetTimestamp(time.Unix(1_704_112_496, 789_000_000))
		rec.SetSeverity(log.SeverityWarn)
		rec.SetBody(attribute.StringValue("disk almost full"))
		rec.AddAttributes(attribute.Int64("free_mb", 12))
		logger.Emit(ctx, rec)
		span.End()
		sent[span.SpanContext().SpanID()] = span.SpanContext()
		if metrics.DataPointCount() == 0 {
			c.Add(context.Background(), 5)
			if err := mp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		return logs.LogRecordCount() >= 1 && spans.SpanCount() >= 1 && metrics.DataPointCount() >= 1
	})
	stop()

	gotLog := logs.AllLogs()[0].ResourceLogs().At(0)
	lrec := gotLog.ScopeLogs().At(0).LogRecords().At(0)
	sc := sent[trace.SpanID(lrec.SpanID())]
	if lrec.Body().Str() != "disk almost full" || lrec.SeverityNumber() != 13 || !lrec.Timestamp().AsTime().Equal(time.Unix(1_704_112_496, 789_000_000)) ||
		lrec.TraceID() != pcommon.TraceID(sc.TraceID()) || lrec.SpanID() != pcommon.SpanID(sc.SpanID()) {
		t.Errorf("log record: body %q severity %d time %v trace %v span %v", lrec.Body().Str(), lrec.SeverityNumber(), lrec.Timestamp(), lrec.TraceID(), lrec.SpanID())
	}
	if v, ok := lrec.Attributes().Get("free_mb"); !ok || v.Int() != 12 {
		t.Errorf("log record's free_mb: %v", v.AsRaw())
	}
	if v, ok := gotLog.Resource().Attributes().Get("service.name"); !ok || v.Str() != "checkout" {
		t.Errorf("log record's service.name: %v", v.AsRaw())
	}
	s := spans.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sc = sent[trace.SpanID(s.SpanID())]
	if s.Name() != "GET /orders" || s.TraceID() != pcommon.TraceID(sc.TraceID()) || s.SpanID() != pcommon.SpanID(sc.SpanID()) ||
		s.Kind() != 2 || s.Status().Code() != 2 || s.Status().Message() != "boom" {
		t.Errorf("span: %q trace %v id %v kind %v status %v %q", s.Name(), s.TraceID(), s.SpanID(), s.Kind(), s.Status().Code(), s.Status().Message())
	}
	m := metrics.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	if m.Name() != "orders" || m.Sum().DataPoints().At(0).IntValue() < 5 {
		t.Errorf("metric: %s %v", m.Name(), m.Sum().DataPoints().At(0).IntValue())
	}
}

// TestBadMetricsRequest: an otlp_metrics record whose request does not
// parse is kept as a log record with its bytes, beside the good ones.
func TestBadMetricsRequest(t *testing.T) {
	r := newReceiver(receivertest.NewNopSettings(metadata.Type), createDefaultConfig(), func() {})
	logs, metrics := new(consumertest.LogsSink), new(consumertest.MetricsSink)
	r.logs, r.metrics = logs, metrics
	var err error
	if r.obs, err = newObs(r); err != nil {
		t.Fatal(err)
	}
	bad := []byte{0x0a, 0xff} // resource_metrics, a length past the end
	r.consumeMetrics(context.Background(), [][]byte{bad})
	if logs.LogRecordCount() != 1 || metrics.DataPointCount() != 0 {
		t.Fatalf("%d log records, %d points; want the bad request as 1 log record", logs.LogRecordCount(), metrics.DataPointCount())
	}
	v, _ := logs.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().Get("linux.raw")
	if string(v.Bytes().AsRaw()) != string(bad) {
		t.Errorf("linux.raw = %x, want %x", v.Bytes().AsRaw(), bad)
	}
}

// TestStartNoSource: a source that is not there fails Start with an error
// that says so; Shutdown after it is fine, and a Start once the daemon is
// there works.
func TestStartNoSource(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Source, cfg.Socket = "daemon", filepath.Join(t.TempDir(), "none.sock")
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, new(consumertest.LogsSink))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), "no daemon") {
		t.Fatalf("Start without a daemon: %v, want an error saying there is no daemon", err)
	}
	cfg.Socket = daemontest.Start(t, daemon.Config{})
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("Start once the daemon is there: %v", err)
	}
	if r.(*eventsReceiver).cancel == nil {
		t.Error("the second Start did not start the source")
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
