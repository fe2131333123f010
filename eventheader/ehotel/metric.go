package ehotel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/uetrace/uetrace/userevents"
)

// The event OpenTelemetry's Rust user_events metrics exporter writes
// (opentelemetry-user-events-metrics/src/tracepoint/mod.rs): a plain
// user_events event, not EventHeader, whose buffer is one OTLP
// ExportMetricsServiceRequest.
const (
	// MetricsCommand registers it: METRICS_EVENT_DEF without its final
	// ';' (an empty field, which the kernel skips).
	MetricsCommand = "otlp_metrics u32 protocol;char[8] version;__rel_loc u8[] buffer"
	// MetricsProtocol is the protocol field: 0, protobuf.
	MetricsProtocol = 0
	// MetricsVersion is the version field: PROTOBUF_VERSION.
	MetricsVersion = "v0.19.00"
	// maxMetricsBuffer is the largest request written: MAX_EVENT_SIZE in
	// src/exporter/mod.rs; a larger one is not written.
	maxMetricsBuffer = 65360
)

// MetricExporter is an sdkmetric.Exporter that writes each data point as
// one event otlp_metrics, as OpenTelemetry's Rust user_events metrics
// exporter does (see the package doc's METRICS): nothing is built while
// nobody listens to the event; while something does, every data point is
// an ExportMetricsServiceRequest of its own — resource, scope, metric and
// that one point — so that each fits the 64 KiB a record can hold.
//
// Use it with sdkmetric.NewPeriodicReader. Its methods are safe for
// concurrent use.
type MetricExporter struct {
	file     *userevents.File
	ownsFile bool
	ev       *userevents.Event // nil when it could not be registered: err says why
	err      error
	stopped  atomic.Bool
	stop     sync.Once

	mu  sync.Mutex // one Export at a time: the buffers below
	enc metricEncoder
}

// NewMetricExporter returns an exporter that registers otlp_metrics at
// once, so that a listener can attach before the first export. Options.File
// applies; ResourceAttributes does not (the whole resource goes in every
// request). That user_events cannot be opened, or the event
// registered, is not an error: the exporter then writes nothing, and Err
// says why.
func NewMetricExporter(opts *Options) *MetricExporter {
	c := opts.config()
	e := &MetricExporter{file: c.file}
	if e.file == nil {
		f, err := userevents.Open(nil)
		if err != nil {
			e.err = fmt.Errorf("ehotel: metrics go nowhere: open user_events: %w", err)
			return e
		}
		e.file, e.ownsFile = f, true
	}
	ev, err := e.file.Register(MetricsCommand, 0)
	if err != nil {
		e.err = fmt.Errorf("ehotel: metrics go nowhere: %w", err)
		e.closeFile()
		return e
	}
	e.ev = ev
	return e
}

// Err says why the exporter writes nothing — user_events could not be
// opened, otlp_metrics not registered — or nil.
func (e *MetricExporter) Err() error { return e.err }

// Event is the registered otlp_metrics event, or nil (Err says why).
func (e *MetricExporter) Event() *userevents.Event { return e.ev }

// Temporality is delta for every instrument kind, as the Rust exporter's.
func (e *MetricExporter) Temporality(sdkmetric.InstrumentKind) metricdata.Temporality {
	return metricdata.DeltaTemporality
}

// Aggregation is the SDK's default for each instrument kind.
func (e *MetricExporter) Aggregation(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
	return sdkmetric.DefaultAggregationSelector(k)
}

// Export writes every data point of rm while the event is enabled, and
// nothing at all while it is not. It returns an error after Shutdown,
// the context's once it is done (writing nothing more), and one that
// counts the data points that could not be written — a request over 65360
// bytes, the backend's errors — and says why the first could not, the
// others written.
func (e *MetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	if e.stopped.Load() {
		return errMetricShutdown
	}
	if e.ev == nil || !e.ev.Enabled() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	enc := &e.enc
	enc.setResource(rm.Resource)
	var failed int
	var first error
	for i := range rm.ScopeMetrics {
		sm := &rm.ScopeMetrics[i]
		enc.setScope(sm)
		for j := range sm.Metrics {
			if err := ctx.Err(); err != nil {
				return err
			}
			m := &sm.Metrics[j]
			enc.setMetric(m)
			n := enc.points(m, func(buf []byte) error { return e.write(buf) }, &first)
			failed += n
		}
	}
	if failed > 0 {
		return fmt.Errorf("ehotel: %d metric data points not written; the first: %w", failed, first)
	}
	return nil
}

