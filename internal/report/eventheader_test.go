package report_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/eventheadertest"
	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
	"github.com/uetrace/uetrace/perfdata"
)

type interopRecord struct {
	tracepoint string
	data       []byte // as written to user_events_data, without the write index
	json       []byte // Microsoft's decoder's line for it
}

// readInterop reads the 374 events and Microsoft's JSON of each.
func readInterop(tb testing.TB) []interopRecord {
	tb.Helper()
	vecs, err := eventheadertest.Read()
	if err != nil {
		tb.Fatal(err)
	}
	recs := make([]interopRecord, len(vecs))
	for i, v := range vecs {
		recs[i] = interopRecord{tracepoint: v.Tracepoint, data: v.Data, json: v.JSON}
	}
	return recs
}

// ehFile writes a perf.data file, as uetrace record would, of EventHeader
// events: one tracepoint (system user_events) per distinct name, a
// sample per event at times 1, 2, 3, … µs, by pid 42.
func ehFile(tb testing.TB, tracepoints []string, events [][]byte) string {
	tb.Helper()
	ids := map[string]int{}
	var formats []string
	var attrs []perfdata.Attr
	for _, tp := range tracepoints {
		if _, ok := ids[tp]; ok {
			continue
		}
		id := 2000 + len(ids)
		ids[tp] = id
		formats = append(formats, mustParse(tb, tp+" "+eventheader.CommandTypes).Format(tp, id))
		attrs = append(attrs, attr("user_events:"+tp, uint64(id), uint64(id)))
	}
	f := newFile(tb, tracingData(formats...), attrs...)
	f.comm(uint64(ids[tracepoints[0]]), 42, 42, "ehapp", 0, 0)
	for i, tp := range tracepoints {
		id := ids[tp]
		f.sample(uint64(id), 42, 42, uint64(i+1)*1000, 1, rawRecord(uint16(id), 42, events[i]))
	}
	return f.close()
}

// TestEventHeaderInterop reports Microsoft's 374 events as JSON lines:
// each line's event name, fields and metadata must be Microsoft's
// decoder's, value for value and in order.
func TestEventHeaderInterop(t *testing.T) {
	recs := readInterop(t)
	var tps []string
	var evs [][]byte
	for _, r := range recs {
		tps = append(tps, r.tracepoint)
		evs = append(evs, r.data)
	}
	path := ehFile(t, tps, evs)
	out, sum := run(t, path, report.JSON)
	if sum.Samples != uint64(len(recs)) || sum.Undecoded != 0 {
		t.Errorf("summary %+v, want %d samples", sum, len(recs))
	}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(lines) != len(recs) {
		t.Fatalf("%d lines for %d events", len(lines), len(recs))
	}
	same := 0
	for i, l := range lines {
		var got map[string]json.RawMessage
		if err := json.Unmarshal(l, &got); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, l)
		}
		if string(got["name"]) != `"`+recs[i].tracepoint+`"` {
			t.Errorf("line %d: name %s, want %s", i, got["name"], recs[i].tracepoint)
		}
		// Microsoft's line is {"n":…, fields…, "meta":{…}}.
		var b bytes.Buffer
		b.WriteString(`{"n":`)
		b.Write(got["event"])
		if fields := got["fields"]; len(fields) > 2 {
			b.WriteByte(',')
			b.Write(fields[1 : len(fields)-1])
		}
		b.WriteString(`,"meta":`)
		b.Write(got["meta"])
		b.WriteByte('}')
		var want bytes.Buffer
		if err := json.Compact(&want, recs[i].json); err != nil {
			t.Fatalf("record %d: Microsoft's JSON: %v", i, err)
		}
		if !bytes.Equal(b.Bytes(), want.Bytes()) {
			t.Errorf("record %d %s:\n got %s\nwant %s", i, recs[i].tracepoint, b.Bytes(), want.Bytes())
			continue
		}
		same++
	}
	t.Logf("%d of %d events reported as Microsoft's decoder shows them", same, len(recs))

	// Text and Perfetto read every event too.
	text, sum := run(t, path, report.Text)
	if n := strings.Count(string(text), "\n"); n != len(recs) || sum.Samples != uint64(len(recs)) {
		t.Errorf("text: %d lines, summary %+v", n, sum)
	}
	if bytes.Contains(text, []byte("eventheader_flags=")) {
		t.Errorf("text shows an event undecoded:\n%s", text)
	}
	if _, sum := run(t, path, report.Perfetto); sum.Samples != uint64(len(recs)) {
		t.Errorf("perfetto: summary %+v", sum)
	}
}

