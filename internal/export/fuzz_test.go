package export

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// FuzzRecord maps arbitrary records of a plain user event and of an
// EventHeader tracepoint: the mapping must not fail on what a writer can
// put in a record, and what it makes must encode — the same with the
// record's layout made, found again, and without one.
func FuzzRecord(f *testing.F) {
	x, err := eventdef.Parse("x u32 a; __rel_loc char[] msg; char[4] c; __data_loc u8[] blob")
	if err != nil {
		f.Fatal(err)
	}
	plain, err := perfdata.NewEvent("user_events", "x", []byte(x.Format("x", 1)))
	if err != nil {
		f.Fatal(err)
	}
	ehDef, err := eventdef.Parse("P_L4K1 " + eventheader.CommandTypes)
	if err != nil {
		f.Fatal(err)
	}
	eh, err := perfdata.NewEvent("user_events", "P_L4K1", []byte(ehDef.Format("P_L4K1", 2)))
	if err != nil {
		f.Fatal(err)
	}
	var b eventheader.Builder
	b.Reset("E", eventheader.Header{Level: 4})
	b.AddString("s", "v", eventheader.FormatDefault, 0)
	b.StructField("st", 1, 0)
	b.AddUint16("p", 80, eventheader.FormatPort, 0)
	b.AddFloat32("f", 1.5, 0)
	ev, err := b.AppendEvent(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(true, append(make([]byte, 8), ev...))
	// A Common Schema log record, as OpenTelemetry's exporters write one.
	b.Reset("Log", eventheader.Header{Level: 4})
	b.AddUint32("__csver__", 0x400, eventheader.FormatUnsignedInt, 0)
	b.StructField("PartA", 2, 0)
	b.AddString("time", "2024-01-01T12:34:56.789Z", eventheader.FormatDefault, 0)
	b.AddString("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736", eventheader.FormatDefault, 0)
	b.StructField("PartC", 1, 0)
	b.AddString("tags", `["a",2,{"k":null}]`, eventheader.FormatStringJSON, 0)
	b.StructField("PartB", 3, 0)
	b.AddString("_typeName", "Log", eventheader.FormatDefault, 0)
	b.AddString("body", `{"x":1.5}`, eventheader.FormatStringJSON, 0)
	b.AddUint16("severityNumber", 9, eventheader.FormatSignedInt, 0)
	cs, err := b.AppendEvent(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(true, append(make([]byte, 8), cs...))
	var enc eventdef.Encoder
	enc.Reset(x, nil)
	enc.Uint(1)
	enc.String("m")
	enc.String("c")
	enc.Bytes([]byte{1, 2})
	p, _ := enc.Payload()
	f.Add(false, append(make([]byte, 8), p...))
	f.Add(false, []byte{})
	f.Fuzz(func(t *testing.T, isEH bool, raw []byte) {
		ev := plain
		if isEH {
			ev = eh
		}
		var w, again, cold otlpWriter
		s := perfdata.Sample{Event: ev, Raw: raw}
		e := encoder{Writer: &w, keep: true}
		encodeSample(&e, &s, 1)
		if w.Depth() != 0 {
			t.Fatalf("%d values left open", w.Depth())
		}
		e.Writer = &again
		encodeSample(&e, &s, 1)
		noLayout := encoder{Writer: &cold}
		noLayout.layouts.size = maxLayoutSize
		encodeSample(&noLayout, &s, 1)
		if !bytes.Equal(w.Bytes(), again.Bytes()) || !bytes.Equal(w.Bytes(), cold.Bytes()) {
			t.Fatalf("mapped % x, with its layout found again % x, without a layout % x", w.Bytes(), again.Bytes(), cold.Bytes())
		}
		rls, err := otlp.ParseRequest(otlp.AppendEncodedRequest(nil, []otlp.EncodedResourceLogs{{Records: w.Bytes()}}))
		if err != nil || len(rls) != 1 || len(rls[0].Records) != 1 {
			t.Fatalf("the record does not read back: %v", err)
		}
		r := rls[0].Records[0]
		// OTLP strings are UTF-8: a Collector may refuse a request
		// with one that is not.
		if !utf8.ValidString(r.EventName) || !utf8.ValidString(r.SeverityText) {
			t.Fatalf("event name %q, severity %q: not UTF-8", r.EventName, r.SeverityText)
		}
		checkUTF8(t, r.Attributes)
	})
}

func checkUTF8(t *testing.T, kvs []otlp.KeyValue) {
	for _, kv := range kvs {
		if !utf8.ValidString(kv.Key) {
			t.Fatalf("key %q is not UTF-8", kv.Key)
		}
		checkValueUTF8(t, kv.Value)
	}
}

func checkValueUTF8(t *testing.T, v otlp.Value) {
	if !utf8.ValidString(v.Str) {
		t.Fatalf("string %q is not UTF-8", v.Str)
	}
	for _, e := range v.Array {
		checkValueUTF8(t, e)
	}
	checkUTF8(t, v.Map)
}
