package eventheader

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestTracepointNames(t *testing.T) {
	for _, c := range []struct {
		name string
		want TracepointName
	}{
		{"MyProvider_L3K2a", TracepointName{Provider: "MyProvider", Level: 3, Keyword: 0x2a}},
		{"OtherProvider_L5K0Gperf", TracepointName{Provider: "OtherProvider", Level: 5, Keyword: 0, Options: "Gperf"}},
		{"A_B_Lff" + "Kffffffffffffffff", TracepointName{Provider: "A_B", Level: 255, Keyword: ^uint64(0)}},
		{"P_L1K1AxGyZ", TracepointName{Provider: "P", Level: 1, Keyword: 1, Options: "AxGyZ"}},
	} {
		got, err := ParseTracepointName(c.name)
		if err != nil || got != c.want {
			t.Errorf("ParseTracepointName(%q) = %+v, %v; want %+v", c.name, got, err, c.want)
			continue
		}
		if s := got.String(); s != c.name {
			t.Errorf("%+v.String() = %q, want %q", got, s, c.name)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%q: Validate: %v", c.name, err)
		}
	}
	if g := (TracepointName{Options: "AxGmsftZ"}).Group(); g != "msft" {
		t.Errorf("Group() = %q", g)
	}
	for _, bad := range []string{"", "NoUnderscore", "P_", "P_K1", "P_L5", "P_L5K", "P_LAK1", "P_L5K1g", "P_L5K1G-", "P_L100K1",
		"P_L5K10000000000000000", "P_L5KA", "P\x00_L5K1", "P_L5K1 ", strings.Repeat("p", 251) + "_L5K1"} {
		if _, err := ParseTracepointName(bad); !errors.Is(err, ErrName) {
			t.Errorf("ParseTracepointName(%q) = %v, want ErrName", bad, err)
		}
	}
	for _, bad := range []TracepointName{
		{Provider: "", Level: 1}, {Provider: "a b", Level: 1}, {Provider: "a:b", Level: 1}, {Provider: "p", Level: 0},
		{Provider: "p", Level: 1, Options: "g"}, {Provider: "p", Level: 1, Options: "GaAb"}, {Provider: "p", Level: 1, Options: "G_"},
		{Provider: strings.Repeat("p", 240), Level: 1, Options: "G" + strings.Repeat("x", 20)},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrName) {
			t.Errorf("%+v.Validate() = %v, want ErrName", bad, err)
		}
	}
	tp := TracepointName{Provider: "MyProvider", Level: LevelVerbose, Keyword: 1, Options: "Gmsft"}
	if got, want := tp.Command(), "MyProvider_L5K1Gmsft u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"; got != want {
		t.Errorf("Command() = %q, want %q", got, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	ok := []byte{7, 0, 0, 0, 0, 0, 0, 5, 2, 0, 1, 0, 'E', 0}
	if _, err := Decode("P_L5K1", ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"P_L4K1", ok, ErrNotEventHeader},                                           // level differs
		{"P_L5K1", ok[:7], ErrInvalidData},                                          // short header
		{"P_L5K1", append([]byte{0x0f}, ok[1:]...), ErrNotEventHeader},              // unknown flag
		{"P_L5K1", ok[:8], ErrInvalidData},                                          // extension flag, none there
		{"P_L5K1", append([]byte{3}, ok[1:8]...), ErrNotEventHeader},                // no metadata
		{"P_L5K1", ok[:12], ErrInvalidData},                                         // extension size beyond the data
		{"P_L5K1", []byte{7, 0, 0, 0, 0, 0, 0, 5, 1, 0, 1, 0, 'E'}, ErrInvalidData}, // name not terminated
		{"P_L5K1", []byte{7, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0}, ErrInvalidData},      // extension kind 0
		{"P_L5K1", []byte{7, 0, 0, 0, 0, 0, 0, 5, 1, 0, 2, 0, 0}, ErrInvalidData},   // activity id of 1 byte
	} {
		if _, err := Decode(c.name, c.data); !errors.Is(err, c.want) {
			t.Errorf("Decode(%q, % x) = %v, want %v", c.name, c.data, err, c.want)
		}
	}
	// Field errors surface from the iterator.
	for _, meta := range [][]byte{
		{'f', 0},                       // no encoding
		{'f', 0, 0},                    // encoding 0
		{'f', 0, 31},                   // undefined encoding
		{'f', 0, byte(EncodingStruct)}, // struct of 0 fields
		{'f', 0, byte(EncodingValue8 | EncodingCArray), 0, 0}, // constant array of 0
		{'f', 0, byte(EncodingValue8 | EncodingCArray | EncodingVArray)},
		{'f', 0, byte(EncodingValue32)}, // no data
		{'f', 0, byte(EncodingZStringChar8)},
		// 65535 structs each holding 65535 structs of no field (the inner
		// struct declares a field the metadata lacks): refused, not
		// billions of items.
		{'s', 0, byte(EncodingStruct | EncodingCArray | EncodingChain), 1, 0xff, 0xff,
			't', 0, byte(EncodingStruct | EncodingCArray | EncodingChain), 1, 0xff, 0xff},
		{'s', 0, byte(EncodingStruct | EncodingVArray | EncodingChain), 3, 'a', 0, byte(EncodingValue8)},
	} {
		ev := append([]byte{7, 0, 0, 0, 0, 0, 0, 5, byte(len(meta) + 2), 0, 1, 0, 'E', 0}, meta...)
		e, err := Decode("P_L5K1", ev)
		if err != nil {
			t.Fatal(err)
		}
		f := e.Fields()
		for f.Next() {
		}
		if !errors.Is(f.Err(), ErrInvalidData) {
			t.Errorf("fields % x: Err() = %v, want ErrInvalidData", meta, f.Err())
		}
	}
}

