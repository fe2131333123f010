package ehotel_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/subsys"
)

// pbField says how to show one field of a message: its name, and for a
// nested message its type; wire types say the rest.
type pbField struct {
	name string
	msg  string // the message type of a length-delimited field, "" for bytes/string
	kind string // how to show a fixed64: "double", "sfixed64", "fixed64"; a varint: "sint32", "varint"; packed: "packed-fixed64", "packed-double", "packed-varint"
}

// otlpSchema is opentelemetry-proto's metrics request, written here from
// the .proto files (v1.x) without the encoder's constants: field numbers,
// names, and types.
var otlpSchema = map[string]map[protowire.Number]pbField{
	"Request":         {1: {"resource_metrics", "ResourceMetrics", ""}},
	"ResourceMetrics": {1: {"resource", "Resource", ""}, 2: {"scope_metrics", "ScopeMetrics", ""}, 3: {"schema_url", "", ""}},
	"Resource":        {1: {"attributes", "KeyValue", ""}},
	"ScopeMetrics":    {1: {"scope", "Scope", ""}, 2: {"metrics", "Metric", ""}, 3: {"schema_url", "", ""}},
	"Scope":           {1: {"name", "", ""}, 2: {"version", "", ""}, 3: {"attributes", "KeyValue", ""}},
	"KeyValue":        {1: {"key", "", ""}, 2: {"value", "AnyValue", ""}},
	"AnyValue": {1: {"string_value", "", ""}, 2: {"bool_value", "", "varint"}, 3: {"int_value", "", "varint"},
		4: {"double_value", "", "double"}, 5: {"array_value", "List", ""}, 6: {"kvlist_value", "KVList", ""}, 7: {"bytes_value", "", ""}},
	"List":   {1: {"values", "AnyValue", ""}},
	"KVList": {1: {"values", "KeyValue", ""}},
	"Metric": {1: {"name", "", ""}, 2: {"description", "", ""}, 3: {"unit", "", ""},
		5: {"gauge", "Gauge", ""}, 7: {"sum", "Sum", ""}, 9: {"histogram", "Histogram", ""},
		10: {"exponential_histogram", "ExpHistogram", ""}, 11: {"summary", "Summary", ""}},
	"Gauge":        {1: {"data_points", "NumberDataPoint", ""}},
	"Sum":          {1: {"data_points", "NumberDataPoint", ""}, 2: {"aggregation_temporality", "", "varint"}, 3: {"is_monotonic", "", "varint"}},
	"Histogram":    {1: {"data_points", "HistogramDataPoint", ""}, 2: {"aggregation_temporality", "", "varint"}},
	"ExpHistogram": {1: {"data_points", "ExpHistogramDataPoint", ""}, 2: {"aggregation_temporality", "", "varint"}},
	"Summary":      {1: {"data_points", "SummaryDataPoint", ""}},
	"NumberDataPoint": {7: {"attributes", "KeyValue", ""}, 2: {"start_time_unix_nano", "", "fixed64"}, 3: {"time_unix_nano", "", "fixed64"},
		4: {"as_double", "", "double"}, 6: {"as_int", "", "sfixed64"}, 8: {"flags", "", "varint"}},
	"HistogramDataPoint": {9: {"attributes", "KeyValue", ""}, 2: {"start_time_unix_nano", "", "fixed64"}, 3: {"time_unix_nano", "", "fixed64"},
		4: {"count", "", "fixed64"}, 5: {"sum", "", "double"}, 6: {"bucket_counts", "", "packed-fixed64"}, 7: {"explicit_bounds", "", "packed-double"},
		10: {"flags", "", "varint"}, 11: {"min", "", "double"}, 12: {"max", "", "double"}},
	"ExpHistogramDataPoint": {1: {"attributes", "KeyValue", ""}, 2: {"start_time_unix_nano", "", "fixed64"}, 3: {"time_unix_nano", "", "fixed64"},
		4: {"count", "", "fixed64"}, 5: {"sum", "", "double"}, 6: {"scale", "", "sint32"}, 7: {"zero_count", "", "fixed64"},
		8: {"positive", "Buckets", ""}, 9: {"negative", "Buckets", ""}, 10: {"flags", "", "varint"},
		12: {"min", "", "double"}, 13: {"max", "", "double"}, 14: {"zero_threshold", "", "double"}},
	"Buckets": {1: {"offset", "", "sint32"}, 2: {"bucket_counts", "", "packed-varint"}},
	"SummaryDataPoint": {7: {"attributes", "KeyValue", ""}, 2: {"start_time_unix_nano", "", "fixed64"}, 3: {"time_unix_nano", "", "fixed64"},
		4: {"count", "", "fixed64"}, 5: {"sum", "", "double"}, 6: {"quantile_values", "Quantile", ""}, 8: {"flags", "", "varint"}},
	"Quantile": {1: {"quantile", "", "double"}, 2: {"value", "", "double"}},
}

