package eventheader

import (
	"bytes"
	"testing"

	"github.com/uetrace/uetrace/eventheader/eventheadertest"
)

// The reference's own output, see eventheadertest/testdata/README.md.

type goldenRecord struct {
	tracepoint string
	data       []byte // without the write index
	json       []byte // the decoder's line, without indentation and separator
}

func readGolden(t testing.TB) []goldenRecord {
	t.Helper()
	vecs, err := eventheadertest.Read()
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]goldenRecord, len(vecs))
	for i, v := range vecs {
		recs[i] = goldenRecord{tracepoint: v.Tracepoint, data: v.Data, json: v.JSON}
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
