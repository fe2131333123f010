package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

func TestAppendInt(t *testing.T) {
	var vals []uint64
	for p := uint64(1); p <= 1e19; p *= 10 {
		vals = append(vals, p-1, p, p+1, p/3*7)
		if p == 1e19 {
			break
		}
	}
	vals = append(vals, 0, 99, 100, 101, 255, 65535, 1<<32-1, 1<<32, math.MaxInt64, math.MaxUint64, math.MaxUint64-1)
	for _, v := range vals {
		if got, want := string(appendUint([]byte("x"), v)), "x"+strconv.FormatUint(v, 10); got != want {
			t.Errorf("appendUint(%d) = %q, want %q", v, got, want)
		}
		for _, s := range []int64{int64(v), -int64(v)} {
			if got, want := string(appendInt(nil, s)), strconv.FormatInt(s, 10); got != want {
				t.Errorf("appendInt(%d) = %q, want %q", s, got, want)
			}
		}
	}
	if got := string(appendInt(nil, math.MinInt64)); got != "-9223372036854775808" {
		t.Errorf("appendInt(MinInt64) = %q", got)
	}
}

func TestAppendZeroPad(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{{0, 6, "000000"}, {7, 6, "000007"}, {123456, 6, "123456"}, {999999, 6, "999999"}, {40, 6, "000040"},
		{0, 3, "000"}, {5, 3, "005"}, {999, 3, "999"}, {2, 1, "2"}, {math.MaxUint64, 20, "18446744073709551615"}} {
		if got := string(appendZeroPad([]byte("x"), c.v, c.width)); got != "x"+c.want {
			t.Errorf("appendZeroPad(%d, %d) = %q, want %q", c.v, c.width, got, "x"+c.want)
		}
	}
}

func TestTimeDigits(t *testing.T) {
	var c timeDigits
	// Back and forth across millisecond and digit-count boundaries.
	for _, v := range []uint64{0, 5, 999_999, 1_000_000, 1_000_001, 1_999_999, 2_000_000, 1_000_007,
		999_999_999, 1_000_000_000, 12_345_678_901_234, 12_345_678_000_001, math.MaxUint64} {
		if got, want := string(c.append([]byte("t="), v)), "t="+strconv.FormatUint(v, 10); got != want {
			t.Errorf("time %d printed %q, want %q", v, got, want)
		}
	}
}

func FuzzAppendInt(f *testing.F) {
	f.Add(uint64(0), uint64(1))
	f.Add(uint64(math.MaxUint64), uint64(1e6))
	f.Fuzz(func(t *testing.T, v, w uint64) {
		if got, want := string(appendUint(nil, v)), strconv.FormatUint(v, 10); got != want {
			t.Fatalf("appendUint(%d) = %q", v, got)
		}
		if got, want := string(appendInt(nil, int64(v))), strconv.FormatInt(int64(v), 10); got != want {
			t.Fatalf("appendInt(%d) = %q", int64(v), got)
		}
		var c timeDigits
		for _, x := range []uint64{v, w, v} {
			if got, want := string(c.append(nil, x)), strconv.FormatUint(x, 10); got != want {
				t.Fatalf("time %d printed %q", x, got)
			}
		}
	})
}

func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain text longer than eight", "q\"uote\\slash\x01\x1f\x7f", "ü€𝄞\xff\xfe", "abc\x00def", "0123456789abcdef\"", "\x80abcdefgh"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want, err := json.Marshal(string(s))
		if err != nil {
			t.Fatal(err)
		}
		var wantS, gotS string
		if err := json.Unmarshal(want, &wantS); err != nil {
			t.Fatal(err)
		}
		got := appendJSONBytes(nil, s, false)
		if err := json.Unmarshal(got, &gotS); err != nil {
			t.Fatalf("%q encoded as %q: %v", s, got, err)
		}
		if gotS != wantS {
			t.Fatalf("%q encoded as %q, which reads %q; encoding/json reads %q", s, got, gotS, wantS)
		}
		// Up to the first NUL, it is the same as the text before it.
		text, _, _ := bytes.Cut(s, []byte{0})
		if a, b := appendJSONBytes(nil, s, true), appendJSONBytes(nil, text, false); !bytes.Equal(a, b) {
			t.Fatalf("%q to its NUL: %q, want %q", s, a, b)
		}
	})
}
