package eventheader

import (
	"testing"
)

// build3 builds the 3-field event of the benchmarks: a status, a path, a
// duration — what a request log line holds.
func build3(b *Builder, dst []byte) ([]byte, error) {
	b.Reset("Request", Header{Level: LevelInformation})
	b.AddUint32("status", 200, FormatDefault, 0)
	b.AddString("path", "/index.html", FormatDefault, 0)
	b.AddFloat64("seconds", 0.0125, 0)
	return b.AppendEvent(dst)
}

// buildAll uses every encoding, the formats, a struct, and both kinds of array.
func buildAll(b *Builder, dst []byte) ([]byte, error) {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	b.Reset("All;k=v", Header{Level: LevelVerbose, ID: 7, Version: 1, Tag: 0x1234, Opcode: OpcodeActivityStart})
	b.SetActivityID(&id, &id)
	b.AddUint8("u8", 200, FormatDefault, 0)
	b.AddUint8("i8", 0x80, FormatSignedInt, 0)
	b.AddUint8("h8", 0xc8, FormatHexInt, 0)
	b.AddBool("b", true, 0)
	b.AddUint8("c8", 'A', FormatString8, 0)
	b.AddUint16("u16", 60000, FormatDefault, 0x10)
	b.AddUint16("c16", 'B', FormatStringUTF, 0)
	b.AddPort("port", 80, 0)
	b.AddInt32("i32", -5, 0)
	b.AddUint32("errno", 2, FormatErrno, 0)
	b.AddUint32("pid", 1234, FormatPid, 0)
	b.AddUint32("t32", 1, FormatTime, 0)
	b.AddFloat32("f32", 3.14, 0)
	b.AddIPv4("ip4", [4]byte{127, 0, 0, 1}, 0)
	b.AddInt64("i64", -9, 0)
	b.AddUint64("h64", 0xf00d, FormatHexInt, 0)
	b.AddUint64("t64", 1, FormatTime, 0)
	b.AddFloat64("f64", 6.28, 0)
	b.AddUUID("uuid", id, 0)
	b.AddIPv6("ip6", id, 0)
	b.AddZString("z8", "hjkl", FormatDefault, 0)
	b.Field("z16", EncodingZStringChar16, FormatStringUTF, 0)
	b.AppendZString(EncodingZStringChar16, []byte{'h', 0, 'i', 0})
	b.Field("z32", EncodingZStringChar32, FormatStringXML, 0)
	b.AppendZString(EncodingZStringChar32, []byte{'h', 0, 0, 0})
	b.AddString("s8", "{}", FormatStringJSON, 0)
	b.Field("s16", EncodingStringLength16Char16, FormatStringUTFBOM, 0)
	b.AppendCounted(EncodingStringLength16Char16, []byte{0xff, 0xfe, 'h', 0})
	b.Field("s32", EncodingStringLength16Char32, FormatDefault, 0)
	b.AppendCounted(EncodingStringLength16Char32, []byte{'h', 0, 0, 0})
	b.AddBinary("bin", []byte{1, 2, 3}, FormatHexBytes, 0)
	b.AddString("str8", "\xf0", FormatString8, 0)
	b.AddString16("u16s", "h€😀", FormatDefault, 0)
	b.AddString32("u32s", "h😀", FormatDefault, 0)
	b.AddZString16("u16z", "h😀", FormatStringJSON, 0)
	b.AddZString32("u32z", "h😀", FormatDefault, 0)
	b.AddUint8("x8", 0xab, FormatHexBytes, 0)
	b.AddUint16("i16", 0x8000, FormatSignedInt, 0)
	b.AddUint16("h16", 0xbeef, FormatHexInt, 0)
	b.AddUint16("b16", 2, FormatBoolean, 0)
	b.AddUint32("h32", 0xdeadbeef, FormatHexInt, 0)
	b.AddUint32("x32", 1, FormatHexBytes, 0)
	b.AddUint32("c32", 0x1f600, FormatStringUTF, 0)
	b.AddUint32("b32", 0, FormatBoolean, 0)
	b.AddUint64("u64", 1<<63, FormatDefault, 0)
	b.AddUint64("x64", 1, FormatHexBytes, 0)
	b.Field("x128", EncodingValue128, FormatDefault, 0)
	b.AppendRaw(id[:])
	b.Field("ip6old", EncodingValue128, FormatIPAddressObsolete, 0)
	b.AppendRaw([]byte{15: 1})
	b.AddZString("zx", "hi", FormatHexBytes, 0)
	b.AddZString("z8s", "\xe9", FormatString8, 0)
	b.AddBinary("binuuid", id[:], FormatUUID, 0)
	b.AddBinary("binnull", nil, FormatSignedInt, 0)
	b.AddString("sxml", "<a/>", FormatStringXML, 0)
	b.StructField("st", 2, 0xbeef)
	b.AddUint8("a", 1, FormatDefault, 0)
	b.AddString("b", "x", FormatDefault, 0)
	b.ArrayField("carr", EncodingValue16, FormatHexInt, 0, 3)
	b.AppendValue16(1)
	b.AppendValue16(2)
	b.AppendValue16(3)
	b.ArrayField("varr", EncodingZStringChar8, FormatDefault, 0, 0)
	b.AppendCount(2)
	b.AppendZString(EncodingZStringChar8, []byte("ab"))
	b.AppendZString(EncodingZStringChar8, []byte("c"))
	b.StructArrayField("sarr", 1, 0, 0)
	b.Field("k", EncodingValue8, FormatString8, 0)
	b.AppendCount(2)
	b.AppendValue8('K')
	b.AppendValue8('L')
	return b.AppendEvent(dst)
}