// pbText shows b, a message of type msg, one field a line in wire order,
// nested messages in braces: what the test compares, so that the order
// of fields is checked too.
func pbText(t *testing.T, msg string, b []byte) string {
	t.Helper()
	var sb strings.Builder
	var walk func(msg string, b []byte, indent string)
	walk = func(msg string, b []byte, indent string) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				t.Fatalf("%s: bad tag: %v", msg, protowire.ParseError(n))
			}
			b = b[n:]
			f, ok := otlpSchema[msg][num]
			if !ok {
				t.Fatalf("%s has no field %d", msg, num)
			}
			fmt.Fprintf(&sb, "%s%s", indent, f.name)
			switch typ {
			case protowire.VarintType:
				v, n := protowire.ConsumeVarint(b)
				b = b[n:]
				if f.kind == "sint32" {
					fmt.Fprintf(&sb, ": %d\n", protowire.DecodeZigZag(v))
				} else {
					fmt.Fprintf(&sb, ": %d\n", v)
				}
			case protowire.Fixed64Type:
				v, n := protowire.ConsumeFixed64(b)
				b = b[n:]
				switch f.kind {
				case "double":
					fmt.Fprintf(&sb, ": %g\n", math.Float64frombits(v))
				case "sfixed64":
					fmt.Fprintf(&sb, ": %d\n", int64(v))
				default:
					fmt.Fprintf(&sb, ": %d\n", v)
				}
			case protowire.BytesType:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					t.Fatalf("%s.%s: %v", msg, f.name, protowire.ParseError(n))
				}
				b = b[n:]
				switch {
				case f.msg != "":
					sb.WriteString(" {\n")
					walk(f.msg, v, indent+"  ")
					sb.WriteString(indent + "}\n")
				case strings.HasPrefix(f.kind, "packed-"):
					var vals []string
					for len(v) > 0 {
						switch f.kind {
						case "packed-varint":
							x, n := protowire.ConsumeVarint(v)
							v = v[n:]
							vals = append(vals, fmt.Sprint(x))
						default:
							x, n := protowire.ConsumeFixed64(v)
							v = v[n:]
							if f.kind == "packed-double" {
								vals = append(vals, fmt.Sprint(math.Float64frombits(x)))
							} else {
								vals = append(vals, fmt.Sprint(x))
							}
						}
					}
					fmt.Fprintf(&sb, ": [%s]\n", strings.Join(vals, " "))
				default:
					fmt.Fprintf(&sb, ": %q\n", v)
				}
			default:
				t.Fatalf("%s.%s: wire type %d", msg, f.name, typ)
			}
		}
	}
	walk(msg, b, "")
	return sb.String()
}

// readMetrics reads n otlp_metrics records from ss: each one's fields
// checked (protocol 0, version v0.19.00, the buffer's __rel_loc) and its
// buffer returned.
func readMetrics(t *testing.T, ss *subsys.Session, n int) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out [][]byte
	buf := make([]byte, 1<<20)
	for len(out) < n {
		recs, err := ss.Read(ctx, buf, nil)
		if err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		for _, r := range recs {
			if r.Event == nil {
				continue
			}
			p := r.Raw[8:] // after the common fields
			if len(p) < 16 {
				t.Fatalf("a record of %d bytes", len(p))
			}
			proto := binary.LittleEndian.Uint32(p)
			version := string(p[4:12])
			loc := binary.LittleEndian.Uint32(p[12:])
			size, off := int(loc>>16), int(loc&0xffff)
			if proto != 0 || version != "v0.19.00" || off != 0 || 16+size > len(p) {
				t.Fatalf("record: protocol %d, version %q, rel_loc size %d offset %d, %d bytes", proto, version, size, off, len(p))
			}
			out = append(out, append([]byte(nil), p[16:16+size]...))
		}
	}
	return out
}

// newMetricExporter is NewMetricExporter on e's File, shut down when the
// test ends.
func newMetricExporter(t testing.TB, e *env) *ehotel.MetricExporter {
	t.Helper()
	x := ehotel.NewMetricExporter(&ehotel.Options{File: e.f})
	if err := x.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Shutdown(context.Background()) })
	return x
}

