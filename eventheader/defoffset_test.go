package eventheader

import (
	"bytes"
	"testing"
)

// TestDefOffset: two events of one layout — the same name and fields,
// other values, other lengths of their variable arrays — have the same
// Metadata, and each item the same DefOffset as the other's item of the
// same field: where its definition starts, its name first. Fields of one
// event have different offsets, two of one name too; an array's elements
// and end have the array's, a struct's end the struct's, and the fields
// of a struct array's elements the same in each element.
func TestDefOffset(t *testing.T) {
	event := func(n int, s string) (Event, []Item) {
		var b Builder
		b.Reset("Ev;tag=1", Header{Level: 4, Opcode: Opcode(n)})
		b.AddInt32("a", int32(n), 0)
		b.StructField("st", 2, 0)
		b.AddString("s;attr", s, FormatDefault, 0)
		b.ArrayField("v", EncodingValue16, FormatDefault, 0, 0)
		b.AppendCount(uint16(n))
		for i := range n {
			b.AppendValue16(uint16(i))
		}
		b.StructArrayField("sa", 1, 0, 2)
		b.Field("x", EncodingValue8, FormatDefault, 0)
		b.AppendValue8(uint8(n))
		b.AppendValue8(uint8(n + 1))
		b.AddUint8("x", uint8(n+2), FormatDefault, 0)
		raw, err := b.AppendEvent(nil)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := Decode("P_L4K1", raw)
		if err != nil {
			t.Fatal(err)
		}
		var items []Item
		f := ev.Fields()
		for f.Next() {
			items = append(items, *f.Item())
		}
		if f.Err() != nil {
			t.Fatal(f.Err())
		}
		return ev, items
	}
	ev1, items1 := event(1, "one")
	ev2, items2 := event(3, "three, longer")
	if !bytes.Equal(ev1.Metadata(), ev2.Metadata()) {
		t.Fatalf("metadata % x and % x differ", ev1.Metadata(), ev2.Metadata())
	}
	if meta := ev1.Metadata(); !bytes.HasPrefix(meta, append(append([]byte(nil), ev1.Name...), 0)) {
		t.Fatalf("metadata % x does not start with the name %q", meta, ev1.Name)
	}
	// The offsets of the fields, in order, without the elements of v
	// (whose number differs).
	defs := func(ev Event, items []Item) []int {
		t.Helper()
		var offs []int
		byName := map[string]int{}
		for _, it := range items {
			off := it.DefOffset()
			if def := ev.Metadata()[off:]; !bytes.HasPrefix(def, append(append([]byte(nil), it.Name...), 0)) {
				t.Fatalf("%v %q: the definition at %d is % x", it.Kind, it.Name, off, def)
			}
			if prev, ok := byName[string(it.Name)]; ok && prev != off && string(it.Name) != "x" { // two fields are named x
				t.Fatalf("%v %q at %d, and at %d before", it.Kind, it.Name, off, prev)
			}
			byName[string(it.Name)] = off
			if string(it.Name) != "v" || it.Kind != ItemValue {
				offs = append(offs, off)
			}
		}
		return offs
	}
	o1, o2 := defs(ev1, items1), defs(ev2, items2)
	if len(o1) != len(o2) {
		t.Fatalf("%d items and %d", len(o1), len(o2))
	}
	for i := range o1 {
		if o1[i] != o2[i] {
			t.Fatalf("item %d: offset %d, and %d in the other event", i, o1[i], o2[i])
		}
	}
	// x in each of sa's two elements, and the x after sa.
	var xs []int
	for _, it := range items1 {
		if string(it.Name) == "x" {
			xs = append(xs, it.DefOffset())
		}
	}
	if len(xs) != 3 || xs[0] != xs[1] || xs[1] == xs[2] {
		t.Fatalf("the offsets of x in sa's two elements and after sa: %v, want the first two the same, the third another", xs)
	}
}
