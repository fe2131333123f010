package ehotel_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehotel"
)

var (
	testTraceID = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	testSpanID  = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	// 2024-01-01T12:34:56.789Z, the Rust exporter's own test of its time
	// format (format_event_time_uses_z_for_utc).
	testTime = time.UnixMilli(1_704_112_496_789)
)

// emitGolden logs the two records of the golden tests through an SDK
// LoggerProvider over p: one with every field the layout has, one with
// the fewest.
func emitGolden(t *testing.T, p sdklog.Processor) {
	t.Helper()
	res := resource.NewSchemaless(
		attribute.String("service.name", "checkout"),
		attribute.String("service.instance.id", "pod-7"),
		attribute.String("deployment", "prod"),
		attribute.String("host.name", "not-exported"),
	)
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(p))
	t.Cleanup(func() { lp.Shutdown(context.Background()) })
	logger := lp.Logger("golden")

	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: testTraceID, SpanID: testSpanID, TraceFlags: trace.FlagsSampled,
	}))
	var full log.Record
	full.SetTimestamp(testTime)
	full.SetSeverity(log.SeverityWarn2)
	full.SetSeverityText("WARN2")
	full.SetBody(attribute.StringValue("disk almost full"))
	full.SetEventName("disk.alert")
	full.AddAttributes(
		attribute.String("path", "/var"),
		attribute.Int64("event_id", 42),
		attribute.Bool("retry", true),
		attribute.Float64("ratio", 0.97),
		attribute.Int64("free", 1024),
	)
	logger.Emit(ctx, full)

	var bare log.Record
	bare.SetTimestamp(time.Unix(1_704_112_496, 0))
	bare.SetSeverity(log.SeverityInfo)
	logger.Emit(context.Background(), bare)
}

// TestGoldenJSON logs records through the SDK and this package's processor
// and decodes the events with eventheader.Decode into Microsoft's decoder's
// JSON: the Rust exporter's layout (export_log_data, build_part_a in
// opentelemetry-user-events-logs/src/logs/exporter.rs) field by field —
// __csver__, PartA, PartC, then PartB; an int64 event_id in PartB, not
// PartC; service.name and service.instance.id in PartA; only the opted-in
// resource attribute in PartC; no trace ids without a span.
func TestGoldenJSON(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "GoldenProv", "deployment", "service.name")
	ss := e.attach(t, "user_events:GoldenProv_*", p.Exporter().Tracepoint(log.SeverityInfo), p.Exporter().Tracepoint(log.SeverityWarn))
	emitGolden(t, p)
	want := []got{
		{tracepoint: "GoldenProv_L3K1", json: `{ "n": "GoldenProv:Log", "__csver__": 1024, ` +
			`"PartA": { "time": "2024-01-01T12:34:56.789Z", "ext_dt_traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "ext_dt_spanId": "00f067aa0ba902b7", "ext_cloud_role": "checkout", "ext_cloud_roleInstance": "pod-7" }, ` +
			`"PartC": { "path": "/var", "retry": true, "ratio": 0.97, "free": 1024, "deployment": "prod" }, ` +
			`"PartB": { "_typeName": "Log", "body": "disk almost full", "severityNumber": 14, "severityText": "WARN2", "eventId": 42, "name": "disk.alert" }, ` +
			`"meta": { "level": 3, "keyword": "0x1" } }`},
		{tracepoint: "GoldenProv_L4K1", json: `{ "n": "GoldenProv:Log", "__csver__": 1024, ` +
			`"PartA": { "time": "2024-01-01T12:34:56Z", "ext_cloud_role": "checkout", "ext_cloud_roleInstance": "pod-7" }, ` +
			`"PartC": { "deployment": "prod" }, ` +
			`"PartB": { "_typeName": "Log", "severityNumber": 9 }, ` +
			`"meta": { "level": 4, "keyword": "0x1" } }`},
	}
	for i, g := range readBack(t, ss, len(want)) {
		if g.tracepoint != want[i].tracepoint || g.json != want[i].json {
			t.Errorf("record %d:\n got %s %s\nwant %s %s", i, g.tracepoint, g.json, want[i].tracepoint, want[i].json)
		}
	}
}