var (
	mStart = time.Unix(1_704_112_490, 0)
	mTime  = time.Unix(1_704_112_496, 789_000_000)
)

// goldenMetrics is one of each aggregation the Rust exporter writes, with
// two points for the sum.
func goldenMetrics() *metricdata.ResourceMetrics {
	a := attribute.NewSet(attribute.String("path", "/a"))
	b := attribute.NewSet(attribute.String("path", "/b"), attribute.Bool("cached", true), attribute.StringSlice("tags", []string{"x", "y"}),
		attribute.Map("m", attribute.Int("n", 0)))
	return &metricdata.ResourceMetrics{
		Resource: resource.NewSchemaless(attribute.String("service.name", "checkout")),
		ScopeMetrics: []metricdata.ScopeMetrics{{
			Scope: instrumentation.Scope{Name: "shop", Version: "1.2"},
			Metrics: []metricdata.Metrics{
				{Name: "requests", Description: "served", Unit: "1", Data: metricdata.Sum[int64]{
					Temporality: metricdata.DeltaTemporality, IsMonotonic: true,
					DataPoints: []metricdata.DataPoint[int64]{
						{Attributes: a, StartTime: mStart, Time: mTime, Value: 3},
						{Attributes: b, StartTime: mStart, Time: mTime, Value: -1},
					}}},
				{Name: "temperature", Unit: "Cel", Data: metricdata.Gauge[float64]{
					DataPoints: []metricdata.DataPoint[float64]{{Time: mTime, Value: 21.5}}}},
				{Name: "latency", Unit: "s", Data: metricdata.Histogram[float64]{
					Temporality: metricdata.DeltaTemporality,
					DataPoints: []metricdata.HistogramDataPoint[float64]{{Attributes: a, StartTime: mStart, Time: mTime,
						Count: 3, Bounds: []float64{0.1, 1}, BucketCounts: []uint64{1, 2, 0},
						Min: metricdata.NewExtrema(0.05), Max: metricdata.NewExtrema(0.7), Sum: 1.25}}}},
				{Name: "size", Unit: "By", Data: metricdata.ExponentialHistogram[int64]{
					Temporality: metricdata.DeltaTemporality,
					DataPoints: []metricdata.ExponentialHistogramDataPoint[int64]{{StartTime: mStart, Time: mTime,
						Count: 5, Sum: 40, Scale: 2, ZeroCount: 1,
						PositiveBucket: metricdata.ExponentialBucket{Offset: -1, Counts: []uint64{1, 3}},
						Min:            metricdata.NewExtrema[int64](0), Max: metricdata.NewExtrema[int64](20)}}}},
			},
		}},
	}
}

