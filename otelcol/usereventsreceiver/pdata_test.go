package usereventsreceiver

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/perfdata"
)

// The events the tests map: a plain user event, an EventHeader
// tracepoint, and an event whose format is not known.
type testEvents struct {
	plain, eh, raw *perfdata.Event
	plainDef       *eventdef.Event
}

func newTestEvents(tb testing.TB) *testEvents {
	tb.Helper()
	te := &testEvents{}
	var err error
	if te.plainDef, err = eventdef.Parse("x u32 a; __rel_loc char[] msg; char[4] c; __data_loc u8[] blob; s64 n; u64 u"); err != nil {
		tb.Fatal(err)
	}
	if te.plain, err = perfdata.NewEvent("user_events", "x", []byte(te.plainDef.Format("x", 1))); err != nil {
		tb.Fatal(err)
	}
	ehDef, err := eventdef.Parse("P_L4K1 " + eventheader.CommandTypes)
	if err != nil {
		tb.Fatal(err)
	}
	if te.eh, err = perfdata.NewEvent("user_events", "P_L4K1", []byte(ehDef.Format("P_L4K1", 2))); err != nil {
		tb.Fatal(err)
	}
	if te.raw, err = perfdata.NewEvent("user_events", "noformat", nil); err != nil {
		tb.Fatal(err)
	}
	return te
}

// ehSamples are EventHeader events of every value encoding and format,
// structs, arrays and activity ids, and Common Schema logs and spans, as
// records of te.eh (the 8 bytes of common fields first).
func ehSamples(rng *rand.Rand) [][]byte {
	var out [][]byte
	var b eventheader.Builder
	add := func() {
		ev, err := b.AppendEvent(nil)
		if err != nil {
			panic(err)
		}
		out = append(out, append(make([]byte, 8), ev...))
	}
	value := func(n int) []byte {
		v := make([]byte, n)
		for i := range v {
			v[i] = []byte{0, 1, 0xff, 'a', '"', '\\', 0xc3, 0xa9, 0x80, byte(rng.Uint32())}[rng.IntN(10)]
		}
		return v
	}
	for enc := eventheader.EncodingValue8; enc < eventheader.EncodingMax; enc++ {
		for f := eventheader.FormatDefault; f <= eventheader.FormatIPAddressObsolete; f++ {
			b.Reset("E", eventheader.Header{Level: 4})
			b.Field("v", enc, f, 0)
			if sz := enc.FixedSize(); sz > 0 {
				b.AppendRaw(value(sz))
			} else {
				cs := enc.CharSize()
				v := value(rng.IntN(5) * cs)
				switch enc {
				case eventheader.EncodingZStringChar8, eventheader.EncodingZStringChar16, eventheader.EncodingZStringChar32:
					for i := 0; i+cs <= len(v); i += cs {
						v[i] |= 1 // no NUL unit inside
					}
					b.AppendRaw(append(v, make([]byte, cs)...))
				default:
					b.AppendCount(uint16(len(v) / cs))
					b.AppendRaw(v)
				}
			}
			add()
		}
	}
	act := [16]byte{1, 2, 3}
	for k := range 20 {
		b.Reset("Request", eventheader.Header{Level: 4, Opcode: eventheader.Opcode(k % 3), ID: uint16(k % 2), Version: 1, Tag: uint16(k % 4)})
		if k%2 == 0 {
			b.SetActivityID(&act, &act)
		}
		b.StructField("pt", 2, 0)
		b.AddInt32("x", int32(rng.Uint32()), 0)
		b.ArrayField("arr", eventheader.EncodingValue16, eventheader.FormatSignedInt, 0, 0)
		b.AppendCount(3)
		b.AppendValue16(uint16(rng.Uint32()))
		b.AppendValue16(2)
		b.AppendValue16(3)
		b.AddString("path", fmt.Sprint("/p/", k), eventheader.FormatDefault, 0)
		b.AddFloat64("ratio", rng.NormFloat64(), 0)
		b.AddFloat64("nan", math.NaN(), 0)
		b.AddBool("ok", k%2 == 0, 0)
		b.AddUint64("big", rng.Uint64(), eventheader.FormatDefault, 0)
		b.AddUint32("err", 2, eventheader.FormatErrno, 0)
		add()
	}
	for k := range 12 {
		typ := []string{"Log", "Span", "Other"}[k%3]
		b.Reset(typ, eventheader.Header{Level: 4})
		b.AddUint32("__csver__", 0x400, eventheader.FormatUnsignedInt, 0)
		b.StructField("PartA", 5, 0)
		b.AddString("time", []string{"2024-01-01T12:34:56.789Z", "2024-01-01T12:34:56Z"}[k/3%2], eventheader.FormatDefault, 0)
		b.AddString("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736", eventheader.FormatDefault, 0)
		b.AddString("ext_dt_spanId", "00f067aa0ba902b7", eventheader.FormatDefault, 0)
		b.AddString("ext_cloud_role", fmt.Sprint("svc", k%2), eventheader.FormatDefault, 0)
		b.AddString("ext_cloud_roleInstance", "pod-1", eventheader.FormatDefault, 0)
		b.StructField("PartC", 3, 0)
		b.AddString("tags", `["a",2,{"k":null},1.5]`, eventheader.FormatStringJSON, 0)
		b.AddInt64("n", int64(k), 0)
		b.StructField("nested", 1, 0)
		b.AddBool("b", true, 0)
		if typ == "Span" {
			b.StructField("PartB", 8, 0)
			b.AddString("_typeName", "Span", eventheader.FormatDefault, 0)
			b.AddString("name", "GET /x", eventheader.FormatDefault, 0)
			b.AddString("startTime", "2024-01-01T12:34:56.700Z", eventheader.FormatDefault, 0)
			b.AddBool("success", k%2 == 0, 0)
			b.AddUint8("kind", uint8(k%5), eventheader.FormatDefault, 0)
			b.AddString("parentId", "00f067aa0ba902b8", eventheader.FormatDefault, 0)
			b.AddString("links", `[{"toTraceId":"4bf92f3577b34da6a3ce929d0e0e4736","toSpanId":"00f067aa0ba902b9"}]`, eventheader.FormatDefault, 0)
			b.AddString("httpMethod", "GET", eventheader.FormatDefault, 0)
		} else {
			b.StructField("PartB", 6, 0)
			b.AddString("_typeName", typ, eventheader.FormatDefault, 0)
			b.AddString("body", []string{`{"x":1.5}`, "plain"}[k%2], []eventheader.Format{eventheader.FormatStringJSON, eventheader.FormatDefault}[k%2], 0)
			b.AddUint16("severityNumber", uint16(k%25), eventheader.FormatSignedInt, 0)
			b.AddString("severityText", "WARN", eventheader.FormatDefault, 0)
			b.AddInt32("eventId", int32(k), 0)
			b.AddString("name", "disk.alert", eventheader.FormatDefault, 0)
		}
		add()
	}
	return out
}

