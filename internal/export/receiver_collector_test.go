package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// The Collector's config with the userevents receiver taking a daemon's
// events into a pipeline of each signal, all to the file exporter.
const receiverConfig = `receivers:
  userevents:
    %s
    events: [%s]
    batch_delay: 20ms
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    logs:
      receivers: [userevents]
      exporters: [file]
    traces:
      receivers: [userevents]
      exporters: [file]
    metrics:
      receivers: [userevents]
      exporters: [file]
`

// startReceiverCollector runs the Collector with the userevents receiver
// on source (its config: "source: kernel", or the daemon and its socket);
// stop ends it as its operator would.
func startReceiverCollector(t *testing.T, bin, source, events, out string) (stop func(), log *testutil.Buffer, exited <-chan struct{}) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, receiverConfig, source, events, out), 0o644); err != nil {
		t.Fatal(err)
	}
	log = &testutil.Buffer{}
	cmd := exec.Command(bin, "--config="+cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
			t.Errorf("the Collector did not stop within a minute of SIGTERM:\n%s", log.String())
		}
	}
	t.Cleanup(stop)
	return stop, log, done
}

// otlpJSON is any of the file exporter's lines: a logs, traces or metrics
// request in OTLP/JSON, read loosely.
type otlpJSON struct {
	ResourceLogs []struct {
		Resource  jsonResource `json:"resource"`
		ScopeLogs []struct {
			LogRecords []struct {
				TimeUnixNano   string   `json:"timeUnixNano"`
				SeverityNumber int32    `json:"severityNumber"`
				SeverityText   string   `json:"severityText"`
				EventName      string   `json:"eventName"`
				Body           *jsonAny `json:"body"`
				TraceID        string   `json:"traceId"`
				SpanID         string   `json:"spanId"`
				Attributes     []jsonKV `json:"attributes"`
			} `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
	ResourceSpans []struct {
		Resource   jsonResource `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID           string   `json:"traceId"`
				SpanID            string   `json:"spanId"`
				ParentSpanID      string   `json:"parentSpanId"`
				Name              string   `json:"name"`
				Kind              int      `json:"kind"`
				StartTimeUnixNano string   `json:"startTimeUnixNano"`
				EndTimeUnixNano   string   `json:"endTimeUnixNano"`
				Attributes        []jsonKV `json:"attributes"`
				Links             []struct {
					TraceID string `json:"traceId"`
					SpanID  string `json:"spanId"`
				} `json:"links"`
				Status struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
	ResourceMetrics []struct {
		Resource     jsonResource `json:"resource"`
		ScopeMetrics []struct {
			Scope struct {
				Name string `json:"name"`
			} `json:"scope"`
			Metrics []struct {
				Name string `json:"name"`
				Unit string `json:"unit"`
				Sum  *struct {
					DataPoints []struct {
						StartTimeUnixNano string `json:"startTimeUnixNano"`
						TimeUnixNano      string `json:"timeUnixNano"`
						AsInt             string `json:"asInt"`
					} `json:"dataPoints"`
					AggregationTemporality int  `json:"aggregationTemporality"`
					IsMonotonic            bool `json:"isMonotonic"`
				} `json:"sum"`
			} `json:"metrics"`
		} `json:"scopeMetrics"`
	} `json:"resourceMetrics"`
}

type jsonResource struct {
	Attributes []jsonKV `json:"attributes"`
}

// The signals as the test compares them: the SDK's and the Collector's
// in one shape, uetrace's own attributes apart.
type (
	cmpLog struct {
		Time, Severity          int64
		SeverityText, EventName string
		Body                    otlp.Value
		TraceID, SpanID         string
		Attrs                   map[string]otlp.Value
		Service                 string
	}
	cmpSpan struct {
		TraceID, SpanID, Parent, Name string
		Kind                          int
		Start, End                    int64
		StatusCode                    int
		StatusMessage                 string
		Links                         []string
		Attrs                         map[string]otlp.Value
		Service                       string
	}
	cmpPoint struct {
		Metric, Scope      string
		Start, Time, Int   int64
		Temporality        int
		Monotonic          bool
		ResourceHasService bool
	}
)

// uetraceAttrs are the attributes the receiver adds to each record and
// span beside the SDK's: they are checked, then left out of the compare.
var uetraceAttrs = []string{export.AttrTracepoint, export.AttrThreadID, export.AttrCPU, export.AttrEHProvider}

func attrMap(kvs []jsonKV) map[string]otlp.Value {
	m := map[string]otlp.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.value()
	}
	return m
}

func num(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

// readSignals reads the Collector's file: its logs, spans and points.
func readSignals(t *testing.T, path string) (logs []cmpLog, spans []cmpSpan, points []cmpPoint) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var req otlpJSON
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			continue // a line being written
		}
		stripped := func(kvs []jsonKV, where string) map[string]otlp.Value {
			m := attrMap(kvs)
			for _, k := range uetraceAttrs {
				if _, ok := m[k]; !ok {
					t.Errorf("%s has no %s", where, k)
				}
				delete(m, k)
			}
			return m
		}
		for _, rl := range req.ResourceLogs {
			res := attrMap(rl.Resource.Attributes)
			for _, sl := range rl.ScopeLogs {
				for _, r := range sl.LogRecords {
					l := cmpLog{Time: num(r.TimeUnixNano), Severity: int64(r.SeverityNumber), SeverityText: r.SeverityText,
						EventName: r.EventName, TraceID: r.TraceID, SpanID: r.SpanID, Service: res["service.name"].Str,
						Attrs: stripped(r.Attributes, "a log record")}
					if r.Body != nil {
						l.Body = r.Body.value()
					}
					logs = append(logs, l)
				}
			}
		}
		for _, rs := range req.ResourceSpans {
			res := attrMap(rs.Resource.Attributes)
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c := cmpSpan{TraceID: s.TraceID, SpanID: s.SpanID, Parent: s.ParentSpanID, Name: s.Name, Kind: s.Kind,
						Start: num(s.StartTimeUnixNano), End: num(s.EndTimeUnixNano), StatusCode: s.Status.Code,
						StatusMessage: s.Status.Message, Service: res["service.name"].Str, Attrs: stripped(s.Attributes, "a span")}
					for _, l := range s.Links {
						c.Links = append(c.Links, l.TraceID+"/"+l.SpanID)
					}
					spans = append(spans, c)
				}
			}
		}
		for _, rm := range req.ResourceMetrics {
			res := attrMap(rm.Resource.Attributes)
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Sum == nil {
						continue
					}
					for _, p := range m.Sum.DataPoints {
						points = append(points, cmpPoint{Metric: m.Name, Scope: sm.Scope.Name, Start: num(p.StartTimeUnixNano),
							Time: num(p.TimeUnixNano), Int: num(p.AsInt), Temporality: m.Sum.AggregationTemporality,
							Monotonic: m.Sum.IsMonotonic, ResourceHasService: res["service.name"].Str == "checkout"})
					}
				}
			}
		}
	}
	return logs, spans, points
}

