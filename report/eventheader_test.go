package report_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/report"
)

// interopDir holds Microsoft's EventHeader vectors, beside the repository
// (see its README.md).
var interopDir = filepath.Join("..", "..", "shared", "interop", "eventheader")

type interopRecord struct {
	tracepoint string
	data       []byte // as written to user_events_data, without the write index
	json       []byte // Microsoft's decoder's line for it
}

// readInterop reads the 374 events and Microsoft's JSON of each.
func readInterop(tb testing.TB) []interopRecord {
	tb.Helper()
	dat, err := os.ReadFile(filepath.Join(interopDir, "EventHeaderInterceptorLE64.dat"))
	if err != nil {
		tb.Skipf("interop vectors (../shared/interop/eventheader beside the repository): %v", err)
	}
	js, err := os.ReadFile(filepath.Join(interopDir, "EventHeaderInterceptorLE64.dat.linux.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var recs []interopRecord
	for len(dat) > 0 {
		if len(dat) < 4 {
			tb.Fatalf("trailing %d bytes", len(dat))
		}
		size := int(binary.LittleEndian.Uint32(dat))
		if size < 5 || size > len(dat) {
			tb.Fatalf("record %d: size %d of %d", len(recs), size, len(dat))
		}
		rec := dat[4:size]
		n := bytes.IndexByte(rec, 0)
		if n < 0 {
			tb.Fatalf("record %d: no tracepoint name", len(recs))
		}
		recs = append(recs, interopRecord{tracepoint: string(rec[:n]), data: rec[n+1:]})
		dat = dat[size:]
	}
	js = bytes.TrimPrefix(js, []byte("\xef\xbb\xbf"))
	var lines [][]byte
	for _, l := range bytes.Split(js, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if !bytes.HasPrefix(l, []byte("{ ")) {
			continue
		}
		l = bytes.TrimSuffix(l, []byte(" ]"))
		l = bytes.TrimSuffix(l, []byte(","))
		lines = append(lines, l)
	}
	if len(lines) != len(recs) || len(recs) != 374 {
		tb.Fatalf("%d records, %d JSON lines; the reference wrote 374", len(recs), len(lines))
	}
	for i := range recs {
		recs[i].json = lines[i]
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
