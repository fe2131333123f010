package export

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
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
	var fast, slow encoder
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
		for _, e := range []*encoder{&fast, &slow} {
			e.Reset()
			e.Record()
		}
		ehValue(&fast, "v", it)
		slow.js = it.AppendJSON(slow.js[:0])
		ehValueJSON(&slow, "v", it, slow.js)
		if !bytes.Equal(fast.Bytes(), slow.Bytes()) {
			t.Errorf("%v, %v, % x (JSON %s): ehValue wrote % x, by its JSON % x", enc, f, value, slow.js, fast.Bytes(), slow.Bytes())
		}
		fast.Reset()
		fast.Record()
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