// TestMetricsGolden exports one of each aggregation and reads back what
// the Rust metrics exporter writes: an otlp_metrics record per data point
// (protocol 0, version v0.19.00, the buffer as __rel_loc), each buffer an
// ExportMetricsServiceRequest of the resource, the scope, the metric and
// that point, fields in the .proto's declaration order (prost's).
func TestMetricsGolden(t *testing.T) {
	e := newEnv(t)
	x := newMetricExporter(t, e)
	ss := e.attach(t, "user_events:otlp_metrics", x.Event())
	if err := x.Export(context.Background(), goldenMetrics()); err != nil {
		t.Fatal(err)
	}
	const head = "resource_metrics {\n  resource {\n    attributes {\n      key: \"service.name\"\n      value {\n        string_value: \"checkout\"\n      }\n    }\n  }\n" +
		"  scope_metrics {\n    scope {\n      name: \"shop\"\n      version: \"1.2\"\n    }\n    metrics {\n"
	const tail = "    }\n  }\n}\n"
	attrA := "          attributes {\n            key: \"path\"\n            value {\n              string_value: \"/a\"\n            }\n          }\n"
	times := "          start_time_unix_nano: 1704112490000000000\n          time_unix_nano: 1704112496789000000\n"
	want := []string{
		"      name: \"requests\"\n      description: \"served\"\n      unit: \"1\"\n      sum {\n        data_points {\n" + attrA + times +
			"          as_int: 3\n        }\n        aggregation_temporality: 1\n        is_monotonic: 1\n      }\n",
		"      name: \"requests\"\n      description: \"served\"\n      unit: \"1\"\n      sum {\n        data_points {\n" +
			"          attributes {\n            key: \"cached\"\n            value {\n              bool_value: 1\n            }\n          }\n" +
			"          attributes {\n            key: \"m\"\n            value {\n              kvlist_value {\n                values {\n                  key: \"n\"\n                  value {\n                    int_value: 0\n                  }\n                }\n              }\n            }\n          }\n" +
			"          attributes {\n            key: \"path\"\n            value {\n              string_value: \"/b\"\n            }\n          }\n" +
			"          attributes {\n            key: \"tags\"\n            value {\n              array_value {\n                values {\n                  string_value: \"x\"\n                }\n                values {\n                  string_value: \"y\"\n                }\n              }\n            }\n          }\n" + times +
			"          as_int: -1\n        }\n        aggregation_temporality: 1\n        is_monotonic: 1\n      }\n",
		"      name: \"temperature\"\n      unit: \"Cel\"\n      gauge {\n        data_points {\n          time_unix_nano: 1704112496789000000\n          as_double: 21.5\n        }\n      }\n",
		"      name: \"latency\"\n      unit: \"s\"\n      histogram {\n        data_points {\n" + attrA + times +
			"          count: 3\n          sum: 1.25\n          bucket_counts: [1 2 0]\n          explicit_bounds: [0.1 1]\n          min: 0.05\n          max: 0.7\n        }\n        aggregation_temporality: 1\n      }\n",
		"      name: \"size\"\n      unit: \"By\"\n      exponential_histogram {\n        data_points {\n" + times +
			"          count: 5\n          sum: 40\n          scale: 2\n          zero_count: 1\n          positive {\n            offset: -1\n            bucket_counts: [1 3]\n          }\n          negative {\n          }\n" +
			"          min: 0\n          max: 20\n        }\n        aggregation_temporality: 1\n      }\n",
	}
	for i, buf := range readMetrics(t, ss, len(want)) {
		if got := pbText(t, "Request", buf); got != head+want[i]+tail {
			t.Errorf("data point %d:\n got\n%s\nwant\n%s", i, got, head+want[i]+tail)
		}
	}
}

// TestMetricsFromSDK: a counter and a histogram of a real MeterProvider,
// pushed by a PeriodicReader's ForceFlush, arrive as otlp_metrics records
// with delta temporality.
func TestMetricsFromSDK(t *testing.T) {
	e := newEnv(t)
	x := newMetricExporter(t, e)
	ss := e.attach(t, "user_events:otlp_metrics", x.Event())
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(x, sdkmetric.WithInterval(time.Hour))))
	defer mp.Shutdown(context.Background())
	m := mp.Meter("shop")
	c, _ := m.Int64Counter("orders")
	c.Add(context.Background(), 2)
	c.Add(context.Background(), 5)
	if err := mp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := pbText(t, "Request", readMetrics(t, ss, 1)[0])
	for _, want := range []string{`name: "orders"`, "as_int: 7", "aggregation_temporality: 1", "is_monotonic: 1", `name: "shop"`} {
		if !strings.Contains(got, want) {
			t.Errorf("no %s in\n%s", want, got)
		}
	}
}

// TestMetricsNotWritten: while nobody listens Export builds nothing and
// allocates nothing; a data point over 65360 bytes is not written and is
// counted in the error, the others written.
func TestMetricsNotWritten(t *testing.T) {
	e := newEnv(t)
	x := newMetricExporter(t, e)
	rm := goldenMetrics()
	if n := testing.AllocsPerRun(100, func() { x.Export(context.Background(), rm) }); n != 0 {
		t.Errorf("Export while disabled: %v allocations", n)
	}
	ss := e.attach(t, "user_events:otlp_metrics", x.Event())
	big := attribute.NewSet(attribute.String("blob", strings.Repeat("x", 70_000)))
	rm.ScopeMetrics[0].Metrics = []metricdata.Metrics{{Name: "big", Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{
		{Attributes: big, Value: 1}, {Value: 2}}}}}
	err := x.Export(context.Background(), rm)
	if err == nil || !strings.Contains(err.Error(), "1 metric data points not written") {
		t.Errorf("Export of a point over the limit: %v", err)
	}
	if got := pbText(t, "Request", readMetrics(t, ss, 1)[0]); !strings.Contains(got, "as_int: 2") {
		t.Errorf("the point that fits was not written first:\n%s", got)
	}
	x.Shutdown(context.Background())
	if err := x.Export(context.Background(), rm); err == nil {
		t.Error("Export after Shutdown: no error")
	}
}
