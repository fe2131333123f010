package report

import (
	"encoding/json"
	"testing"

	"github.com/uetrace/uetrace/tracefmt"
)

// FuzzJSONField: whatever a format file declares and whatever bytes a
// record holds, a field's JSON is one valid JSON value, and an integer
// field's element size is one an integer has.
func FuzzJSONField(f *testing.F) {
	f.Add("s16", 2, true, uint8(0), []byte{0xfe, 0xff})
	f.Add("__rel_loc u32[]", 4, true, uint8(2), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add("struct S", 8, true, uint8(0), []byte{1, 2, 3})
	f.Add("char[16]", 16, true, uint8(0), []byte("abc\x00def\xff"))
	f.Add("unsigned long[4]", 32, false, uint8(0), []byte{1, 2})
	f.Add("const char *", 8, false, uint8(0), make([]byte, 8))
	f.Add("weird_t[3]", 12, false, uint8(0), make([]byte, 12))
	f.Fuzz(func(t *testing.T, typ string, size int, signed bool, loc uint8, data []byte) {
		if typ == "" {
			return
		}
		fl := &tracefmt.Field{Type: typ, Name: "f", Size: size, Signed: signed, Loc: tracefmt.Loc(loc % 3)}
		j := planJSON(fl)
		switch j.elem {
		case 1, 2, 4, 8:
		default:
			t.Fatalf("%q size %d: element size %d", typ, size, j.elem)
		}
		out := appendJSONField(nil, j, data)
		if !json.Valid(out) {
			t.Fatalf("%q size %d, data %x: invalid JSON %s", typ, size, data, out)
		}
	})
}

// BenchmarkJSONField is the JSON of an array field, per record: no
// allocations.
func BenchmarkJSONField(b *testing.B) {
	j := planJSON(&tracefmt.Field{Type: "__rel_loc u32[]", Name: "arr", Size: 4, Signed: true, Loc: tracefmt.RelLoc})
	data := make([]byte, 64)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendJSONField(buf[:0], j, data)
	}
}