// plainSample is a record of te.plain.
func (te *testEvents) plainSample(tb testing.TB, rng *rand.Rand) []byte {
	var enc eventdef.Encoder
	enc.Reset(te.plainDef, nil)
	enc.Uint(uint64(rng.Uint32()))
	enc.String([]string{"message", "ünïcode", "bad \xff"}[rng.IntN(3)])
	enc.String("c")
	enc.Bytes([]byte{1, 2, byte(rng.Uint32())})
	enc.Int(int64(rng.Uint64()))
	enc.Uint(rng.Uint64())
	p, err := enc.Payload()
	if err != nil {
		tb.Fatal(err)
	}
	return append(make([]byte, 8), p...)
}

// mapBoth maps samples as uetrace export does (export.Mapper's OTLP
// protobuf, read by pdata as the Collector's OTLP receiver would) and as
// the receiver does (its pdata writer), and returns each's logs and
// traces, marshalled by pdata; with dedup, export's with one value a key,
// as the receiver's are.
func mapBoth(tb testing.TB, samples []perfdata.Sample, dedup bool) (viaOTLP, direct [2][]byte) {
	tb.Helper()
	scope := otlp.Scope{Name: metadata.ScopeName, Version: "v"}
	em, err := export.NewMapper(export.MapperOptions{HostName: "h", ServiceName: "svc", Scope: scope})
	if err != nil {
		tb.Fatal(err)
	}
	rm := newMapper("h", "svc", scope, 512)
	for i := range samples {
		em.Add(&samples[i], 77)
		rm.add(&samples[i], 77)
		if rm.w.Depth() != 0 {
			tb.Fatalf("sample %d: %d values left open", i, rm.w.Depth())
		}
	}
	var lu plog.ProtoUnmarshaler
	var tu ptrace.ProtoUnmarshaler
	var lm plog.ProtoMarshaler
	var tm ptrace.ProtoMarshaler
	logs, err := lu.UnmarshalLogs(em.AppendRequest(nil, otlp.Logs))
	if err != nil {
		tb.Fatal(err)
	}
	traces, err := tu.UnmarshalTraces(em.AppendRequest(nil, otlp.Traces))
	if err != nil {
		tb.Fatal(err)
	}
	// A key given twice is one attribute in the receiver's (the
	// documented difference, TestPdataDuplicateKeys): export's are made so
	// too before they are compared.
	for _, rl := range logs.ResourceLogs().All() {
		if !dedup {
			break
		}
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				dedupKeys(lr.Attributes())
				dedupValue(lr.Body())
			}
		}
	}
	for _, rs := range traces.ResourceSpans().All() {
		if !dedup {
			break
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				dedupKeys(sp.Attributes())
			}
		}
	}
	b := rm.take()
	viaOTLP[0], _ = lm.MarshalLogs(logs)
	viaOTLP[1], _ = tm.MarshalTraces(traces)
	direct[0], _ = lm.MarshalLogs(b.logs)
	direct[1], _ = tm.MarshalTraces(b.traces)
	return viaOTLP, direct
}

