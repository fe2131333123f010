package report

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/report/perfetto"
	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
	"github.com/uetrace/uetrace/perfdata"
)

// ehTestEvent is the event of tracepoint MyApp_L4K1 as a file's format
// describes it.
func ehTestEvent(tb testing.TB) *event {
	tb.Helper()
	const name = "MyApp_L4K1"
	def, err := eventdef.Parse(name + " " + eventheader.CommandTypes)
	if err != nil {
		tb.Fatal(err)
	}
	pe, err := perfdata.NewEvent("user_events", name, []byte(def.Format(name, 1001)))
	if err != nil {
		tb.Fatal(err)
	}
	ev := newEvent(pe)
	ev.textName = []byte("user_events:" + name + ":")
	if !ev.eh {
		tb.Fatalf("%s is not an EventHeader event", name)
	}
	return ev
}

// ehTestItem is a sample of ev whose EventHeader event is data.
func ehTestItem(ev *event, data []byte) item {
	raw := append(make([]byte, 8, 8+len(data)), data...)
	return item{time: 1_004_242_000_123, cpu: 1, pid: 1000, tid: 1001, ev: ev, data: raw, heads: newHeads(1000, 1001, "worker-1001")}
}

// ehSeeds are a few events made with the Builder.
func ehSeeds(tb testing.TB) [][]byte {
	var b eventheader.Builder
	var out [][]byte
	add := func() {
		ev, err := b.AppendEvent(nil)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, ev)
	}
	h := eventheader.Header{Level: eventheader.LevelInformation}
	b.Reset("Request", h)
	b.AddUint32("status", 200, eventheader.FormatDefault, 0)
	b.AddString("path", "/index.html", eventheader.FormatDefault, 0)
	b.AddUint32("err", 2, eventheader.FormatErrno, 0)
	add()
	b.Reset("Nested", h)
	b.StructField("peer", 2, 7)
	b.AddString("name", "a b\xff", eventheader.FormatDefault, 0)
	b.AddPort("port", 80, 0)
	b.StructArrayField("pairs", 1, 0, 0)
	b.Field("k", eventheader.EncodingValue8, eventheader.FormatBoolean, 0)
	b.AppendCount(2)
	b.AppendValue8(1)
	b.AppendValue8(3)
	add()
	b.Reset("Act", eventheader.Header{Level: eventheader.LevelInformation, Opcode: eventheader.OpcodeActivityStop, Tag: 3})
	var id [16]byte
	b.SetActivityID(&id, nil)
	b.AddUUID("u", id, 0)
	add()
	return out
}

// FuzzEventHeaderLine formats any bytes as the EventHeader event of a
// sample, in every format: no panic; a JSON line is one valid JSON object
// of valid UTF-8, and a Perfetto event (an instant, or the begin of a slice
// for an ActivityStart) a valid trace.
func FuzzEventHeaderLine(f *testing.F) {
	for _, s := range ehSeeds(f) {
		f.Add(s)
	}
	ev := ehTestEvent(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		it := ehTestItem(ev, data)
		text := appendText(nil, &it)
		if bytes.Count(text, []byte("\n")) != 1 && !bytes.Contains(data, []byte("\n")) {
			t.Errorf("text of %d lines: %q", bytes.Count(text, []byte("\n")), text)
		}
		var times timeDigits
		js := appendJSON(nil, &it, &times)
		if !json.Valid(js) || !utf8.Valid(js) || bytes.Count(js, []byte("\n")) != 1 {
			t.Fatalf("JSON line %q", js)
		}
		var out bytes.Buffer
		rp := &reporter{pf: perfetto.NewWriter(&out), described: map[int32]bool{}}
		if err := rp.instant(&it, "worker-1001", ""); err != nil {
			t.Fatal(err)
		}
		if err := rp.pf.Flush(); err != nil {
			t.Fatal(err)
		}
		tr, err := perfettotest.Decode(out.Bytes())
		if err != nil || len(tr.Events)+len(tr.Slices) != 1 {
			t.Fatalf("perfetto: %v, %+v", err, tr)
		}
	})
}

func benchEH(b *testing.B, format Format) {
	ev := ehTestEvent(b)
	it := ehTestItem(ev, ehSeeds(b)[0])
	var times timeDigits
	line := func(buf []byte) []byte {
		if format == Text {
			return appendText(buf, &it)
		}
		return appendJSON(buf, &it, &times)
	}
	buf := line(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		it.time++
		buf = line(buf[:0])
	}
}

// BenchmarkEventHeaderJSON is the JSON line of a 3-field EventHeader
// event (status, path, errno), decoded from its record.
func BenchmarkEventHeaderJSON(b *testing.B) { benchEH(b, JSON) }

// BenchmarkEventHeaderText is its text line.
func BenchmarkEventHeaderText(b *testing.B) { benchEH(b, Text) }

// BenchmarkEventHeaderPerfetto is its Perfetto instant.
func BenchmarkEventHeaderPerfetto(b *testing.B) {
	ev := ehTestEvent(b)
	it := ehTestItem(ev, ehSeeds(b)[0])
	var out bytes.Buffer
	rp := &reporter{pf: perfetto.NewWriter(&out), described: map[int32]bool{}}
	b.ReportAllocs()
	for b.Loop() {
		it.time++
		if err := rp.instant(&it, "worker-1001", ""); err != nil {
			b.Fatal(err)
		}
		if out.Len() > 1<<20 {
			out.Reset()
		}
	}
}

// BenchmarkEventHeaderPerfettoActivity is an ActivityStart and its
// ActivityStop, by activity id, as a Perfetto slice: the status field on
// each, the activity's track reused every time.
func BenchmarkEventHeaderPerfettoActivity(b *testing.B) {
	ev := ehTestEvent(b)
	var eb eventheader.Builder
	var items [2]item
	id := [16]byte{1, 2, 3}
	for i, op := range []eventheader.Opcode{eventheader.OpcodeActivityStart, eventheader.OpcodeActivityStop} {
		eb.Reset("Request", eventheader.Header{Level: eventheader.LevelInformation, Opcode: op})
		eb.SetActivityID(&id, nil)
		eb.AddUint32("status", 200, eventheader.FormatDefault, 0)
		data, err := eb.AppendEvent(nil)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = ehTestItem(ev, data)
	}
	var out bytes.Buffer
	rp := &reporter{pf: perfetto.NewWriter(&out), described: map[int32]bool{}}
	b.ReportAllocs()
	for b.Loop() {
		for i := range items {
			items[i].time++
			if err := rp.instant(&items[i], "worker-1001", ""); err != nil {
				b.Fatal(err)
			}
		}
		if out.Len() > 1<<20 {
			out.Reset()
		}
	}
	if rp.sum.UnmatchedStops != 0 || rp.pf.OpenSlices() != 0 {
		b.Fatalf("summary %+v, %d open", rp.sum, rp.pf.OpenSlices())
	}
}