// rustEvent builds an event the way LinuxTracepoints-Rust's
// eventheader_dynamic EventBuilder does (eventheader_dynamic/src/builder.rs:
// reset, raw_add_meta, add_value, add_str, add_struct_with_bookmark; the
// headers of eventheader/src/_internal.rs write_eventheader), independently
// of package eventheader's Builder.
type rustEvent struct{ meta, data []byte }

func (r *rustEvent) reset(name string) { r.meta = append([]byte(name), 0); r.data = nil }

// rawAddMeta is raw_add_meta: the name, NUL, the encoding — with 0x80 and
// the format byte after it when the format is not 0 — no tags here.
func (r *rustEvent) rawAddMeta(name string, enc, format byte) {
	r.meta = append(append(r.meta, name...), 0)
	if format != 0 {
		r.meta = append(r.meta, 0x80|enc, format)
	} else {
		r.meta = append(r.meta, enc)
	}
}

const (
	rsStruct      = 1  // FieldEncoding::Struct
	rsValue8      = 2  // Value8: bool
	rsValue16     = 3  // Value16: i16
	rsValue32     = 4  // Value32: u32
	rsValue64     = 5  // Value64: i64, f64
	rsStr8        = 10 // StringLength16Char8: add_str of a &str
	rsUnsignedInt = 1  // FieldFormat::UnsignedInt
	rsSignedInt   = 2
	rsBoolean     = 7
	rsFloat       = 8
)

func (r *rustEvent) addValue(name string, enc, format byte, le []byte) {
	r.rawAddMeta(name, enc, format)
	r.data = append(r.data, le...)
}
func (r *rustEvent) addStr(name, s string) {
	r.rawAddMeta(name, rsStr8, 0)
	r.data = binary.LittleEndian.AppendUint16(r.data, uint16(len(s)))
	r.data = append(r.data, s...)
}
func (r *rustEvent) addStruct(name string, n byte) { r.rawAddMeta(name, rsStruct, n) }
func (r *rustEvent) addI64(name string, v int64) {
	r.addValue(name, rsValue64, rsSignedInt, binary.LittleEndian.AppendUint64(nil, uint64(v)))
}

// bytes is write_eventheader's event without the write index: the header
// {flags DefaultWithExtension (0x07 on a little-endian 64-bit host),
// version 0, id 0, tag 0, opcode Info (0), level}, the metadata extension
// {size, kind Metadata (1), no chain}, the metadata, the data.
func (r *rustEvent) bytes(level byte) []byte {
	b := []byte{0x07, 0, 0, 0, 0, 0, 0, level}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.meta)))
	b = binary.LittleEndian.AppendUint16(b, 1)
	return append(append(b, r.meta...), r.data...)
}

// TestBytesAsRust compares the events byte for byte with what the Rust
// exporter's calls (export_log_data and build_part_a in
// opentelemetry-user-events-logs/src/logs/exporter.rs) make
// eventheader_dynamic write, built here without package eventheader.
func TestBytesAsRust(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "BytesProv", "deployment")
	ss := e.attach(t, "user_events:BytesProv_*", p.Exporter().Tracepoint(log.SeverityInfo), p.Exporter().Tracepoint(log.SeverityWarn))
	emitGolden(t, p)

	var full rustEvent
	full.reset("Log")
	full.addValue("__csver__", rsValue32, rsUnsignedInt, []byte{0x00, 0x04, 0, 0})
	full.addStruct("PartA", 5)
	full.addStr("time", "2024-01-01T12:34:56.789Z")
	full.addStr("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736")
	full.addStr("ext_dt_spanId", "00f067aa0ba902b7")
	full.addStr("ext_cloud_role", "checkout")
	full.addStr("ext_cloud_roleInstance", "pod-7")
	full.addStruct("PartC", 5)
	full.addStr("path", "/var")
	full.addValue("retry", rsValue8, rsBoolean, []byte{1})
	full.addValue("ratio", rsValue64, rsFloat, binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.97)))
	full.addI64("free", 1024)
	full.addStr("deployment", "prod")
	full.addStruct("PartB", 6)
	full.addStr("_typeName", "Log")
	full.addStr("body", "disk almost full")
	full.addValue("severityNumber", rsValue16, rsSignedInt, []byte{14, 0})
	full.addStr("severityText", "WARN2")
	full.addI64("eventId", 42)
	full.addStr("name", "disk.alert")

	var bare rustEvent
	bare.reset("Log")
	bare.addValue("__csver__", rsValue32, rsUnsignedInt, []byte{0x00, 0x04, 0, 0})
	bare.addStruct("PartA", 3)
	bare.addStr("time", "2024-01-01T12:34:56Z")
	bare.addStr("ext_cloud_role", "checkout")
	bare.addStr("ext_cloud_roleInstance", "pod-7")
	bare.addStruct("PartC", 1)
	bare.addStr("deployment", "prod")
	bare.addStruct("PartB", 2)
	bare.addStr("_typeName", "Log")
	bare.addValue("severityNumber", rsValue16, rsSignedInt, []byte{9, 0})

	want := [][]byte{full.bytes(3), bare.bytes(4)}
	for i, g := range readBack(t, ss, 2) {
		if !bytes.HasPrefix(g.raw, want[i]) || len(g.raw)-len(want[i]) >= 8 || strings.Trim(string(g.raw[len(want[i]):]), "\x00") != "" {
			t.Errorf("record %d:\n got % x\nwant % x (then perf's zero padding)", i, g.raw, want[i])
		}
	}
}

