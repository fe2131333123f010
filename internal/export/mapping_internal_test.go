package export

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/uetrace/uetrace/eventheader"
)

// TestEHScalar: the values ehScalar takes from their bytes are what their
// JSON makes of them (ehValueJSON), for every value encoding and format —
// integers at their extremes, floats NaN, infinite, negative zero and
// float32s, booleans past 1, strings with what JSON escapes and with
// invalid UTF-8 — and it takes at least the integers, floats and UTF-8
// strings most events hold.
func TestEHScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 3))
	special := [][]byte{
		{0}, {1}, {2}, {0x7f}, {0x80}, {0xff},
		{0, 0}, {1, 0}, {0xff, 0xff}, {0x00, 0x80}, {0x50, 0x00},
		{0, 0, 0, 0}, {1, 0, 0, 0}, {0xff, 0xff, 0xff, 0x7f}, {0, 0, 0, 0x80}, {0xff, 0xff, 0xff, 0xff},
		make([]byte, 8), {1, 0, 0, 0, 0, 0, 0, 0},
		binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.1)),
		binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN()))),
		binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.Inf(-1)))),
		binary.LittleEndian.AppendUint64(nil, math.MaxInt64), binary.LittleEndian.AppendUint64(nil, math.MaxInt64+1),
		binary.LittleEndian.AppendUint64(nil, math.MaxUint64),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Inf(1))),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.Copysign(0, -1))),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e300)),
		binary.LittleEndian.AppendUint64(nil, math.Float64bits(-2.5e-310)),
	}
	texts := []string{"", "plain", `quote " and \ back`, "tab\tnewline\n\x01", "ünïcødé €", "\xff\xfe bad", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 past"}
	var b eventheader.Builder
	var fw, sw otlpWriter
	fast, slow := encoder{Writer: &fw}, encoder{Writer: &sw}
	taken := map[eventheader.Encoding]int{}
	check := func(enc eventheader.Encoding, f eventheader.Format, value []byte) {
		t.Helper()
		b.Reset("E", eventheader.Header{Level: 4})
		b.Field("v", enc, f, 0)
		b.AppendRaw(value)
		ev, err := b.AppendEvent(nil)
		if err != nil {
			t.Fatal(err)
		}
		eh, err := eventheader.Decode("P_L4K1", ev)
		if err != nil {
			t.Fatal(err)
		}
		fs := eh.Fields()
		if !fs.Next() {
			t.Fatalf("%v %v % x: %v", enc, f, value, fs.Err())
		}
		it := fs.Item()
		for _, w := range []*otlpWriter{&fw, &sw} {
			w.Reset()
			w.Record(0)
		}
		ehValue(&fast, "v", it)
		slow.js = it.AppendJSON(slow.js[:0])
		ehValueJSON(&slow, "v", it, slow.js)
		if !bytes.Equal(fw.Bytes(), sw.Bytes()) {
			t.Errorf("%v, %v, % x (JSON %s): ehValue wrote % x, by its JSON % x", enc, f, value, slow.js, fw.Bytes(), sw.Bytes())
		}
		fw.Reset()
		fw.Record(0)
		if ehScalar(&fast, "v", it) {
			taken[enc]++
		}
	}
	for enc := eventheader.EncodingValue8; enc <= eventheader.EncodingValue64; enc++ {
		size := enc.FixedSize()
		for f := eventheader.FormatDefault; f <= eventheader.FormatIPAddressObsolete+1; f++ {
			for _, v := range special {
				if len(v) == size {
					check(enc, f, v)
				}
			}
			for range 50 {
				v := make([]byte, size)
				for i := range v {
					v[i] = byte(rng.Uint32())
				}
				check(enc, f, v)
			}
		}
	}
	for u := range uint32(140) { // every errno Linux names, and those it does not
		check(eventheader.EncodingValue32, eventheader.FormatErrno, binary.LittleEndian.AppendUint32(nil, u))
	}
	for _, enc := range []eventheader.Encoding{eventheader.EncodingZStringChar8, eventheader.EncodingStringLength16Char8} {
		for f := eventheader.FormatDefault; f <= eventheader.FormatIPAddressObsolete+1; f++ {
			for _, s := range texts {
				var v []byte
				if enc == eventheader.EncodingZStringChar8 {
					v = append([]byte(s), 0)
				} else {
					v = append(binary.LittleEndian.AppendUint16(nil, uint16(len(s))), s...)
				}
				check(enc, f, v)
			}
		}
	}
	for _, enc := range []eventheader.Encoding{eventheader.EncodingValue8, eventheader.EncodingValue16,
		eventheader.EncodingValue32, eventheader.EncodingValue64, eventheader.EncodingStringLength16Char8} {
		if taken[enc] == 0 {
			t.Errorf("ehScalar took no %v value", enc)
		}
	}
}

