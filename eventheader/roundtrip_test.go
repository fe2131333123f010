package eventheader

import (
	"bytes"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// gdef is a random field definition.
type gdef struct {
	name   string
	enc    Encoding
	format Format
	tag    uint16
	array  int // 0 scalar, 1 constant-length, 2 variable-length
	count  uint16
	fields []gdef // struct
}

func genDef(t *rapid.T, depth int, label string) gdef {
	d := gdef{
		name: rapid.SampledFrom([]string{"f", "x;attr=1", "名前", ""}).Draw(t, label+"name"),
		tag:  rapid.SampledFrom([]uint16{0, 0, 1, 0xbeef}).Draw(t, label+"tag"),
	}
	if depth < 3 && rapid.IntRange(0, 4).Draw(t, label+"isStruct") == 0 {
		d.enc = EncodingStruct
		n := rapid.IntRange(1, 3).Draw(t, label+"nfields")
		d.format = Format(n)
		for i := range n {
			d.fields = append(d.fields, genDef(t, depth+1, label+strings.Repeat(".", i+1)))
		}
	} else {
		d.enc = Encoding(rapid.IntRange(int(EncodingValue8), int(EncodingMax)-1).Draw(t, label+"enc"))
		d.format = Format(rapid.IntRange(0, int(FormatIPAddressObsolete)).Draw(t, label+"format"))
	}
	d.array = rapid.IntRange(0, 2).Draw(t, label+"array")
	if d.array == 1 {
		d.count = uint16(rapid.IntRange(1, 3).Draw(t, label+"count"))
	}
	return d
}

func emitDef(b *Builder, d *gdef) {
	count := d.count // 0 for a variable-length array
	switch {
	case d.enc == EncodingStruct && d.array != 0:
		b.StructArrayField(d.name, len(d.fields), d.tag, count)
	case d.enc == EncodingStruct:
		b.StructField(d.name, len(d.fields), d.tag)
	case d.array != 0:
		b.ArrayField(d.name, d.enc, d.format, d.tag, count)
	default:
		b.Field(d.name, d.enc, d.format, d.tag)
	}
	for i := range d.fields {
		emitDef(b, &d.fields[i])
	}
}

func emitValues(t *rapid.T, b *Builder, d *gdef) {
	n := 1
	switch d.array {
	case 1:
		n = int(d.count)
	case 2:
		n = rapid.IntRange(0, 3).Draw(t, "n")
		b.AppendCount(uint16(n))
	}
	for range n {
		if d.enc == EncodingStruct {
			for i := range d.fields {
				emitValues(t, b, &d.fields[i])
			}
			continue
		}
		if sz := d.enc.FixedSize(); sz != 0 {
			b.AppendRaw(rapid.SliceOfN(rapid.Byte(), sz, sz).Draw(t, "v"))
			continue
		}
		cs := d.enc.CharSize()
		units := rapid.SliceOfN(rapid.Byte(), 0, 6).Draw(t, "s")
		units = units[:len(units)/cs*cs]
		if d.enc >= EncodingZStringChar8 && d.enc <= EncodingZStringChar32 {
			for i := 0; i < len(units); i += cs {
				units[i] |= 1 // no NUL character
			}
			b.AppendZString(d.enc, units)
		} else {
			b.AppendCounted(d.enc, units)
		}
	}
}

// TestRoundTrip: random events, built, decoded and built again from what
// the decoder yields, are the same bytes; and they show as JSON.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := Header{
			Version: rapid.Uint8().Draw(t, "version"),
			ID:      rapid.Uint16().Draw(t, "id"),
			Tag:     rapid.Uint16().Draw(t, "tag"),
			Opcode:  Opcode(rapid.Uint8().Draw(t, "opcode")),
			Level:   Level(rapid.IntRange(1, 255).Draw(t, "level")),
		}
		tp := TracepointName{Provider: "Prov_X", Level: h.Level, Keyword: rapid.Uint64().Draw(t, "keyword"),
			Options: rapid.SampledFrom([]string{"", "Gmygroup"}).Draw(t, "options")}
		var b Builder
		b.Reset(rapid.SampledFrom([]string{"Ev", "Ev;a=b;;c", ""}).Draw(t, "name"), h)
		switch rapid.IntRange(0, 2).Draw(t, "activity") {
		case 1:
			id := [16]byte{1, 2, 3}
			b.SetActivityID(&id, nil)
		case 2:
			id, rel := [16]byte{1, 2, 3}, [16]byte{4, 5, 6}
			b.SetActivityID(&id, &rel)
		}
		defs := make([]gdef, rapid.IntRange(0, 5).Draw(t, "nfields"))
		for i := range defs {
			defs[i] = genDef(t, 0, "")
			emitDef(&b, &defs[i])
		}
		for i := range defs {
			emitValues(t, &b, &defs[i])
		}
		built, err := b.AppendEvent(nil)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := Decode(tp.String(), built)
		if err != nil {
			t.Fatalf("decode: %v\n% x", err, built)
		}
		if ev.Header.ID != h.ID || ev.Header.Tag != h.Tag || ev.Tracepoint != tp {
			t.Fatalf("header %+v tracepoint %+v, want %+v %+v", ev.Header, ev.Tracepoint, h, tp)
		}
		if _, err := ev.AppendJSON(nil); err != nil {
			t.Fatal(err)
		}
		var b2 Builder
		again, err := reencode(&b2, &ev, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, built) {
			t.Fatalf("rebuilt\n% x\nbuilt\n% x", again, built)
		}
	})
}
