package eventheader

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// The reference's own output, see ../shared/interop/eventheader/README.md
// (relative to the repository root).
var interopDir = filepath.Join("..", "..", "shared", "interop", "eventheader")

type goldenRecord struct {
	tracepoint string
	data       []byte // without the write index
	json       []byte // the decoder's line, without indentation and separator
}

func readGolden(t testing.TB) []goldenRecord {
	t.Helper()
	dat, err := os.ReadFile(filepath.Join(interopDir, "EventHeaderInterceptorLE64.dat"))
	if err != nil {
		t.Fatalf("interop vectors (../shared/interop/eventheader beside the repository): %v", err)
	}
	js, err := os.ReadFile(filepath.Join(interopDir, "EventHeaderInterceptorLE64.dat.linux.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []goldenRecord
	for len(dat) > 0 {
		if len(dat) < 4 {
			t.Fatalf("trailing %d bytes", len(dat))
		}
		size := int(binary.LittleEndian.Uint32(dat))
		if size < 5 || size > len(dat) {
			t.Fatalf("record %d: size %d of %d", len(recs), size, len(dat))
		}
		rec := dat[4:size]
		n := bytes.IndexByte(rec, 0)
		if n < 0 {
			t.Fatalf("record %d: no tracepoint name", len(recs))
		}
		recs = append(recs, goldenRecord{tracepoint: string(rec[:n]), data: rec[n+1:]})
		dat = dat[size:]
	}
	// One event a line: `  { … },` and the last `  { … } ]`.
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
	if len(lines) != len(recs) {
		t.Fatalf("%d records, %d JSON lines", len(recs), len(lines))
	}
	for i := range recs {
		recs[i].json = lines[i]
	}
	if len(recs) != 374 {
		t.Fatalf("%d records, the reference wrote 374", len(recs))
	}
	return recs
}

func TestGoldenDecode(t *testing.T) {
	recs := readGolden(t)
	equal := 0
	for i, r := range recs {
		ev, err := Decode(r.tracepoint, r.data)
		if err != nil {
			t.Errorf("record %d %s: %v", i, r.tracepoint, err)
			continue
		}
		got, err := ev.AppendJSON(nil)
		if err != nil {
			t.Errorf("record %d %s: %v", i, r.tracepoint, err)
			continue
		}
		if !bytes.Equal(got, r.json) {
			t.Errorf("record %d %s:\n got %s\nwant %s", i, r.tracepoint, got, r.json)
			continue
		}
		equal++
	}
	t.Logf("decoded equal to Microsoft's JSON: %d of %d", equal, len(recs))
	buf := make([]byte, 0, 1<<16)
	if n := testing.AllocsPerRun(5, func() {
		for _, r := range recs {
			e, _ := Decode(r.tracepoint, r.data)
			buf, _ = e.AppendJSON(buf[:0])
		}
	}); n != 0 {
		t.Errorf("decoding and formatting the %d records: %v allocations", len(recs), n)
	}
}