// jsonValueDecoder is jsonValue as it was written first, on
// encoding/json's Decoder: what jsonValue must do.
func jsonValueDecoder(e Writer, key string, js []byte) bool {
	if !json.Valid(js) {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var add func(key string) bool
	add = func(key string) bool {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' {
				e.MapStart(key, 0)
				for d.More() {
					k, err := d.Token()
					if err != nil {
						return false
					}
					if !add(k.(string)) {
						return false
					}
				}
			} else {
				e.ArrayStart(key, 0)
				for d.More() {
					if !add("") {
						return false
					}
				}
			}
			d.Token() // the closing delimiter
			e.End()
		case string:
			e.Str(key, v)
		case bool:
			e.Bool(key, v)
		case json.Number:
			if i, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
				e.Int(key, i)
			} else if f, err := v.Float64(); err == nil {
				e.Double(key, f)
			} else {
				e.Str(key, v.String())
			}
		case nil:
			e.Empty(key)
		}
		return true
	}
	return add(key)
}

// checkJSONValue fails unless jsonValue writes what encoding/json's
// Decoder reads js as.
func checkJSONValue(t *testing.T, js []byte) {
	t.Helper()
	var a, b otlpWriter
	a.Record(0)
	b.Record(0)
	okA, okB := jsonValue(&encoder{Writer: &a}, "k", js), jsonValueDecoder(&b, "k", js)
	if okA != okB || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatalf("%q: jsonValue %v, % x; by encoding/json %v, % x", js, okA, a.Bytes(), okB, b.Bytes())
	}
	if a.Depth() != 1 {
		t.Fatalf("%q: %d values left open", js, a.Depth()-1)
	}
}

// TestJSONValue: a StringJSON value reads as encoding/json's Decoder reads
// it — objects, arrays, nesting, escapes, surrogates, invalid UTF-8,
// numbers past int64 and float64, whitespace — and text that is not JSON
// adds nothing.
func TestJSONValue(t *testing.T) {
	for _, js := range []string{
		`1`, `-0`, `1.5`, `1e3`, `-2E-3`, `9223372036854775807`, `9223372036854775808`, `1e400`, `-1e400`, `0.1e-400`,
		`"s"`, `""`, `"esc\"aped\\\/\b\f\n\r\t"`, `"\u00e9\ud83d\ude00\ud800x"`, "\"bad \xff utf8\"", "\"raw é\"",
		`true`, `false`, `null`, `[]`, `{}`, ` [ 1 , "a" , { "b" : [ null , true ] } , 2.5 ] `,
		`{"a":1,"a":2}`, `{"k\u0041":{"x":{"y":[[[]]]}}}`, `[{"toTraceId":"4bf9","toSpanId":"00f0"}]`,
		"\t\n\r {\"a\" :\t1 }\n", `["a",2,{"k":null},1.5,1e400]`,
		``, `{`, `[1,]`, `{"a"}`, `nul`, `1 2`, `"unterminated`, `{"a":1}}`,
	} {
		checkJSONValue(t, []byte(js))
	}
}

// FuzzJSONValue: whatever text a program writes as StringJSON, jsonValue
// reads it as encoding/json's Decoder does.
func FuzzJSONValue(f *testing.F) {
	for _, js := range []string{`[1,"a",{"b":[null,true]},2.5]`, `{"a":{"b":"\u00e9"}}`, `1e400`, `"\ud800"`} {
		f.Add([]byte(js))
	}
	f.Fuzz(func(t *testing.T, js []byte) { checkJSONValue(t, js) })
}

// TestFitsInt64: the texts ParseInt is kept from are those it would fail
// on, and no other: each one's answer is ParseInt's.
func TestFitsInt64(t *testing.T) {
	for _, js := range []string{"0", "7", "-1", "9223372036854775807", "9223372036854775808", "9999999999999999999",
		"18446744073709551615", "-9223372036854775808", "1000000000000000000", "", `"nan"`, "null", "true"} {
		_, err := strconv.ParseInt(js, 10, 64)
		if got := fitsInt64([]byte(js)); got != (err == nil) {
			t.Errorf("fitsInt64(%q) = %v; ParseInt's error: %v", js, got, err)
		}
	}
}