// teeMetrics keeps what the SDK gives its exporter, then exports it.
type teeMetrics struct {
	*ehotel.MetricExporter
	got []metricdata.ResourceMetrics
}

func (e *teeMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	e.got = append(e.got, *rm)
	return e.MetricExporter.Export(ctx, rm)
}

// TestReceiverCollector: the Collector's userevents receiver, built into
// a Collector, takes the logs, spans and metrics OpenTelemetry's Go SDK
// writes through ehotel — to a uetrace daemon (uetrace serve), or to the
// kernel (in the VM: kernel/suites runs this) — and gives its pipelines
// what the SDK had, field by field: a log's time, severity, text, event
// name, body, trace and span ids, attributes and service; a span's ids,
// parent, name, kind, times, status, links, attributes and service; a
// counter's points as the metrics exporter wrote them. What differs, and
// is checked apart: each record and span also has the tracepoint, thread,
// CPU and provider as attributes.
func TestReceiverCollector(t *testing.T) {
	t.Run("daemon", func(t *testing.T) {
		otelcolBin, uetraceBin := binaries(t)
		sock, _ := startDaemon(t, uetraceBin)
		testReceiverCollector(t, otelcolBin, "source: daemon\n    socket: "+sock, userevents.Options{Backend: userevents.Daemon, Socket: sock})
	})
	t.Run("kernel", func(t *testing.T) {
		if _, err := os.Stat("/sys/kernel/tracing/user_events_data"); err != nil {
			t.Skipf("no kernel user_events here (%v): kernel/suites runs this test in a VM with them", err)
		}
		otelcolBin, _ := binaries(t)
		testReceiverCollector(t, otelcolBin, "source: kernel", userevents.Options{Backend: userevents.Kernel})
	})
}

