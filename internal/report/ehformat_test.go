package report_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/eventheadertest"
	"github.com/uetrace/uetrace/internal/report"
)

// ehFormatCase is one field format of EventHeader, built with
// eventheader.Builder into an event of its own, and the JSON value report
// must show for it. golden names the same value in Microsoft's decoder's
// output for its own test providers (the interop vectors): the event and
// the member, which must hold want too.
type ehFormatCase struct {
	name   string // of the case and of the one field
	build  func(b *eventheader.Builder)
	want   string // the field's value, compact JSON
	golden [2]string
}

// ehFormatCases are the formats and cases that builtEvents (TestEventHeaderJSON)
// does not show: there, default, signed and hex integers, errno of a known
// value, IPv4, port, UUID, a time in range, a bool 0/1, a tagged and an
// invalid UTF-8 string, a float64, a struct and arrays.
var ehFormatCases = []ehFormatCase{
	{"i8", func(b *eventheader.Builder) { b.AddUint8("i8", 0x80, eventheader.FormatSignedInt, 0) }, `-128`, [2]string{"TestProviderC:i8", "(-128)"}},
	{"hu8", func(b *eventheader.Builder) { b.AddUint8("hu8", 200, eventheader.FormatHexInt, 0) }, `"0xC8"`, [2]string{"TestProviderC:hu8", "u8"}},
	{"u64max", func(b *eventheader.Builder) { b.AddUint64("u64max", math.MaxUint64, eventheader.FormatDefault, 0) }, `18446744073709551615`, [2]string{"TestProviderC:u64", "(18446744073709551615UL)"}},
	{"pid", func(b *eventheader.Builder) { b.AddUint32("pid", math.MaxInt32, eventheader.FormatPid, 0) }, `2147483647`, [2]string{"TestProviderC:pid", "(2147483647)"}},
	{"errnoUnknown", func(b *eventheader.Builder) { b.AddUint32("errnoUnknown", 1<<31, eventheader.FormatErrno, 0) }, `"ERRNO(-2147483648)"`, [2]string{"TestProviderC:errno", "(-2147483647-1)"}},
	{"errno131", func(b *eventheader.Builder) { b.AddUint32("errno131", 131, eventheader.FormatErrno, 0) }, `"ENOTRECOVERABLE(131)"`, [2]string{"TestProviderC:errno", "131"}},
	{"t32min", func(b *eventheader.Builder) { b.AddUint32("t32min", 1<<31, eventheader.FormatTime, 0) }, `"1901-12-13T20:45:52"`, [2]string{"TestProviderC:t32", "(-2147483647-1)"}},
	{"t64big", func(b *eventheader.Builder) { b.AddUint64("t64big", 9000000000000000000, eventheader.FormatTime, 0) }, `"TIME(9000000000000000000)"`, [2]string{"TestProviderC:t64", "i64"}},
	{"t64old", func(b *eventheader.Builder) {
		b.Field("t64old", eventheader.EncodingValue64, eventheader.FormatTime, 0)
		old := int64(-11644473601)
		b.AppendValue64(uint64(old))
	}, `"1600-12-31T23:59:59"`, [2]string{"TestProviderC:t64", "-11644473601"}},
	{"b8other", func(b *eventheader.Builder) { b.AddUint8("b8other", 255, eventheader.FormatBoolean, 0) }, `255`, [2]string{"TestProviderC:b8", "(255)"}},
	{"b32other", func(b *eventheader.Builder) { b.AddUint32("b32other", 1<<31, eventheader.FormatBoolean, 0) }, `-2147483648`, [2]string{"TestProviderC:b32", "(-2147483647-1)"}},
	{"b16", func(b *eventheader.Builder) { b.AddUint16("b16", 1, eventheader.FormatBoolean, 0) }, `true`, [2]string{"TestProviderC:Bool16", "true16"}},
	{"f32", func(b *eventheader.Builder) { b.AddFloat32("f32", 3.14, 0) }, `3.14`, [2]string{"TestProviderC:f32", "f32"}},
	{"f32third", func(b *eventheader.Builder) { b.AddFloat32("f32third", 1.0/3, 0) }, `0.33333334`, [2]string{"TestProviderC:f32", "1/3"}},
	{"f64inf", func(b *eventheader.Builder) { b.AddFloat64("f64inf", math.Inf(-1), 0) }, `"-inf"`, [2]string{"TestProviderC:f64", "-Inf"}},
	{"ch", func(b *eventheader.Builder) { b.AddUint8("ch", 0xfe, eventheader.FormatString8, 0) }, `"þ"`, [2]string{"TestProviderC:ch", "FE"}},
	{"u16ch", func(b *eventheader.Builder) { b.AddUint16("u16ch", 0xfffe, eventheader.FormatStringUTF, 0) }, `"\uFFFE"`, [2]string{"TestProviderC:u16ch", "FFFE"}},
	{"u32ch", func(b *eventheader.Builder) { b.AddUint32("u32ch", 0x10ffff, eventheader.FormatStringUTF, 0) }, "\"\U0010FFFF\"", [2]string{"TestProviderC:u32ch", "10FFFF"}},
	{"hexptr", func(b *eventheader.Builder) { b.AddUint64("hexptr", 0xFFFFFFFFFFFFCFC7, eventheader.FormatHexInt, 0) }, `"0xFFFFFFFFFFFFCFC7"`, [2]string{"TestProviderC:ptr", "pSamplePtr"}},
	{"ipv6", func(b *eventheader.Builder) {
		b.AddIPv6("ipv6", [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 0)
	}, `"102:304:506:708:90a:b0c:d0e:f10"`, [2]string{"TestProviderC:ipV6", "ipv6"}},
	{"ipv4max", func(b *eventheader.Builder) { b.AddIPv4("ipv4max", [4]byte{255, 255, 255, 255}, 0) }, `"255.255.255.255"`, [2]string{"TestProviderC:ipV4", "(4294967295U)"}},
	{"bin", func(b *eventheader.Builder) { b.AddBinary("bin", []byte("HowAr"), eventheader.FormatDefault, 0) }, `"48 6f 77 41 72"`, [2]string{"TestProviderC:bin", "ch10"}},
	{"v128", func(b *eventheader.Builder) {
		b.Field("v128", eventheader.EncodingValue128, eventheader.FormatDefault, 0)
		b.AppendRaw([]byte{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8})
	}, `"01 02 03 04 05 06 07 08 01 02 03 04 05 06 07 08"`, [2]string{"TestProviderC:Default", "V128"}},
	{"hex16", func(b *eventheader.Builder) { b.AddUint16("hex16", 0x0201, eventheader.FormatHexBytes, 0) }, `"01 02"`, [2]string{"TestProviderC:HexBytes", "V16"}},
	{"hexNChar16", func(b *eventheader.Builder) { b.AddZString16("hexNChar16", "hjkl", eventheader.FormatHexBytes, 0) }, `"68 00 6a 00 6b 00 6c 00"`, [2]string{"TestProviderC:HexBytes", "NChar16"}},
	{"LChar16", func(b *eventheader.Builder) { b.AddString16("LChar16", "hjkl", eventheader.FormatDefault, 0) }, `"hjkl"`, [2]string{"TestProviderC:Default", "LChar16"}},
	{"NChar32", func(b *eventheader.Builder) { b.AddZString32("NChar32", "hjkl", eventheader.FormatDefault, 0) }, `"hjkl"`, [2]string{"TestProviderC:Default", "NChar32"}},
	{"json", func(b *eventheader.Builder) { b.AddZString("json", "hjkl", eventheader.FormatStringJSON, 0) }, `"hjkl"`, [2]string{"TestProviderC:StringJson-NoBom", "NChar8"}},
	{"xml", func(b *eventheader.Builder) { b.AddString("xml", "hjkl", eventheader.FormatStringXML, 0) }, `"hjkl"`, [2]string{"TestProviderC:StringXml-NoBom", "LChar8"}},
	{"bom", func(b *eventheader.Builder) {
		b.AddString("bom", "\xef\xbb\xbfhjkl", eventheader.FormatStringUTFBOM, 0)
	}, `"hjkl"`, [2]string{"TestProviderC:StringUtfBom-Bom", "LChar8"}},
	{"empty", func(b *eventheader.Builder) {
		b.ArrayField("empty", eventheader.EncodingValue128, eventheader.FormatUUID, 0, 0)
		b.AppendCount(0)
	}, `[]`, [2]string{"TestProviderC:ag", "s0"}},
	{"a4", func(b *eventheader.Builder) {
		b.ArrayField("a4", eventheader.EncodingValue8, eventheader.FormatString8, 0, 4)
		b.AppendRaw([]byte("HowA"))
	}, `["H","o","w","A"]`, [2]string{"TestProviderC:ach", "a4"}},
	{"strings", func(b *eventheader.Builder) {
		b.ArrayField("strings", eventheader.EncodingStringLength16Char8, eventheader.FormatDefault, 0, 0)
		b.AppendCount(3)
		b.AppendString8("ABC")
		b.AppendString8("")
		b.AppendString8("XYZ")
	}, `["ABC","","XYZ"]`, [2]string{"TestProviderC:PackedComplexArray", "MyStrings3"}},
	{"Struct20", func(b *eventheader.Builder) {
		b.StructField("Struct20", 2, 0xbeef)
		b.AddString("hi", "hi", eventheader.FormatDefault, 0x12)
		b.ArrayField("ch10", eventheader.EncodingValue8, eventheader.FormatString8, 0x10, 3)
		b.AppendRaw([]byte("How"))
	}, `{"hi;tag=0x12":"hi","ch10;tag=0x10":["H","o","w"]}`, [2]string{"TestProviderC:CScalars3", "Struct20;tag=0xBEEF"}},
	{"control", func(b *eventheader.Builder) { b.AddString("control", "a\tb\x01\"\\", eventheader.FormatDefault, 0) }, `"a\tb\u0001\"\\"`, [2]string{}},
}

// TestEventHeaderJSONFormats reports an event per case through report's
// JSON lines: the field's value must be the case's, and Microsoft's
// decoder's for the same value when the interop vectors are here.
func TestEventHeaderJSONFormats(t *testing.T) {
	golden := ehGolden(t)
	var tps []string
	var evs [][]byte
	var b eventheader.Builder
	for _, c := range ehFormatCases {
		b.Reset(c.name, eventheader.Header{Level: eventheader.LevelVerbose})
		c.build(&b)
		ev, err := b.AppendEvent(nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tps, evs = append(tps, "MyApp_L5K1"), append(evs, ev)
	}
	// And the metadata of Microsoft's CScalars3: id, version, level,
	// keyword (from the tracepoint's name), opcode and tag.
	b.Reset("meta", eventheader.Header{ID: 1000, Version: 11, Level: eventheader.LevelInformation, Opcode: 3, Tag: 0x1234})
	ev, err := b.AppendEvent(nil)
	if err != nil {
		t.Fatal(err)
	}
	tps, evs = append(tps, "MyApp_L4K85"), append(evs, ev)
	out, sum := run(t, ehFile(t, tps, evs), report.JSON)
	if sum.Samples != uint64(len(evs)) || sum.Undecoded != 0 {
		t.Errorf("summary %+v", sum)
	}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(lines) != len(evs) {
		t.Fatalf("%d lines for %d events", len(lines), len(evs))
	}
	var meta struct{ Meta json.RawMessage }
	if err := json.Unmarshal(lines[len(lines)-1], &meta); err != nil {
		t.Fatal(err)
	}
	const wantMeta = `{"id":1000,"version":11,"level":4,"keyword":"0x85","opcode":3,"tag":"0x1234"}`
	if string(meta.Meta) != wantMeta {
		t.Errorf("meta %s, want %s", meta.Meta, wantMeta)
	}
	if ms, ok := golden["TestProviderC:CScalars3"]; ok {
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(member(t, ms, "meta"))); err != nil || c.String() != normalJSON(t, []byte(wantMeta)) {
			t.Errorf("meta: Microsoft's decoder shows %s for CScalars3 (%v)", c.Bytes(), err)
		}
	}
	checked := 0
	for i, c := range ehFormatCases {
		var line struct{ Fields json.RawMessage }
		if err := json.Unmarshal(lines[i], &line); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, lines[i])
		}
		key := c.name
		if c.name == "Struct20" {
			key += ";tag=0xBEEF" // the member's name has the field's tag
		}
		got := member(t, line.Fields, key)
		if got != normalJSON(t, []byte(c.want)) {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if golden == nil || c.golden[0] == "" {
			continue
		}
		ms, ok := golden[c.golden[0]]
		if !ok {
			t.Errorf("%s: no %s in Microsoft's output", c.name, c.golden[0])
			continue
		}
		if m := member(t, ms, c.golden[1]); m != got {
			t.Errorf("%s: %s, Microsoft's decoder shows %s (%s %q)", c.name, got, m, c.golden[0], c.golden[1])
		}
		checked++
	}
	t.Logf("%d of %d formats checked against Microsoft's decoder", checked, len(ehFormatCases))
}

// ehGolden returns Microsoft's JSON of each event of the interop vectors
// by its "n" (the first of a name).
func ehGolden(t *testing.T) map[string]json.RawMessage {
	vecs, err := eventheadertest.Read()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]json.RawMessage{}
	for _, v := range vecs {
		var n struct{ N string }
		if err := json.Unmarshal(v.JSON, &n); err != nil {
			continue // invalid UTF-8 on purpose: not a line the cases use
		}
		if _, ok := m[n.N]; !ok {
			m[n.N] = v.JSON
		}
	}
	return m
}

// member returns the compact JSON of the first member key of object obj.
func member(t *testing.T, obj json.RawMessage, key string) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", obj)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if k == key {
			return normalJSON(t, v)
		}
	}
	t.Errorf("no member %q in %s", key, obj)
	return ""
}

// normalJSON returns v compact, its strings escaped one way, its numbers
// as written and its objects' members sorted, so that values compare by
// what they mean: Microsoft's decoder writes "\uFFFE" as the character,
// report may escape it. (The order of members, and repeated names, are
// checked byte for byte by TestEventHeaderInterop.)
func normalJSON(t *testing.T, v []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	b, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