var errMetricShutdown = errors.New("ehotel: metric exporter is shut down")

// write writes one request as the Rust exporter's tracepoint::write: the
// protocol, the version, the buffer's __rel_loc (its size in the high 16
// bits, offset 0: it follows at once) and the buffer.
func (e *MetricExporter) write(buf []byte) error {
	if len(buf) > maxMetricsBuffer {
		return fmt.Errorf("a data point's request of %d bytes, at most %d: %w", len(buf), maxMetricsBuffer, unix.E2BIG)
	}
	var head [4 + 8 + 4]byte
	binary.LittleEndian.PutUint32(head[0:], MetricsProtocol)
	copy(head[4:12], MetricsVersion)
	binary.LittleEndian.PutUint32(head[12:], uint32(len(buf))<<16)
	err := e.ev.Write(head[:], buf)
	if errors.Is(err, unix.EBADF) {
		return nil // the listener went between the check and the write
	}
	return err
}

// ForceFlush returns the context's error, or nil: Export writes at once.
func (e *MetricExporter) ForceFlush(ctx context.Context) error { return ctx.Err() }

// Shutdown stops the exporter: Export returns an error from now on, the
// event is unregistered, and user_events closed if the exporter opened
// it. It returns nil, and does nothing the second time.
func (e *MetricExporter) Shutdown(context.Context) error {
	e.stop.Do(func() {
		e.stopped.Store(true)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.ev != nil {
			e.ev.Close()
		}
		e.closeFile()
	})
	return nil
}

func (e *MetricExporter) closeFile() {
	if e.ownsFile && e.file != nil {
		e.file.Close()
	}
}

var _ sdkmetric.Exporter = (*MetricExporter)(nil)

// Field numbers of opentelemetry-proto (v1.x): collector/metrics/v1/
// metrics_service.proto, metrics/v1/metrics.proto, common/v1/common.proto,
// resource/v1/resource.proto.
const (
	fRequestResourceMetrics = 1 // ExportMetricsServiceRequest.resource_metrics

	fRMResource     = 1 // ResourceMetrics
	fRMScopeMetrics = 2
	fRMSchemaURL    = 3

	fResourceAttributes = 1 // Resource

	fSMScope     = 1 // ScopeMetrics
	fSMMetrics   = 2
	fSMSchemaURL = 3

	fScopeName       = 1 // InstrumentationScope
	fScopeVersion    = 2
	fScopeAttributes = 3

	fMetricName        = 1 // Metric
	fMetricDescription = 2
	fMetricUnit        = 3
	fMetricGauge       = 5
	fMetricSum         = 7
	fMetricHistogram   = 9
	fMetricExpHist     = 10
	fMetricSummary     = 11

	fDataPoints  = 1 // Gauge, Sum, Histogram, ExponentialHistogram, Summary
	fTemporality = 2 // Sum, Histogram, ExponentialHistogram
	fMonotonic   = 3 // Sum

	fKVKey   = 1 // KeyValue
	fKVValue = 2

	fAnyString = 1 // AnyValue
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7

	fListValues = 1 // ArrayValue.values, KeyValueList.values

	// OTLP's AggregationTemporality (the Go SDK numbers its own
	// differently: 1 cumulative, 2 delta).
	otlpDelta      = 1
	otlpCumulative = 2
)

// metricEncoder builds the requests of one Export: the resource and the
// scope are encoded once, then each data point is wrapped in them. Its
// buffers are kept from one Export to the next.
type metricEncoder struct {
	res      []byte // the ResourceMetrics.resource field
	resURL   []byte // the ResourceMetrics.schema_url field
	scope    []byte // the ScopeMetrics.scope and schema_url fields' bodies
	scopeURL []byte
	head     []byte // the Metric's name, description and unit fields
	point    []byte // one data point message
	tail     []byte // the aggregation's fields after its data point
	data     []byte // the Metric's data message (Gauge, Sum, …)
	metric   []byte
	sm       []byte
	rm       []byte
	req      []byte
	lastRes  *resource.Resource
}

