package ehprovider

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
)

// TestArrayCut checks that arrays beyond 65535 elements, and strings in
// them beyond 65535 bytes, are cut there — the bytes of the Builder fed
// the cut values — on both ways of appending arrays.
func TestArrayCut(t *testing.T) {
	const max = 65535
	u16 := make([]uint16, max+5)
	for i := range u16 {
		u16[i] = uint16(i * 7)
	}
	long := strings.Repeat("é", 40000) // 80000 bytes
	strs := make([]string, max+1)
	strs[0] = long
	times := make([]time.Time, max+2)
	for i := range times {
		times[i] = time.Unix(int64(i), 5)
	}
	data := func(add func(b *eventheader.Builder)) []byte {
		var b eventheader.Builder
		b.Reset("E", eventheader.Header{Level: 1})
		add(&b)
		_, _, d, err := b.Parts(nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, le := range []bool{true, false} {
		restore := SetHostLE(le)
		if got, want := appendValue(nil, u16), data(func(b *eventheader.Builder) {
			b.AppendCount(max)
			for _, v := range u16[:max] {
				b.AppendValue16(v)
			}
		}); !bytes.Equal(got, want) {
			t.Errorf("hostLE %v: []uint16 of %d: %d bytes, want %d", le, len(u16), len(got), len(want))
		}
		if got, want := appendValue(nil, strs), data(func(b *eventheader.Builder) {
			b.AppendCount(max)
			b.AppendString8(long[:max])
			for range max - 1 {
				b.AppendString8("")
			}
		}); !bytes.Equal(got, want) {
			t.Errorf("hostLE %v: []string: %d bytes, want %d", le, len(got), len(want))
		}
		if got, want := appendValue(nil, times), data(func(b *eventheader.Builder) {
			b.AppendCount(max)
			for _, v := range times[:max] {
				b.AppendValue64(uint64(v.Unix()))
			}
		}); !bytes.Equal(got, want) {
			t.Errorf("hostLE %v: []time.Time: %d bytes, want %d", le, len(got), len(want))
		}
		restore()
	}
}

// TestAppendWidened: the way of 32-bit hosts for arrays of int, uint and
// uintptr writes what the memory copy of 64-bit hosts does.
func TestAppendWidened(t *testing.T) {
	ints := []int{0, -1, 1 << 40, -1 << 62, 7}
	uints := []uint{0, 1<<64 - 1, 1 << 33}
	ptrs := []uintptr{0, 1<<64 - 1, 0xdeadbeef}
	if got, want := appendWidened(nil, ints), appendFixed(nil, ints); !bytes.Equal(got, want) {
		t.Errorf("[]int: % x, want % x", got, want)
	}
	if got, want := appendWidened(nil, uints), appendFixed(nil, uints); !bytes.Equal(got, want) {
		t.Errorf("[]uint: % x, want % x", got, want)
	}
	if got, want := appendWidened(nil, ptrs), appendFixed(nil, ptrs); !bytes.Equal(got, want) {
		t.Errorf("[]uintptr: % x, want % x", got, want)
	}
}