const allJSON = `{ "n": "P:All", "u8": 200, "i8": -128, "h8": "0xC8", "b": true, "c8": "A", "u16;tag=0x10": 60000, "c16": "B", "port": 80, ` +
	`"i32": -5, "errno": "ENOENT(2)", "pid": 1234, "t32": "1970-01-01T00:00:01", "f32": 3.14, "ip4": "127.0.0.1", "i64": -9, "h64": "0xF00D", ` +
	`"t64": "1970-01-01T00:00:01", "f64": 6.28, "uuid": "01020304-0506-0708-090a-0b0c0d0e0f10", "ip6": "102:304:506:708:90a:b0c:d0e:f10", ` +
	`"z8": "hjkl", "z16": "hi", "z32": "h", "s8": "{}", "s16": "h", "s32": "h", "bin": "01 02 03", "str8": "ð", "u16s": "h€😀", "u32s": "h😀", "u16z": "h😀", "u32z": "h😀", ` +
	`"x8": "ab", "i16": -32768, "h16": "0xBEEF", "b16": 2, "h32": "0xDEADBEEF", "x32": "01 00 00 00", "c32": "😀", "b32": false, ` +
	`"u64": 9223372036854775808, "x64": "01 00 00 00 00 00 00 00", "x128": "01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10", "ip6old": "::1", ` +
	`"zx": "68 69", "z8s": "é", "binuuid": "01020304-0506-0708-090a-0b0c0d0e0f10", "binnull": null, "sxml": "<a/>", ` +
	`"st;tag=0xBEEF": { "a": 1, "b": "x" }, "carr": [ "0x1", "0x2", "0x3" ], "varr": [ "ab", "c" ], "sarr": [ { "k": "K" }, { "k": "L" } ], ` +
	`"meta": { "id": 7, "version": 1, "level": 5, "keyword": "0x1", "opcode": 1, "tag": "0x1234", ` +
	`"activity": "01020304-0506-0708-090a-0b0c0d0e0f10", "relatedActivity": "01020304-0506-0708-090a-0b0c0d0e0f10" } }`

func TestBuildAll(t *testing.T) {
	var b Builder
	ev, err := buildAll(&b, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Decode("P_L5K1", ev)
	if err != nil {
		t.Fatal(err)
	}
	js, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(js) != allJSON {
		t.Errorf("got\n%s\nwant\n%s", js, allJSON)
	}
	if string(e.EventName()) != "All" || string(e.Name) != "All;k=v" {
		t.Errorf("name %q %q", e.EventName(), e.Name)
	}
}

// TestNoAllocs: building into a buffer with room, decoding and iterating
// do not allocate.
func TestNoAllocs(t *testing.T) {
	var b Builder
	buf := make([]byte, 0, 4096)
	buildAll(&b, buf) // warm the builder's scratch
	if n := testing.AllocsPerRun(100, func() { buildAll(&b, buf) }); n != 0 {
		t.Errorf("Builder: %v allocations per event", n)
	}
	ev, _ := buildAll(&b, buf)
	if n := testing.AllocsPerRun(100, func() {
		e, err := Decode("P_L5K1", ev)
		if err != nil {
			t.Fatal(err)
		}
		f := e.Fields()
		for f.Next() {
			_ = f.Item().Value
		}
		if f.Err() != nil {
			t.Fatal(f.Err())
		}
	}); n != 0 {
		t.Errorf("Decode and Fields: %v allocations per event", n)
	}
}

func BenchmarkBuild3Fields(b *testing.B) {
	var bl Builder
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := build3(&bl, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuildAll(b *testing.B) {
	var bl Builder
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildAll(&bl, buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode3Fields(b *testing.B) {
	var bl Builder
	ev, _ := build3(&bl, nil)
	b.ReportAllocs()
	for b.Loop() {
		e, err := Decode("P_L4K1", ev)
		if err != nil {
			b.Fatal(err)
		}
		f := e.Fields()
		for f.Next() {
		}
	}
}

// BenchmarkDecodeAll decodes an event of every encoding, its fields'
// definitions read for each event (Fields) and kept from one event to the
// next (FieldsDefs, as a reader of a layout's events does).
func BenchmarkDecodeAll(b *testing.B) {
	var bl Builder
	ev, _ := buildAll(&bl, nil)
	var defs Defs
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "Fields", true: "FieldsDefs"}[kept], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e, err := Decode("P_L5K1", ev)
				if err != nil {
					b.Fatal(err)
				}
				var f Fields
				if kept {
					f = e.FieldsDefs(&defs)
				} else {
					f = e.Fields()
				}
				for f.Next() {
				}
			}
		})
	}
}

func BenchmarkAppendJSONGolden(b *testing.B) {
	recs := readGolden(b)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range recs {
			e, _ := Decode(r.tracepoint, r.data)
			buf, _ = e.AppendJSON(buf[:0])
		}
	}
}