// setResource encodes r's attributes, once per resource.
func (c *metricEncoder) setResource(r *resource.Resource) {
	if r == c.lastRes && c.res != nil {
		return
	}
	c.lastRes = r
	// The resource is always there (Rust: Some(resource.into())), even
	// with no attributes.
	c.res = protowire.AppendTag(c.res[:0], fRMResource, protowire.BytesType)
	at := len(c.res)
	c.res = append(c.res, 0)
	if r != nil {
		for it := r.Iter(); it.Next(); {
			c.res = appendKV(c.res, fResourceAttributes, it.Attribute())
		}
	}
	c.res = fixSize(c.res, at)
	c.resURL = c.resURL[:0]
	if r != nil && r.SchemaURL() != "" {
		c.resURL = appendStr(c.resURL, fRMSchemaURL, r.SchemaURL())
	}
}

// setScope encodes the ScopeMetrics' scope (always there, as in Rust) and
// schema URL.
func (c *metricEncoder) setScope(sm *metricdata.ScopeMetrics) {
	// The scope's body after the field's tag and a size to be known: one
	// byte while it is under 128, else moved once.
	c.scope = protowire.AppendTag(c.scope[:0], fSMScope, protowire.BytesType)
	at := len(c.scope)
	c.scope = append(c.scope, 0)
	c.scope = appendStr(c.scope, fScopeName, sm.Scope.Name)
	c.scope = appendStr(c.scope, fScopeVersion, sm.Scope.Version)
	for it := sm.Scope.Attributes.Iter(); it.Next(); {
		c.scope = appendKV(c.scope, fScopeAttributes, it.Attribute())
	}
	c.scope = fixSize(c.scope, at)
	c.scopeURL = appendStr(c.scopeURL[:0], fSMSchemaURL, sm.Scope.SchemaURL)
}

// fixSize writes the size of the message body that follows b[at] — the
// one byte reserved there — as its varint, moving the body when the size
// takes more than that byte.
func fixSize(b []byte, at int) []byte {
	size := len(b) - at - 1
	n := protowire.SizeVarint(uint64(size))
	if n > 1 {
		b = append(b, make([]byte, n-1)...)
		copy(b[at+n:], b[at+1:at+1+size])
	}
	protowire.AppendVarint(b[at:at], uint64(size))
	return b
}

// setMetric encodes the Metric's name, description and unit.
func (c *metricEncoder) setMetric(m *metricdata.Metrics) {
	c.head = appendStr(c.head[:0], fMetricName, m.Name)
	c.head = appendStr(c.head, fMetricDescription, m.Description)
	c.head = appendStr(c.head, fMetricUnit, m.Unit)
}

// points writes a request for each data point of m with write and returns
// how many could not be written, keeping the first error in *first. An
// aggregation of a kind it does not know is one failure.
func (c *metricEncoder) points(m *metricdata.Metrics, write func([]byte) error, first *error) int {
	var failed int
	var err error
	switch d := m.Data.(type) {
	case metricdata.Gauge[int64]:
		failed, err = eachPoint(c, d.DataPoints, appendNumberPoint[int64], fMetricGauge, nil, write)
	case metricdata.Gauge[float64]:
		failed, err = eachPoint(c, d.DataPoints, appendNumberPoint[float64], fMetricGauge, nil, write)
	case metricdata.Sum[int64]:
		failed, err = eachPoint(c, d.DataPoints, appendNumberPoint[int64], fMetricSum, c.sumTail(d.Temporality, d.IsMonotonic), write)
	case metricdata.Sum[float64]:
		failed, err = eachPoint(c, d.DataPoints, appendNumberPoint[float64], fMetricSum, c.sumTail(d.Temporality, d.IsMonotonic), write)
	case metricdata.Histogram[int64]:
		failed, err = eachPoint(c, d.DataPoints, appendHistogramPoint[int64], fMetricHistogram, c.sumTail(d.Temporality, false), write)
	case metricdata.Histogram[float64]:
		failed, err = eachPoint(c, d.DataPoints, appendHistogramPoint[float64], fMetricHistogram, c.sumTail(d.Temporality, false), write)
	case metricdata.ExponentialHistogram[int64]:
		failed, err = eachPoint(c, d.DataPoints, appendExpHistogramPoint[int64], fMetricExpHist, c.sumTail(d.Temporality, false), write)
	case metricdata.ExponentialHistogram[float64]:
		failed, err = eachPoint(c, d.DataPoints, appendExpHistogramPoint[float64], fMetricExpHist, c.sumTail(d.Temporality, false), write)
	case metricdata.Summary:
		failed, err = eachPoint(c, d.DataPoints, appendSummaryPoint, fMetricSummary, nil, write)
	default:
		failed, err = 1, fmt.Errorf("an aggregation of type %T, which OTLP has no message for: %w", m.Data, unix.EINVAL)
	}
	if err != nil && *first == nil {
		*first = fmt.Errorf("metric %s: %w", m.Name, err)
	}
	return failed
}

