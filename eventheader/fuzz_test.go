package eventheader

import (
	"bytes"
	"testing"
)

// FuzzDecode: arbitrary bytes and tracepoint names never panic the
// decoder, the iterator or the JSON formatter, and never read out of
// bounds (Go would panic); a decodable little-endian event, re-encoded
// from what the decoder yields, decodes to the same JSON.
func FuzzDecode(f *testing.F) {
	for i, r := range readGolden(f) {
		if i%7 == 0 {
			f.Add(r.tracepoint, r.data)
		}
	}
	f.Add("P_L5K1", []byte{7, 0, 0, 0, 0, 0, 0, 5})
	f.Add("P_L1K0Gg", []byte{7, 0, 0, 0, 0, 0, 0, 1, 3, 0, 1, 0, 'E', 0, 'f'})
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		ev, err := Decode(name, data)
		if err != nil {
			return
		}
		js, err := ev.AppendJSON(nil)
		if err != nil {
			return
		}
		if ev.Header.Flags != defaultFlags {
			return // the builder writes only the host's kind
		}
		var b Builder
		again, err := reencode(&b, &ev, nil)
		if err != nil {
			t.Fatalf("re-encode of a decodable event: %v", err)
		}
		ev2, err := Decode(name, again)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v\n% x", err, again)
		}
		js2, err := ev2.AppendJSON(nil)
		if err != nil {
			t.Fatalf("re-encoded event does not iterate: %v", err)
		}
		if !bytes.Equal(js, js2) {
			t.Fatalf("JSON changed by re-encoding:\n%s\n%s", js, js2)
		}
	})
}