// dedupKeys makes m, and the maps in it, hold one value a key as pdata's
// Put does: the first one's place, the last one's value.
func dedupKeys(m pcommon.Map) {
	out := pcommon.NewMap()
	for k, v := range m.All() {
		v.CopyTo(out.PutEmpty(k))
	}
	out.MoveTo(m)
	for _, v := range m.All() {
		dedupValue(v)
	}
}

func dedupValue(v pcommon.Value) {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		dedupKeys(v.Map())
	case pcommon.ValueTypeSlice:
		for _, e := range v.Slice().All() {
			dedupValue(e)
		}
	}
}

// diffMapped says how the two mappings' logs or traces differ, in OTLP
// JSON, or "" when they do not.
func diffMapped(viaOTLP, direct []byte, traces bool) string {
	if bytes.Equal(viaOTLP, direct) {
		return ""
	}
	js := func(b []byte) string {
		if traces {
			var u ptrace.ProtoUnmarshaler
			var m ptrace.JSONMarshaler
			td, _ := u.UnmarshalTraces(b)
			j, _ := m.MarshalTraces(td)
			return string(j)
		}
		var u plog.ProtoUnmarshaler
		var m plog.JSONMarshaler
		ld, _ := u.UnmarshalLogs(b)
		j, _ := m.MarshalLogs(ld)
		return string(j)
	}
	return fmt.Sprintf("through OTLP:\n%s\ndirect:\n%s", js(viaOTLP), js(direct))
}