func TestBuilderErrors(t *testing.T) {
	var b Builder
	for _, build := range []func(){
		func() { b.Field("f", EncodingStruct, 0, 0) },
		func() { b.Field("f", EncodingValue8|EncodingCArray, 0, 0) },
		func() { b.Field("f", EncodingMax, 0, 0) },
		func() { b.Field("f", EncodingValue8, FormatChain, 0) },
		func() { b.Field("f\x00", EncodingValue8, 0, 0) },
		func() { b.StructField("s", 0, 0) },
		func() { b.StructField("s", 128, 0) },
		func() { b.AppendZString(EncodingZStringChar16, []byte{1}) },
		func() { b.AppendZString(EncodingZStringChar8, []byte{'a', 0}) },
		func() { b.AppendCounted(EncodingValue32, []byte{1, 2, 3, 4}) },
		func() { b.AppendString8(strings.Repeat("x", 70000)) },
		func() { b.AddZString("z", "a\x00b", 0, 0) },
		func() { b.AddZString16("z", "a\x00b", 0, 0) },
		func() { b.AddZString32("z", "a\x00b", 0, 0) },
		func() { b.AddString16("s", strings.Repeat("x", 70000), 0, 0) },
		func() { b.AddString32("s", strings.Repeat("x", 70000), 0, 0) },
		func() {
			for i := range 7000 {
				b.Field(strings.Repeat("n", 9)+string(rune('a'+i%26)), EncodingValue8, 0, 0)
			}
		},
	} {
		b.Reset("E", Header{Level: 5})
		build()
		if _, err := b.AppendEvent(nil); !errors.Is(err, ErrBuild) {
			t.Errorf("AppendEvent() = %v, want ErrBuild", err)
		}
	}
	b.Reset("E\x00", Header{Level: 5})
	if _, err := b.AppendEvent(nil); !errors.Is(err, ErrBuild) {
		t.Errorf("NUL in the event name: %v, want ErrBuild", err)
	}
}

