package eventheader

import (
	"bytes"
	"fmt"
	"reflect"
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
	var defs Defs // kept from one input to the next, as a reader keeps it
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		ev, err := Decode(name, data)
		if err != nil {
			return
		}
		if d := diffDefs(&ev, &defs); d != "" {
			t.Fatal(d)
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

// diffDefs says how the items of ev read with defs (FieldsDefs), twice,
// differ from those read by Fields; "" when they do not.
func diffDefs(ev *Event, defs *Defs) string {
	items := func(f Fields) (out []Item, err error) {
		for f.Next() {
			out = append(out, *f.Item())
		}
		return out, f.Err()
	}
	want, wantErr := items(ev.Fields())
	for round := range 2 {
		got, err := items(ev.FieldsDefs(defs))
		if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			return fmt.Sprintf("FieldsDefs, round %d: %d items (error %v), Fields: %d (error %v)\n%+v\n%+v", round, len(got), err, len(want), wantErr, got, want)
		}
	}
	return ""
}

// TestFieldsDefs: the items of each golden event read with one Defs kept
// from event to event (the definitions of each layout read once, a new
// layout's replacing them) are those Fields reads.
func TestFieldsDefs(t *testing.T) {
	var defs Defs
	n := 0
	for _, r := range readGolden(t) {
		ev, err := Decode(r.tracepoint, r.data)
		if err != nil {
			continue
		}
		if d := diffDefs(&ev, &defs); d != "" {
			t.Fatalf("%s: %s", r.tracepoint, d)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no golden event decodes")
	}
}