// TestValueKinds writes every attribute.Value kind as an attribute and as
// the body and checks each field's encoding, format and value.
func TestValueKinds(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "KindsProv")
	ss := e.attach(t, "user_events:KindsProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	type want struct {
		enc    eventheader.Encoding
		format eventheader.Format
		json   string // the field's JSON as eventheader shows it
		text   string // for StringJSON: the JSON held, checked with encoding/json
	}
	cases := []struct {
		name string
		v    attribute.Value
		want want
	}{
		{"bool", attribute.BoolValue(true), want{eventheader.EncodingValue8, eventheader.FormatBoolean, `true`, ""}},
		{"int64", attribute.Int64Value(-7), want{eventheader.EncodingValue64, eventheader.FormatSignedInt, `-7`, ""}},
		{"float64", attribute.Float64Value(2.5), want{eventheader.EncodingValue64, eventheader.FormatFloat, `2.5`, ""}},
		{"string", attribute.StringValue("héllo \"q\""), want{eventheader.EncodingStringLength16Char8, eventheader.FormatDefault, `"héllo \"q\""`, ""}},
		{"bytes", attribute.ByteSliceValue([]byte{0xde, 0xad, 0xbe, 0xef}), want{eventheader.EncodingBinaryLength16Char8, eventheader.FormatDefault, `"de ad be ef"`, ""}},
		{"boolslice", attribute.BoolSliceValue([]bool{true, false}), want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `[true,false]`}},
		{"int64slice", attribute.Int64SliceValue([]int64{1, -2}), want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `[1,-2]`}},
		{"float64slice", attribute.Float64SliceValue([]float64{1.5, math.Inf(1)}), want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `[1.5,"Infinity"]`}},
		{"stringslice", attribute.StringSliceValue([]string{"a", "b\n"}), want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `["a","b\n"]`}},
		{"slice", attribute.SliceValue(attribute.Int64Value(1), attribute.StringValue("x"), attribute.ByteSliceValue([]byte{1, 2}), attribute.Value{}),
			want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `[1,"x","AQI=",null]`}},
		{"map", attribute.MapValue(attribute.Int64("a", 1), attribute.String("b", "v"), attribute.Slice("c", attribute.BoolValue(false))),
			want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `{"a":1,"b":"v","c":[false]}`}},
		{"empty", attribute.Value{}, want{eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, "", `null`}},
	}
	for _, c := range cases {
		for _, asBody := range []bool{false, true} {
			var lr log.Record
			lr.SetSeverity(log.SeverityInfo)
			lr.SetTimestamp(testTime)
			field := c.name
			if asBody {
				if c.v.Type() == attribute.EMPTY {
					continue // an empty body is no body
				}
				lr.SetBody(c.v)
				field = "body"
			} else {
				lr.AddAttributes(attribute.KeyValue{Key: attribute.Key(c.name), Value: c.v})
			}
			r := sdkRecord(t, context.Background(), lr)
			if err := p.OnEmit(context.Background(), &r); err != nil {
				t.Fatal(err)
			}
			g := readBack(t, ss, 1)[0]
			ev, err := eventheader.Decode(g.tracepoint, g.raw)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			fields := ev.Fields()
			for fields.Next() {
				it := fields.Item()
				if it.Kind != eventheader.ItemValue || string(it.FieldName()) != field {
					continue
				}
				found = true
				if it.Encoding != c.want.enc || it.Format != c.want.format {
					t.Errorf("%s (body %v): encoding %v format %v, want %v %v", c.name, asBody, it.Encoding, it.Format, c.want.enc, c.want.format)
				}
				if c.want.text != "" {
					if string(it.Value) != c.want.text || !json.Valid(it.Value) {
						t.Errorf("%s (body %v): JSON %s, want %s", c.name, asBody, it.Value, c.want.text)
					}
				} else if js := string(it.AppendJSON(nil)); js != c.want.json {
					t.Errorf("%s (body %v): %s, want %s", c.name, asBody, js, c.want.json)
				}
			}
			if err := fields.Err(); err != nil {
				t.Fatal(err)
			}
			if !found {
				t.Errorf("%s (body %v): no field %q in %s", c.name, asBody, field, g.json)
			}
		}
	}
}