// eachPoint writes a request for each of points — encoded by enc, as the
// aggregation field whose own fields are tail — with write, and returns
// how many could not be written and the first error.
func eachPoint[P any](c *metricEncoder, points []P, enc func([]byte, *P) []byte, field protowire.Number, tail []byte, write func([]byte) error) (failed int, first error) {
	for i := range points {
		c.point = enc(c.point[:0], &points[i])
		// The data message: the one point, then the aggregation's own
		// fields.
		c.data = protowire.AppendTag(c.data[:0], fDataPoints, protowire.BytesType)
		c.data = protowire.AppendBytes(c.data, c.point)
		c.data = append(c.data, tail...)
		if err := write(c.request(field)); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	return failed, first
}

// request wraps the data message (c.data, the Metric's field) in the
// Metric, the ScopeMetrics, the ResourceMetrics and the request.
func (c *metricEncoder) request(field protowire.Number) []byte {
	c.metric = append(c.metric[:0], c.head...)
	c.metric = protowire.AppendTag(c.metric, field, protowire.BytesType)
	c.metric = protowire.AppendBytes(c.metric, c.data)

	c.sm = append(c.sm[:0], c.scope...)
	c.sm = protowire.AppendTag(c.sm, fSMMetrics, protowire.BytesType)
	c.sm = protowire.AppendBytes(c.sm, c.metric)
	c.sm = append(c.sm, c.scopeURL...)

	c.rm = append(c.rm[:0], c.res...)
	c.rm = protowire.AppendTag(c.rm, fRMScopeMetrics, protowire.BytesType)
	c.rm = protowire.AppendBytes(c.rm, c.sm)
	c.rm = append(c.rm, c.resURL...)

	c.req = protowire.AppendTag(c.req[:0], fRequestResourceMetrics, protowire.BytesType)
	c.req = protowire.AppendBytes(c.req, c.rm)
	return c.req
}

// sumTail is the aggregation's temporality and monotonicity fields, in
// c.tail.
func (c *metricEncoder) sumTail(t metricdata.Temporality, monotonic bool) []byte {
	b := c.tail[:0]
	defer func() { c.tail = b }()
	switch t {
	case metricdata.DeltaTemporality:
		b = appendVarint(b, fTemporality, otlpDelta)
	case metricdata.CumulativeTemporality:
		b = appendVarint(b, fTemporality, otlpCumulative)
	}
	if monotonic {
		b = appendVarint(b, fMonotonic, 1)
	}
	return b
}

// The data points' messages, their fields in opentelemetry-proto's
// declaration order — the order prost, which the Rust exporter encodes
// with, writes them in — and, as proto3 wants, without the fields that
// hold their zero value (but those declared optional, and every member of
// a oneof, which are written when set).

// NumberDataPoint: attributes 7, start_time_unix_nano 2, time_unix_nano 3,
// as_double 4 | as_int 6 (sfixed64), exemplars 5 (none), flags 8 (0).
func appendNumberPoint[N int64 | float64](b []byte, p *metricdata.DataPoint[N]) []byte {
	b = appendAttrs(b, 7, p.Attributes)
	b = appendTimes(b, p.StartTime, p.Time)
	switch v := any(p.Value).(type) {
	case int64:
		b = protowire.AppendTag(b, 6, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, uint64(v))
	case float64:
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v))
	}
	return b
}

// HistogramDataPoint: attributes 9, start 2, time 3, count 4 (fixed64),
// sum 5 (optional: always, as Rust), bucket_counts 6 (packed fixed64),
// explicit_bounds 7 (packed double), exemplars 8, flags 10, min 11 and
// max 12 (optional: when known).
func appendHistogramPoint[N int64 | float64](b []byte, p *metricdata.HistogramDataPoint[N]) []byte {
	b = appendAttrs(b, 9, p.Attributes)
	b = appendTimes(b, p.StartTime, p.Time)
	b = appendFixed64(b, 4, p.Count)
	b = appendDouble(b, 5, float64(p.Sum))
	if len(p.BucketCounts) > 0 {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(8*len(p.BucketCounts)))
		for _, n := range p.BucketCounts {
			b = protowire.AppendFixed64(b, n)
		}
	}
	if len(p.Bounds) > 0 {
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(8*len(p.Bounds)))
		for _, f := range p.Bounds {
			b = protowire.AppendFixed64(b, math.Float64bits(f))
		}
	}
	if v, ok := p.Min.Value(); ok {
		b = appendDouble(b, 11, float64(v))
	}
	if v, ok := p.Max.Value(); ok {
		b = appendDouble(b, 12, float64(v))
	}
	return b
}