func TestIPv6Text(t *testing.T) {
	for _, c := range []struct {
		in   [16]byte
		want string
	}{
		{[16]byte{}, "::"},
		{[16]byte{15: 1}, "::1"},
		{[16]byte{0, 1}, "1::"},
		{[16]byte{10: 0xff, 11: 0xff, 12: 1, 13: 2, 14: 3, 15: 4}, "::ffff:1.2.3.4"},
		{[16]byte{12: 1, 13: 2, 14: 3, 15: 4}, "::1.2.3.4"},
		{[16]byte{1: 1, 7: 2, 15: 3}, "1:0:0:2::3"},
		{[16]byte{1: 1, 5: 2, 15: 3}, "1:0:2::3"},
		{[16]byte{1: 1, 3: 1, 5: 1, 7: 1, 9: 1, 11: 1, 13: 1, 15: 1}, "1:1:1:1:1:1:1:1"},
		{[16]byte{1: 1, 5: 1, 9: 1, 13: 1}, "1:0:1:0:1:0:1:0"},
		{[16]byte{1: 1, 15: 1}, "1::1"},
	} {
		if got := string(appendIPv6(nil, c.in[:])); got != c.want {
			t.Errorf("% x: %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTimeText(t *testing.T) {
	for _, c := range []struct {
		s    int64
		want string
	}{
		{0, "1970-01-01T00:00:00"}, {-1, "1969-12-31T23:59:59"}, {951782400, "2000-02-29T00:00:00"},
		{-62135596800, "0001-01-01T00:00:00"}, {-62135596801, "0000-12-31T23:59:59"},
		// gmtime_r's limits: the year less 1900 must fit a C int.
		{67768036191676799, "2147485547-12-31T23:59:59"}, {67768036191676800, "TIME(67768036191676800)"},
		{-67768040609740800, "-2147481748-01-01T00:00:00"}, {-67768040609740801, "TIME(-67768040609740801)"},
		{-62198755200, "-001-01-01T00:00:00"},
	} {
		if got := string(appendTime(nil, c.s)); got != c.want {
			t.Errorf("%d: %q, want %q", c.s, got, c.want)
		}
	}
}

// TestBigEndian decodes an event written big-endian (flags without the
// little-endian bit): header id and tag, extension sizes and kinds,
// constant array counts and values are read in that order.
func TestBigEndian(t *testing.T) {
	meta := []byte{'E', 0, 'a', 0, byte(EncodingValue16 | EncodingCArray | EncodingChain), byte(FormatHexInt | FormatChain), 0x12, 0x34, 0, 2,
		's', 0, byte(EncodingStringLength16Char16)}
	ev := []byte{byte(FlagPointer64 | FlagExtension), 1, 0x01, 0x02, 0x03, 0x04, 0, 5, 0, byte(len(meta)), 0, 1}
	ev = append(ev, meta...)
	ev = append(ev, 0xab, 0xcd, 0, 1, 0, 2, 0, 'h', 0, 'i')
	e, err := Decode("P_L5K0", ev)
	if err != nil {
		t.Fatal(err)
	}
	if e.Header.ID != 0x0102 || e.Header.Tag != 0x0304 {
		t.Errorf("id %#x tag %#x", e.Header.ID, e.Header.Tag)
	}
	js, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{ "n": "P:E", "a;tag=0x1234": [ "0xABCD", "0x1" ], "s": "hi", "meta": { "id": 258, "version": 1, "level": 5, "tag": "0x304" } }`
	if string(js) != want {
		t.Errorf("got\n%s\nwant\n%s", js, want)
	}
}

func TestFloatText(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{3.14, 64, "3.14"}, {1e20, 64, "1e+20"}, {1e15, 64, "1e+15"}, {123e15, 64, "1.23e+17"}, {1e21, 64, "1e+21"}, {123456, 64, "123456"},
		{1e-5, 64, "1e-05"}, {0.001, 64, "0.001"}, {0.0001, 64, "1e-04"}, {5e-324, 64, "5e-324"},
		{1.5e300, 64, "1.5e+300"}, {0, 64, "0"}, {-2.5, 64, "-2.5"}, {float64(float32(1) / 3), 32, "0.33333334"},
		{math.Inf(-1), 64, `"-inf"`}, {math.Inf(1), 64, `"inf"`}, {math.NaN(), 64, `"nan"`}, {-math.NaN(), 64, `"-nan"`},
	} {
		if got := string(appendFloat(nil, c.f, c.bits)); got != c.want {
			t.Errorf("%v: %q, want %q", c.f, got, c.want)
		}
	}
}

// FuzzParseTracepointName: any string parses or is refused without a
// panic, and a parsed name formats back to itself.
func FuzzParseTracepointName(f *testing.F) {
	for _, s := range []string{"MyProvider_L3K2a", "P_L5K0Gperf", "A_B_LffKffffffffffffffff", "P_L1K1AxGyZ", "P_L5K", "_L1K1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTracepointName(s)
		if err != nil {
			return
		}
		// Leading zeros in the hex are accepted but not written back.
		if got := tp.String(); got != s {
			again, err := ParseTracepointName(got)
			if err != nil || again != tp {
				t.Fatalf("%q parsed as %+v formats as %q, which parses as %+v, %v", s, tp, got, again, err)
			}
		}
	})
}

func iterate(t *testing.T, ev []byte) (items, maxDepth int, err error) {
	t.Helper()
	e, err := Decode("P_L5K1", ev)
	if err != nil {
		t.Fatal(err)
	}
	f := e.Fields()
	for f.Next() {
		items++
		maxDepth = max(maxDepth, f.Item().Depth)
	}
	return items, maxDepth, f.Err()
}

// TestNesting: what Microsoft's decoder accepts (8 nested structs, here
// arrays of structs each holding an array) decodes; deeper than MaxDepth
// is refused.
func TestNesting(t *testing.T) {
	var b Builder
	b.Reset("E", Header{Level: 5})
	for range 8 {
		b.StructArrayField("s", 2, 0, 1)
		b.ArrayField("a", EncodingValue8, 0, 0, 1)
		b.AppendValue8(1)
	}
	b.AddUint8("last", 2, 0, 0)
	ev, err := b.AppendEvent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if items, depth, err := iterate(t, ev); err != nil || depth != 17 || items != 8*7+1 {
		t.Errorf("8 nested struct arrays: %d items, depth %d, %v", items, depth, err)
	}
	b.Reset("E", Header{Level: 5})
	for range MaxDepth + 1 {
		b.StructField("s", 1, 0)
	}
	b.AddUint8("last", 2, 0, 0)
	ev, _ = b.AppendEvent(nil)
	if _, _, err := iterate(t, ev); !errors.Is(err, ErrInvalidData) {
		t.Errorf("%d nested structs: %v, want ErrInvalidData", MaxDepth+1, err)
	}
	b.Reset("E", Header{Level: 5})
	for range MaxDepth {
		b.StructField("s", 1, 0)
	}
	b.AddUint8("last", 2, 0, 0)
	ev, _ = b.AppendEvent(nil)
	if _, depth, err := iterate(t, ev); err != nil || depth != MaxDepth {
		t.Errorf("%d nested structs: depth %d, %v", MaxDepth, depth, err)
	}
}

func TestItemInts(t *testing.T) {
	var b Builder
	b.Reset("E", Header{Level: 5})
	b.AddUint8("a", 0xff, 0, 0)
	b.AddUint16("b", 0xfffe, 0, 0)
	b.AddInt32("c", -3, 0)
	b.AddInt64("d", -4, 0)
	b.AddString("e", "xyz", 0, 0)
	ev, _ := b.AppendEvent(nil)
	e, err := Decode("P_L5K1", ev)
	if err != nil {
		t.Fatal(err)
	}
	f := e.Fields()
	var got []int64
	for f.Next() {
		i, ok := f.Item().Int()
		u, uok := f.Item().Uint()
		if ok != uok {
			t.Fatal("Int and Uint disagree on the size")
		}
		if ok {
			got = append(got, i, int64(u))
		}
	}
	want := []int64{-1, 0xff, -2, 0xfffe, -3, 0xfffffffd, -4, -4}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestFromFormat(t *testing.T) {
	fields := []string{"eventheader_flags", "version", "id", "tag", "opcode", "level"}
	at := func(f []string) func(int) string { return func(i int) string { return f[i] } }
	for _, c := range []struct {
		name   string
		fields []string
		want   string
		ok     bool
	}{
		{"MyProvider_L4K1", fields, "MyProvider_L4K1", true},
		{"MyProvider_L4K1Gx.1a", fields, "MyProvider_L4K1Gx", true}, // a multi-format registration
		{"MyProvider_L4K1.zz", fields, "", false},
		{"myapp_request", fields, "", false},
		{"MyProvider_L4K1", fields[:5], "", false},
		{"MyProvider_L4K1", []string{"eventheader_flags", "version", "id", "tag", "opcode", "lvl"}, "", false},
	} {
		got, ok := FromFormat(c.name, len(c.fields), at(c.fields))
		if got != c.want || ok != c.ok {
			t.Errorf("FromFormat(%q, %v) = %q, %v; want %q, %v", c.name, c.fields, got, ok, c.want, c.ok)
		}
	}
}