// TestLevels checks the severity → level map and the tracepoints' names,
// registered as soon as the processor is made (as Rust's register_events).
func TestLevels(t *testing.T) {
	cases := []struct {
		lo, hi log.Severity
		level  eventheader.Level
	}{
		{log.SeverityTrace1, log.SeverityDebug4, eventheader.LevelVerbose},
		{log.SeverityInfo1, log.SeverityInfo4, eventheader.LevelInformation},
		{log.SeverityWarn1, log.SeverityWarn4, eventheader.LevelWarning},
		{log.SeverityError1, log.SeverityError4, eventheader.LevelError},
		{log.SeverityFatal1, log.SeverityFatal4, eventheader.LevelCriticalError},
	}
	if log.SeverityTrace1 != 1 || log.SeverityFatal4 != 24 {
		t.Fatal("the OpenTelemetry severity numbers are not 1..24")
	}
	for _, c := range cases {
		for s := c.lo; s <= c.hi; s++ {
			if got := ehotel.Level(s); got != c.level {
				t.Errorf("Level(%v) = %d, want %d", s, got, c.level)
			}
		}
	}
	for _, s := range []log.Severity{0, -1, 25, 100} {
		if got := ehotel.Level(s); got != eventheader.LevelInvalid {
			t.Errorf("Level(%d) = %d, want 0", s, got)
		}
	}

	e := newEnv(t)
	p := newProcessor(t, e, "LevelProv")
	status := string(e.sys.AppendStatus(nil))
	for l := 1; l <= 5; l++ {
		name := "LevelProv_L" + string(rune('0'+l)) + "K1"
		if !strings.Contains(status, name) {
			t.Errorf("%s is not registered after NewProcessor:\n%s", name, status)
		}
		tp := p.Exporter().Tracepoint(cases[5-l].lo)
		if tp.Name() != name || tp.Keyword() != 1 {
			t.Errorf("tracepoint %s keyword %d, want %s keyword 1", tp.Name(), tp.Keyword(), name)
		}
	}
	if p.Exporter().Tracepoint(0) != nil {
		t.Error("a tracepoint for severity 0")
	}
}

// TestTime checks the time format against chrono's
// to_rfc3339_opts(SecondsFormat::AutoSi, true) (chrono
// src/format/formatting.rs write_rfc3339): the fewest of 0, 3, 6 or 9
// fractional digits, years outside 0..9999 signed.
func TestTime(t *testing.T) {
	cases := []struct {
		t    time.Time
		want string
	}{
		{testTime, "2024-01-01T12:34:56.789Z"},
		{time.Unix(1_704_112_496, 0), "2024-01-01T12:34:56Z"},
		{time.Unix(1_704_112_496, 120_000), "2024-01-01T12:34:56.000120Z"},
		{time.Unix(1_704_112_496, 5), "2024-01-01T12:34:56.000000005Z"},
		{time.Unix(1_704_112_496, 100_000_000), "2024-01-01T12:34:56.100Z"},
		{time.Date(2024, 1, 1, 13, 34, 56, 0, time.FixedZone("CET", 3600)), "2024-01-01T12:34:56Z"},
		{time.Date(10000, 1, 2, 3, 4, 5, 0, time.UTC), "+10000-01-02T03:04:05Z"},
		{time.Date(-1, 1, 2, 3, 4, 5, 0, time.UTC), "-0001-01-02T03:04:05Z"},
		{time.Date(12, 1, 2, 3, 4, 5, 0, time.UTC), "0012-01-02T03:04:05Z"},
	}
	e := newEnv(t)
	p := newProcessor(t, e, "TimeProv")
	ss := e.attach(t, "user_events:TimeProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	for _, c := range cases {
		var r sdklog.Record
		r.SetSeverity(log.SeverityInfo)
		r.SetTimestamp(c.t)
		if err := p.OnEmit(context.Background(), &r); err != nil {
			t.Fatal(err)
		}
		g := readBack(t, ss, 1)[0]
		if want := `"time": "` + c.want + `"`; !strings.Contains(g.json, want) {
			t.Errorf("%v: %s, want %s", c.t, g.json, want)
		}
	}
	// Without a timestamp, the observed one.
	var r sdklog.Record
	r.SetSeverity(log.SeverityInfo)
	r.SetObservedTimestamp(testTime)
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; !strings.Contains(g.json, `"time": "2024-01-01T12:34:56.789Z"`) {
		t.Errorf("observed timestamp: %s", g.json)
	}
}