// ExponentialHistogramDataPoint: attributes 1, start 2, time 3, count 4,
// sum 5 (always), scale 6 (sint32), zero_count 7 (fixed64), positive 8
// and negative 9 (always, as Rust), flags 10, exemplars 11, min 12 and max
// 13 (when known), zero_threshold 14 (double).
func appendExpHistogramPoint[N int64 | float64](b []byte, p *metricdata.ExponentialHistogramDataPoint[N]) []byte {
	b = appendAttrs(b, 1, p.Attributes)
	b = appendTimes(b, p.StartTime, p.Time)
	b = appendFixed64(b, 4, p.Count)
	b = appendDouble(b, 5, float64(p.Sum))
	if p.Scale != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(p.Scale)))
	}
	b = appendFixed64(b, 7, p.ZeroCount)
	b = appendBuckets(b, 8, &p.PositiveBucket)
	b = appendBuckets(b, 9, &p.NegativeBucket)
	if v, ok := p.Min.Value(); ok {
		b = appendDouble(b, 12, float64(v))
	}
	if v, ok := p.Max.Value(); ok {
		b = appendDouble(b, 13, float64(v))
	}
	if p.ZeroThreshold != 0 {
		b = appendDouble(b, 14, p.ZeroThreshold)
	}
	return b
}

// Buckets: offset 1 (sint32), bucket_counts 2 (packed varint).
func appendBuckets(b []byte, num protowire.Number, bk *metricdata.ExponentialBucket) []byte {
	counts := 0
	for _, c := range bk.Counts {
		counts += protowire.SizeVarint(c)
	}
	size := 0
	if bk.Offset != 0 {
		size += 1 + protowire.SizeVarint(protowire.EncodeZigZag(int64(bk.Offset)))
	}
	if counts > 0 {
		size += 1 + protowire.SizeBytes(counts)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	if bk.Offset != 0 {
		b = appendVarint(b, 1, protowire.EncodeZigZag(int64(bk.Offset)))
	}
	if counts > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(counts))
		for _, c := range bk.Counts {
			b = protowire.AppendVarint(b, c)
		}
	}
	return b
}

// SummaryDataPoint (which the Rust SDK has no instrument for; the Go SDK's
// bridges make it): attributes 7, start 2, time 3, count 4, sum 5,
// quantile_values 6 {quantile 1, value 2}, flags 8.
func appendSummaryPoint(b []byte, p *metricdata.SummaryDataPoint) []byte {
	b = appendAttrs(b, 7, p.Attributes)
	b = appendTimes(b, p.StartTime, p.Time)
	b = appendFixed64(b, 4, p.Count)
	if p.Sum != 0 {
		b = appendDouble(b, 5, p.Sum)
	}
	for _, q := range p.QuantileValues {
		size := 0
		if q.Quantile != 0 {
			size += 9
		}
		if q.Value != 0 {
			size += 9
		}
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		if q.Quantile != 0 {
			b = appendDouble(b, 1, q.Quantile)
		}
		if q.Value != 0 {
			b = appendDouble(b, 2, q.Value)
		}
	}
	return b
}

// appendTimes appends start_time_unix_nano 2 and time_unix_nano 3, each
// unless zero (Rust's to_nanos of an unset start is 0, which proto3 omits).
func appendTimes(b []byte, start, t time.Time) []byte {
	b = appendFixed64(b, 2, unixNano(start))
	return appendFixed64(b, 3, unixNano(t))
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixNano())
}

// appendFixed64 appends a fixed64 field unless it is 0.
func appendFixed64(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, v)
}

