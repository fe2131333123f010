package shmring

import (
	"bytes"
	"testing"
)

// TestNextGrow: a reader that starts with a small buffer gets each record
// whose length is within its bound in a buffer grown for it, and only a
// record beyond the bound is skipped and counted as too long.
func TestNextGrow(t *testing.T) {
	p, c := pair(t, 1<<18)
	const most = HeaderSize + 8000
	sizes := []int{10, 100, 3000, 7999, 8000, 8001, 20}
	for i, n := range sizes {
		if !p.Write(Meta{Time: uint64(i + 1), WriteIndex: uint32(i)}, bytes.Repeat([]byte{byte(i)}, n)) {
			t.Fatalf("write of %d bytes failed", n)
		}
	}
	buf := make([]byte, 64)
	var got []int
	for {
		rec, b, err := c.NextGrow(buf, most)
		if err != nil {
			break
		}
		buf = b
		if len(rec.Payload) == 0 || !bytes.Equal(rec.Payload, bytes.Repeat([]byte{byte(rec.WriteIndex)}, len(rec.Payload))) {
			t.Fatalf("record %d: %d bytes, not what was written", rec.WriteIndex, len(rec.Payload))
		}
		got = append(got, len(rec.Payload))
	}
	want := []int{10, 100, 3000, 7999, 8000, 20} // 8001 bytes do not fit most
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("read %v, want %v", got, want)
		}
	}
	if st := c.Stats(); st.TooLong != 1 {
		t.Errorf("%d records counted too long, want 1", st.TooLong)
	}
	if len(buf) > most {
		t.Errorf("the buffer grew to %d, past %d", len(buf), most)
	}
}