// TestPartCLimit: a struct holds at most 127 fields; more attributes keep
// the first 127, and the event decodes.
func TestPartCLimit(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "LimitProv")
	ss := e.attach(t, "user_events:LimitProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	var lr log.Record
	lr.SetSeverity(log.SeverityInfo)
	for i := range 130 {
		lr.AddAttributes(attribute.Int("a"+string(rune('A'+i/26))+string(rune('a'+i%26)), i))
	}
	r := sdkRecord(t, context.Background(), lr, sdklog.WithAttributeCountLimit(-1))
	if r.AttributesLen() != 130 {
		t.Fatalf("%d attributes", r.AttributesLen())
	}
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	g := readBack(t, ss, 1)[0]
	if !strings.Contains(g.json, `"aEw": 126 }, "PartB"`) || strings.Contains(g.json, `"aEx"`) {
		t.Errorf("PartC is not the first 127 attributes: %s", g.json)
	}
}

// TestTooLarge: an event over the Rust builder's 65467 bytes of metadata
// and data is not written, and is ERANGE.
func TestTooLarge(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "LargeProv")
	ss := e.attach(t, "user_events:LargeProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	var r sdklog.Record
	r.SetSeverity(log.SeverityInfo)
	r.SetBody(attribute.StringValue(strings.Repeat("x", 65400)))
	if err := p.OnEmit(context.Background(), &r); !errors.Is(err, unix.ERANGE) {
		t.Fatalf("OnEmit of a 65400-byte body: %v, want ERANGE", err)
	}
	// What comes next is the next event read: the large one was not written.
	r.SetBody(attribute.StringValue("small"))
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; !strings.Contains(g.json, `"body": "small"`) {
		t.Errorf("read %s", g.json)
	}
}

// TestSeverityRequired: a record without a valid severity number is not
// written (Rust: "Severity number is required"), an error while anything
// listens, nothing otherwise.
func TestSeverityRequired(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "SevProv")
	var r sdklog.Record
	r.SetBody(attribute.StringValue("no severity"))
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Errorf("nobody listening: %v", err)
	}
	ss := e.attach(t, "user_events:SevProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	for _, s := range []log.Severity{0, 25, -3} {
		r.SetSeverity(s)
		if err := p.OnEmit(context.Background(), &r); !errors.Is(err, unix.EINVAL) {
			t.Errorf("severity %d: %v, want EINVAL", s, err)
		}
	}
	r.SetSeverity(log.SeverityInfo)
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; !strings.Contains(g.json, `"severityNumber": 9`) {
		t.Errorf("read %s", g.json)
	}
}

// TestFieldNames: the format reserves ';' in a field name for its
// attributes and ends it at a NUL: keys holding them are written with '_'.
func TestFieldNames(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "NamesProv")
	ss := e.attach(t, "user_events:NamesProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	var lr log.Record
	lr.SetSeverity(log.SeverityInfo)
	lr.AddAttributes(attribute.Int("a;tag=1", 1), attribute.Int("x\x00y", 2), attribute.Int("plain", 3))
	r := sdkRecord(t, context.Background(), lr)
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; !strings.Contains(g.json, `"PartC": { "a_tag=1": 1, "x_y": 2, "plain": 3 }`) {
		t.Errorf("read %s", g.json)
	}
}