// appendDouble appends a double field, 0 too (for optional fields).
func appendDouble(b []byte, num protowire.Number, f float64) []byte {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// appendStr appends a string field unless it is empty.
func appendStr(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendAttrs appends each attribute of s as a KeyValue field num.
func appendAttrs(b []byte, num protowire.Number, s attribute.Set) []byte {
	for it := s.Iter(); it.Next(); {
		b = appendKV(b, num, it.Attribute())
	}
	return b
}

// appendKV appends kv as a KeyValue field num: key 1, value 2 (AnyValue).
// Messages are written after their sizes, computed first (sizeKV,
// sizeAny), so that no body is built apart: encoding allocates nothing
// once the buffers have grown.
func appendKV(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizeKV(kv)))
	b = appendStr(b, fKVKey, string(kv.Key))
	b = protowire.AppendTag(b, fKVValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizeAny(kv.Value)))
	return appendAny(b, kv.Value)
}

// sizeKV is the size of kv's KeyValue message body.
func sizeKV(kv attribute.KeyValue) int {
	n := 0
	if kv.Key != "" {
		n += protowire.SizeTag(fKVKey) + protowire.SizeBytes(len(kv.Key))
	}
	return n + protowire.SizeTag(fKVValue) + protowire.SizeBytes(sizeAny(kv.Value))
}

// sizeAny is the size of v's AnyValue message body (appendAny).
func sizeAny(v attribute.Value) int {
	switch v.Type() {
	case attribute.BOOL:
		return 1 + 1
	case attribute.INT64:
		return 1 + protowire.SizeVarint(uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return 1 + 8
	case attribute.STRING:
		return 1 + protowire.SizeBytes(len(v.AsString()))
	case attribute.BYTESLICE:
		return 1 + protowire.SizeBytes(len(v.AsByteSlice()))
	case attribute.MAP:
		return 1 + protowire.SizeBytes(sizeMap(v))
	case attribute.EMPTY:
		return 0
	}
	if n, at := list(v); at != nil {
		return 1 + protowire.SizeBytes(sizeList(n, at))
	}
	return 0
}

// sizeMap is the size of a map value's KeyValueList body.
func sizeMap(v attribute.Value) int {
	n := 0
	for _, kv := range v.AsMap() {
		n += protowire.SizeTag(fListValues) + protowire.SizeBytes(sizeKV(kv))
	}
	return n
}

// sizeList is the size of a slice value's ArrayValue body.
func sizeList(n int, at func(int) attribute.Value) int {
	size := 0
	for i := range n {
		size += protowire.SizeTag(fListValues) + protowire.SizeBytes(sizeAny(at(i)))
	}
	return size
}

// list gives a slice value's length and elements; at is nil for a value
// that is no slice.
func list(v attribute.Value) (int, func(int) attribute.Value) {
	switch v.Type() {
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return len(s), func(i int) attribute.Value { return attribute.BoolValue(s[i]) }
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return len(s), func(i int) attribute.Value { return attribute.Int64Value(s[i]) }
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return len(s), func(i int) attribute.Value { return attribute.Float64Value(s[i]) }
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return len(s), func(i int) attribute.Value { return attribute.StringValue(s[i]) }
	case attribute.SLICE:
		s := v.AsSlice()
		return len(s), func(i int) attribute.Value { return s[i] }
	}
	return 0, nil
}

// appendAny appends v's AnyValue message body, as opentelemetry-proto's
// conversion of an attribute value: one member of the value oneof, set
// even when it holds its type's zero; an empty value is an empty AnyValue.
func appendAny(b []byte, v attribute.Value) []byte {
	switch v.Type() {
	case attribute.BOOL:
		var n uint64
		if v.AsBool() {
			n = 1
		}
		return appendVarint(b, fAnyBool, n)
	case attribute.INT64:
		return appendVarint(b, fAnyInt, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return appendDouble(b, fAnyDouble, v.AsFloat64())
	case attribute.STRING:
		b = protowire.AppendTag(b, fAnyString, protowire.BytesType)
		return protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, fAnyBytes, protowire.BytesType)
		return protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.MAP:
		b = protowire.AppendTag(b, fAnyKVList, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeMap(v)))
		for _, kv := range v.AsMap() {
			b = appendKV(b, fListValues, kv)
		}
		return b
	}
	if n, at := list(v); at != nil {
		b = protowire.AppendTag(b, fAnyArray, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeList(n, at)))
		for i := range n {
			e := at(i)
			b = protowire.AppendTag(b, fListValues, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeAny(e)))
			b = appendAny(b, e)
		}
	}
	return b
}