// TestPdataSameAsOTLP: the receiver's records and spans, written straight
// into pdata, are what uetrace export's OTLP protobuf of the same samples
// is in pdata — for plain events, EventHeader events of every encoding
// and format, structs, arrays, activity ids, Common Schema logs and spans,
// records that do not decode, of several processes and services — in
// batches, the writer's memory reused from one to the next.
func TestPdataSameAsOTLP(t *testing.T) {
	te := newTestEvents(t)
	rng := rand.New(rand.NewPCG(33, 4))
	var samples []perfdata.Sample
	for i, raw := range ehSamples(rng) {
		samples = append(samples, perfdata.Sample{Event: te.eh, Wall: uint64(1 + i%2), Time: 9, PID: uint32(100 + i%3), TID: 7, CPU: 1, Comm: "p", Raw: raw})
		if i%5 == 0 {
			// The record cut short: its fields stop decoding part way.
			samples = append(samples, perfdata.Sample{Event: te.eh, Wall: 5, PID: 100, TID: 7, Raw: raw[:len(raw)-1]})
		}
		if i%7 == 0 {
			samples = append(samples, perfdata.Sample{Event: te.plain, Wall: 5, PID: 101, TID: 8, Comm: "q", Raw: te.plainSample(t, rng)})
			samples = append(samples, perfdata.Sample{Event: te.raw, Wall: 5, PID: 102, TID: 8, Raw: []byte{1, 2, 3}})
		}
	}
	// The same of one process, as a program's records come: each log
	// record is written in its place at the end of its resource's, those
	// cut short written again there, the spans between them elsewhere,
	// until a Common Schema record names another service (its own
	// resource), and the last record is another process's.
	var runs []perfdata.Sample
	for _, s := range samples {
		s.PID = 100
		runs = append(runs, s)
	}
	runs = append(runs, perfdata.Sample{Event: te.plain, Wall: 5, PID: 101, TID: 8, Comm: "q", Raw: te.plainSample(t, rng)})
	for _, tc := range []struct {
		name    string
		samples []perfdata.Sample
	}{{"interleaved", samples}, {"runs", runs}} {
		for batch := range 2 {
			viaOTLP, direct := mapBoth(t, tc.samples, true)
			for sig, traces := range []bool{false, true} {
				if d := diffMapped(viaOTLP[sig], direct[sig], traces); d != "" {
					t.Fatalf("%s, batch %d: the %s differ:\n%s", tc.name, batch, []string{"logs", "traces"}[sig], d)
				}
			}
			if len(direct[1]) == 0 || len(direct[0]) == 0 {
				t.Fatal("no spans or no logs mapped")
			}
		}
	}
}

// FuzzPdataSameAsOTLP: whatever a writer puts in a record, the receiver's
// pdata is what export's OTLP protobuf of it is.
func FuzzPdataSameAsOTLP(f *testing.F) {
	te := newTestEvents(f)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, raw := range ehSamples(rng)[100:] {
		f.Add(true, raw)
	}
	f.Add(false, te.plainSample(f, rng))
	f.Fuzz(func(t *testing.T, isEH bool, raw []byte) {
		ev := te.plain
		if isEH {
			ev = te.eh
		}
		viaOTLP, direct := mapBoth(t, []perfdata.Sample{{Event: ev, Wall: 3, PID: 1, TID: 2, Raw: raw}}, true)
		for sig, traces := range []bool{false, true} {
			if d := diffMapped(viaOTLP[sig], direct[sig], traces); d != "" {
				t.Fatalf("the %s differ:\n%s", []string{"logs", "traces"}[sig], d)
			}
		}
	})
}

// TestPdataDuplicateKeys: where an event gives one key twice in a record
// (a field named as one of uetrace's attributes), uetrace export sends
// both, and the receiver keeps one, of the last value, in the first one's
// place: pdata's maps hold a value a key.
func TestPdataDuplicateKeys(t *testing.T) {
	te := newTestEvents(t)
	var b eventheader.Builder
	b.Reset("Dup", eventheader.Header{Level: 4})
	b.AddInt32("linux.cpu", 99, 0)
	b.AddInt32("n", 1, 0)
	b.AddInt32("n", 2, 0)
	ev, err := b.AppendEvent(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := perfdata.Sample{Event: te.eh, Wall: 1, PID: 1, TID: 2, CPU: 3, Raw: append(make([]byte, 8), ev...)}
	viaOTLP, direct := mapBoth(t, []perfdata.Sample{s}, false)
	var u plog.ProtoUnmarshaler
	count := func(b []byte) (n map[string]int, last map[string]int64) {
		ld, err := u.UnmarshalLogs(b)
		if err != nil {
			t.Fatal(err)
		}
		n, last = map[string]int{}, map[string]int64{}
		for k, v := range ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().All() {
			n[k]++
			last[k] = v.Int()
		}
		return n, last
	}
	on, _ := count(viaOTLP[0])
	dn, dlast := count(direct[0])
	if on["linux.cpu"] != 2 || on["n"] != 2 {
		t.Errorf("export sends linux.cpu %d times and n %d times, want both twice", on["linux.cpu"], on["n"])
	}
	if dn["linux.cpu"] != 1 || dn["n"] != 1 || dlast["linux.cpu"] != 99 || dlast["n"] != 2 {
		t.Errorf("the receiver keeps linux.cpu %d times (%d) and n %d times (%d), want each once, of the last value (99, 2)",
			dn["linux.cpu"], dlast["linux.cpu"], dn["n"], dlast["n"])
	}
}