// builtEvents are EventHeader events made with eventheader.Builder, for
// the golden tests: every kind of value, a struct, arrays, invalid UTF-8,
// and an event with an id, version, tag, opcode and activity ids.
func builtEvents(tb testing.TB) (tracepoints []string, events [][]byte) {
	tb.Helper()
	var b eventheader.Builder
	add := func(tp string) {
		ev, err := b.AppendEvent(nil)
		if err != nil {
			tb.Fatal(err)
		}
		tracepoints, events = append(tracepoints, tp), append(events, ev)
	}
	info := eventheader.Header{Level: eventheader.LevelInformation}
	b.Reset("Request", info)
	b.AddUint32("status", 200, eventheader.FormatDefault, 0)
	b.AddString("path", "/index.html", eventheader.FormatDefault, 0)
	b.AddUint32("err", 2, eventheader.FormatErrno, 0)
	b.AddInt64("delta", -5, 0)
	b.AddUint64("flags", 0xbeef, eventheader.FormatHexInt, 0)
	b.AddBool("ok", true, 0)
	b.AddIPv4("addr", [4]byte{127, 0, 0, 1}, 0)
	b.AddPort("port", 8080, 0)
	b.AddUUID("req", [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8}, 0)
	b.AddUint64("when", 1700000000, eventheader.FormatTime, 0)
	b.AddString("note", "two words \"quoted\"", eventheader.FormatDefault, 0x12)
	b.AddString("bad", "bad\xff\xfe", eventheader.FormatDefault, 0)
	b.AddFloat64("ratio", 0.5, 0)
	add("MyApp_L4K1")

	b.Reset("Nested", info)
	b.StructField("peer", 2, 0)
	b.AddString("name", "db-1", eventheader.FormatDefault, 0)
	b.AddInt32("n", -7, 0)
	b.ArrayField("ports", eventheader.EncodingValue16, eventheader.FormatDefault, 0, 0)
	b.AppendCount(3)
	b.AppendValue16(1)
	b.AppendValue16(2)
	b.AppendValue16(3)
	b.StructArrayField("pairs", 2, 0, 2)
	b.Field("k", eventheader.EncodingValue8, eventheader.FormatDefault, 0)
	b.Field("v", eventheader.EncodingValue8, eventheader.FormatHexInt, 0)
	b.AppendValue8(1)
	b.AppendValue8(0xa)
	b.AppendValue8(2)
	b.AppendValue8(0xb)
	add("MyApp_L4K1")

	b.Reset("Start", eventheader.Header{Level: eventheader.LevelVerbose, ID: 7, Version: 1, Tag: 0x2a, Opcode: eventheader.OpcodeActivityStart})
	act := [16]byte{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	rel := [16]byte{0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	b.SetActivityID(&act, &rel)
	add("MyApp_L5K3Gtest")
	return tracepoints, events
}

var wantEHText = []string{
	"           ehapp      42/42      [001]     0.000001:      user_events:MyApp_L4K1: MyApp:Request status=200 path=/index.html err=ENOENT(2) delta=-5 flags=0xBEEF ok=true addr=127.0.0.1 port=8080 req=12345678-9abc-def0-0102-030405060708 when=2023-11-14T22:13:20 note;tag=0x12=\"two words \\\"quoted\\\"\" bad=badÿþ ratio=0.5",
	"           ehapp      42/42      [001]     0.000002:      user_events:MyApp_L4K1: MyApp:Nested peer={name=db-1 n=-7} ports=[1 2 3] pairs=[{k=1 v=0xA} {k=2 v=0xB}]",
	"           ehapp      42/42      [001]     0.000003: user_events:MyApp_L5K3Gtest: MyApp:Start activity=aa010203-0405-0607-0809-0a0b0c0d0e0f related=bb010203-0405-0607-0809-0a0b0c0d0e0f",
}

var wantEHJSON = []string{
	`{"time":1000,"cpu":1,"pid":42,"tid":42,"comm":"ehapp","system":"user_events","name":"MyApp_L4K1","fields":{"status":200,"path":"/index.html","err":"ENOENT(2)","delta":-5,"flags":"0xBEEF","ok":true,"addr":"127.0.0.1","port":8080,"req":"12345678-9abc-def0-0102-030405060708","when":"2023-11-14T22:13:20","note;tag=0x12":"two words \"quoted\"","bad":"badÿþ","ratio":0.5},"event":"MyApp:Request","meta":{"level":4,"keyword":"0x1"}}`,
	`{"time":2000,"cpu":1,"pid":42,"tid":42,"comm":"ehapp","system":"user_events","name":"MyApp_L4K1","fields":{"peer":{"name":"db-1","n":-7},"ports":[1,2,3],"pairs":[{"k":1,"v":"0xA"},{"k":2,"v":"0xB"}]},"event":"MyApp:Nested","meta":{"level":4,"keyword":"0x1"}}`,
	`{"time":3000,"cpu":1,"pid":42,"tid":42,"comm":"ehapp","system":"user_events","name":"MyApp_L5K3Gtest","fields":{},"event":"MyApp:Start","meta":{"id":7,"version":1,"level":5,"keyword":"0x3","opcode":1,"tag":"0x2A","activity":"aa010203-0405-0607-0809-0a0b0c0d0e0f","relatedActivity":"bb010203-0405-0607-0809-0a0b0c0d0e0f"}}`,
}

func TestEventHeaderText(t *testing.T) {
	path := builtFile(t)
	out, sum := run(t, path, report.Text)
	if got, want := string(out), strings.Join(wantEHText, "\n")+"\n"; got != want {
		t.Errorf("text (-want +got):\n%s", cmp.Diff(strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")))
	}
	if sum != (report.Summary{Samples: 3}) {
		t.Errorf("summary %+v", sum)
	}
}

func TestEventHeaderJSON(t *testing.T) {
	path := builtFile(t)
	out, _ := run(t, path, report.JSON)
	if got, want := string(out), strings.Join(wantEHJSON, "\n")+"\n"; got != want {
		t.Errorf("json (-want +got):\n%s", cmp.Diff(strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")))
	}
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if !json.Valid(l) {
			t.Errorf("invalid JSON: %s", l)
		}
	}
}

func TestEventHeaderPerfetto(t *testing.T) {
	path := builtFile(t)
	out, sum := run(t, path, report.Perfetto)
	if sum != (report.Summary{Samples: 3, OpenStarts: 1}) {
		t.Errorf("summary %+v", sum)
	}
	tr, err := perfettotest.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	type arg = perfettotest.Arg
	u := func(name string, v uint64) arg { return arg{Name: name, Kind: "uint", Val: v} }
	i := func(name string, v int64) arg { return arg{Name: name, Kind: "int", Val: v} }
	str := func(name, v string) arg { return arg{Name: name, Kind: "string", Val: v} }
	bl := func(name string, v bool) arg { return arg{Name: name, Kind: "bool", Val: v} }
	const ue = "user_events"
	want := []perfettotest.Event{
		{TS: 1000, PID: 42, TID: 42, Category: ue, Name: "MyApp:Request", Args: []arg{
			u("status", 200), str("path", "/index.html"), str("err", "ENOENT(2)"), i("delta", -5), str("flags", "0xBEEF"),
			bl("ok", true), str("addr", "127.0.0.1"), u("port", 8080), str("req", "12345678-9abc-def0-0102-030405060708"),
			str("when", "2023-11-14T22:13:20"), str("note;tag=0x12", `two words "quoted"`), str("bad", "badÿþ"), str("ratio", "0.5"),
			u("meta.level", 4), str("meta.keyword", "0x1")}},
		{TS: 2000, PID: 42, TID: 42, Category: ue, Name: "MyApp:Nested", Args: []arg{
			str("peer.name", "db-1"), i("peer.n", -7), u("ports[0]", 1), u("ports[1]", 2), u("ports[2]", 3),
			u("pairs[0].k", 1), str("pairs[0].v", "0xA"), u("pairs[1].k", 2), str("pairs[1].v", "0xB"),
			u("meta.level", 4), str("meta.keyword", "0x1")}},
	}
	if diff := cmp.Diff(want, tr.Events, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The ActivityStart is a slice, never ended, on an async track of its
	// own in pid 42's group.
	wantSlices := []perfettotest.Slice{
		{PID: 42, TS: 3000, Dur: -1, Category: ue, Name: "MyApp:Start", Args: []arg{
			u("meta.id", 7), u("meta.version", 1), u("meta.level", 5), u("meta.opcode", 1), str("meta.keyword", "0x3"), str("meta.tag", "0x2A"),
			str("meta.activity", "aa010203-0405-0607-0809-0a0b0c0d0e0f"), str("meta.relatedActivity", "bb010203-0405-0607-0809-0a0b0c0d0e0f")}},
	}
	if diff := cmp.Diff(wantSlices, tr.Slices, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(perfettotest.Slice{}, "Track")); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
	if len(tr.Slices) == 1 {
		if tk := tr.Tracks[tr.Slices[0].Track]; !tk.Async || tk.Name != "MyApp:Start" || tk.PID != 42 {
			t.Errorf("the slice's track: %+v", tk)
		}
	}
}

// builtFile writes builtEvents to a file.
func builtFile(tb testing.TB) string {
	tps, evs := builtEvents(tb)
	return ehFile(tb, tps, evs)
}

// toPipe rewrites the file-mode perf.data at path as the pipe-mode stream
// perf record -o - would have written: the 16-byte header, a HEADER_ATTR
// record per attr, HEADER_TRACING_DATA and the tracing data, then the
// data section's records; the attrs from index late on come after the
// data's first record instead, as an attr added while recording would.
func toPipe(tb testing.TB, path string, late int) []byte {
	tb.Helper()
	file := readFile(tb, path)
	u64 := func(off int) int { return int(ne.Uint64(file[off:])) }
	attrSize, attrsOff, attrsSize := u64(16), u64(24), u64(32)
	dataOff, dataSize := u64(40), u64(48)
	r := open(tb, path)
	td, err := r.FeatureData(perfdata.FeatureTracingData)
	if err != nil {
		tb.Fatal(err)
	}
	record := func(typ uint32, body []byte) []byte {
		b := ne.AppendUint32(nil, typ)
		b = ne.AppendUint16(b, 0)
		b = ne.AppendUint16(b, uint16(8+len(body)))
		return append(b, body...)
	}
	var attrs [][]byte
	for off := attrsOff; off < attrsOff+attrsSize; off += attrSize {
		body := append([]byte(nil), file[off:off+attrSize-16]...)
		ids := u64(off + attrSize - 16)
		body = append(body, file[ids:ids+u64(off+attrSize-8)]...)
		attrs = append(attrs, record(perfdata.RecordHeaderAttr, body))
	}
	out := ne.AppendUint64(ne.AppendUint64(nil, ne.Uint64(file)), 16)
	for _, a := range attrs[:late] {
		out = append(out, a...)
	}
	aligned := (len(td) + 7) &^ 7
	out = append(out, record(perfdata.RecordTracingData, ne.AppendUint32(ne.AppendUint32(nil, uint32(aligned)), 0))...)
	out = append(append(out, td...), make([]byte, aligned-len(td))...)
	data := file[dataOff : dataOff+dataSize]
	first := int(ne.Uint16(data[6:]))
	out = append(out, data[:first]...)
	for _, a := range attrs[late:] {
		out = append(out, a...)
	}
	return append(out, data[first:]...)
}

// TestEventHeaderPipe reports the EventHeader file as a pipe-mode stream,
// one of its two events' attr coming after the first record: the same
// JSON lines and text (but for the name column, as wide as the events
// known when it began).
func TestEventHeaderPipe(t *testing.T) {
	path := builtFile(t)
	for _, format := range []report.Format{report.JSON, report.Text} {
		want, _ := run(t, path, format)
		pipe := toPipe(t, path, 1)
		r, err := perfdata.NewReader(bytes.NewReader(pipe), int64(len(pipe)))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		sum, err := report.Write(&got, r, format)
		if err != nil {
			t.Fatal(err)
		}
		same := got.String() == string(want)
		if format == report.Text {
			same = slices.Equal(strings.Fields(got.String()), strings.Fields(string(want)))
		}
		if !same || sum.Samples != 3 || sum.Undecoded != 0 {
			t.Errorf("%s of the pipe-mode stream (%+v):\n%s\nof the file:\n%s", format, sum, got.Bytes(), want)
		}
	}
}