func testReceiverCollector(t *testing.T, otelcolBin, source string, writer userevents.Options) {
	out := filepath.Join(t.TempDir(), "out.json")
	stop, collectorLog, exited := startReceiverCollector(t, otelcolBin, source, `"RecvCol_*", "otlp_metrics"`, out)

	f, err := userevents.Open(&writer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proc, err := ehotel.NewProcessor("RecvCol", &ehotel.Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ehotel.NewSpanProcessor("RecvCol", &ehotel.Options{File: f})
	if err != nil {
		t.Fatal(err)
	}
	me := &teeMetrics{MetricExporter: ehotel.NewMetricExporter(&ehotel.Options{File: f})}
	// The tracepoints the writers write, registered again to see when the
	// Collector has attached them: the same name and fields are the same
	// tracepoint, with one enable bit.
	for _, cmd := range []string{"RecvCol_L3K1 " + eventheader.CommandTypes, "RecvCol_L4K1 " + eventheader.CommandTypes, ehotel.MetricsCommand} {
		ev, err := f.Register(cmd, 0)
		if err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
		defer ev.Close()
		testutil.Wait(t, "the Collector to attach "+strings.Fields(cmd)[0], func() bool {
			select {
			case <-exited:
				t.Fatalf("the Collector exited:\n%s", collectorLog.String())
			default:
			}
			return ev.Enabled()
		})
	}

	res := resource.NewSchemaless(attribute.String("service.name", "checkout"))
	var sdkLogs keep
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(proc), sdklog.WithProcessor(&sdkLogs))
	defer lp.Shutdown(context.Background())
	var ended []sdktrace.ReadOnlySpan
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp), sdktrace.WithSpanProcessor(recorder{&ended}))
	defer tp.Shutdown(context.Background())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(time.Hour))))
	defer mp.Shutdown(context.Background())

	// Two spans, parent and child, the child with a link, an error, and
	// attributes; a log record in the child, a bare one; a counter.
	tr := tp.Tracer("recv")
	ctx, parent := tr.Start(context.Background(), "checkout", trace.WithTimestamp(time.Unix(1_800_000_000, 0)))
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}})
	ctx, child := tr.Start(ctx, "GET /orders", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(time.Unix(1_800_000_000, 5_000)),
		trace.WithLinks(trace.Link{SpanContext: link}),
		trace.WithAttributes(attribute.String("http.request.method", "GET"), attribute.Int("items", 3)))
	logger := lp.Logger("recv")
	var rec log.Record
	rec.SetTimestamp(time.Unix(1_800_000_000, 6_000))
	rec.SetSeverity(log.SeverityWarn)
	rec.SetSeverityText("WARN")
	rec.SetBody(attribute.StringValue("disk almost full"))
	rec.SetEventName("disk.alert")
	rec.AddAttributes(attribute.String("path", "/var"), attribute.Bool("retry", true), attribute.Float64("ratio", 0.97))
	logger.Emit(ctx, rec)
	var bare log.Record
	bare.SetTimestamp(time.Unix(1_800_000_001, 0))
	bare.SetSeverity(log.SeverityInfo)
	bare.SetBody(attribute.StringValue("started"))
	logger.Emit(context.Background(), bare)
	child.SetStatus(codes.Error, "boom")
	child.End(trace.WithTimestamp(time.Unix(1_800_000_000, 9_000)))
	parent.End(trace.WithTimestamp(time.Unix(1_800_000_001, 0)))
	c, _ := mp.Meter("shop").Int64Counter("orders")
	c.Add(context.Background(), 5)
	if err := mp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}

	var logs []cmpLog
	var spans []cmpSpan
	var points []cmpPoint
	testutil.Wait(t, "2 log records, 2 spans and a point in the Collector's file", func() bool {
		logs, spans, points = readSignals(t, out)
		return len(logs) >= 2 && len(spans) >= 2 && len(points) >= 1
	})
	stop()
	if len(logs) != 2 || len(spans) != 2 || len(points) != 1 {
		t.Errorf("%d log records, %d spans, %d points; want 2, 2, 1 (each once)", len(logs), len(spans), len(points))
	}

	hexID := func(b []byte) string {
		if len(bytes.Trim(b, "\x00")) == 0 {
			return ""
		}
		return hex.EncodeToString(b)
	}
	var wantLogs []cmpLog
	for _, r := range sdkLogs.records {
		w := cmpLog{Time: r.Timestamp().UnixNano(), Severity: int64(r.Severity()), SeverityText: r.SeverityText(),
			EventName: r.EventName(), Body: otlpValue(r.Body()), Attrs: map[string]otlp.Value{}, Service: "checkout"}
		tid, sid := r.TraceID(), r.SpanID()
		w.TraceID, w.SpanID = hexID(tid[:]), hexID(sid[:])
		r.WalkAttributes(func(kv attribute.KeyValue) bool { w.Attrs[string(kv.Key)] = otlpValue(kv.Value); return true })
		wantLogs = append(wantLogs, w)
	}
	if diff := cmp.Diff(wantLogs, logs); diff != "" {
		t.Errorf("log records (-the SDK's +the Collector's):\n%s", diff)
	}
	var wantSpans []cmpSpan
	for _, s := range ended {
		sc, p := s.SpanContext(), s.Parent()
		tid, sid, pid := sc.TraceID(), sc.SpanID(), p.SpanID()
		w := cmpSpan{TraceID: hexID(tid[:]), SpanID: hexID(sid[:]), Parent: hexID(pid[:]), Name: s.Name(), Kind: int(s.SpanKind()),
			Start: s.StartTime().UnixNano(), End: s.EndTime().UnixNano(), Attrs: map[string]otlp.Value{}, Service: "checkout"}
		if s.Status().Code == codes.Error {
			w.StatusCode, w.StatusMessage = int(otlp.StatusError), s.Status().Description
		}
		for _, l := range s.Links() {
			lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			w.Links = append(w.Links, hexID(lt[:])+"/"+hexID(ls[:]))
		}
		for _, kv := range s.Attributes() {
			w.Attrs[string(kv.Key)] = otlpValue(kv.Value)
		}
		wantSpans = append(wantSpans, w)
	}
	if diff := cmp.Diff(wantSpans, spans); diff != "" {
		t.Errorf("spans (-the SDK's +the Collector's):\n%s", diff)
	}
	var wantPoints []cmpPoint
	for _, rm := range me.got {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok {
					continue
				}
				temporality := 2 // OTLP's CUMULATIVE
				if sum.Temporality == metricdata.DeltaTemporality {
					temporality = 1
				}
				for _, p := range sum.DataPoints {
					wantPoints = append(wantPoints, cmpPoint{Metric: m.Name, Scope: sm.Scope.Name, Start: p.StartTime.UnixNano(),
						Time: p.Time.UnixNano(), Int: p.Value, Temporality: temporality, Monotonic: sum.IsMonotonic, ResourceHasService: true})
				}
			}
		}
	}
	if diff := cmp.Diff(wantPoints, points); diff != "" {
		t.Errorf("metric points (-the SDK's +the Collector's):\n%s", diff)
	}
	if t.Failed() {
		t.Logf("the Collector's log:\n%s", collectorLog.String())
	}
}
