package shmring

import (
	"errors"
	"sync/atomic"
	"testing"
)

// readOne is one step of a reader: Next into buf, or Peek, CopyPayload
// into buf and Advance — the two ways of reading, which must agree.
func readOne(c *Consumer, peek bool, buf []byte) (Record, error) {
	if !peek {
		return c.Next(buf)
	}
	v, err := c.Peek()
	if err != nil {
		return Record{}, err
	}
	n := v.CopyPayload(buf)
	if n != v.Len {
		return Record{}, errors.New("payload longer than the buffer")
	}
	c.Advance(&v)
	return Record{Meta: v.Meta, Payload: buf[:n]}, nil
}

// TestPeekOrderAndWrap is TestOrderAndWrap's check read in place: records
// that wrap the ring come out whole and in order.
func TestPeekOrderAndWrap(t *testing.T) {
	const size = 4096
	p, c := pair(t, size)
	buf := make([]byte, size)
	var pb [64]byte
	next := uint32(0)
	for i := uint32(0); i < 2000; i++ {
		if !p.Write(metaFor(3, i), payloadFor(pb[:], 3, i)) {
			t.Fatalf("record %d dropped", i)
		}
		for {
			rec, err := readOne(c, i%2 == 0, buf)
			if errors.Is(err, ErrNotReady) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, seq := checkRecord(t, rec); seq != next {
				t.Fatalf("record %d, want %d", seq, next)
			}
			next++
		}
	}
	if next != 2000 {
		t.Fatalf("read %d records, want 2000", next)
	}
}

// TestPeekDoesNotMove: Peek leaves the tail where it is; only Advance
// moves it, and a Peek without an Advance gives the same record again.
func TestPeekDoesNotMove(t *testing.T) {
	p, c := pair(t, 4096)
	var pb [64]byte
	p.Write(metaFor(1, 1), payloadFor(pb[:], 1, 1))
	p.Write(metaFor(1, 2), payloadFor(pb[:], 1, 2))
	v1, err := c.Peek()
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Peek()
	if err != nil {
		t.Fatal(err)
	}
	if v1.Meta != v2.Meta || v1.Size != v2.Size || c.tail != 0 {
		t.Fatalf("two Peeks: %+v, %+v, tail %d", v1, v2, c.tail)
	}
	c.Advance(&v1)
	v3, err := c.Peek()
	if err != nil || v3.Meta != metaFor(1, 2) {
		t.Fatalf("after Advance: %+v, %v", v3.Meta, err)
	}
	if st := c.Stats(); st.Records != 1 || st.Bytes != uint64(v1.Size) {
		t.Fatalf("stats %+v after one Advance of %d bytes", st, v1.Size)
	}
}

// TestPeekNoAllocs: reading in place allocates nothing.
func TestPeekNoAllocs(t *testing.T) {
	p, c := pair(t, 1<<16)
	dst := make([]byte, 64)
	if n := testing.AllocsPerRun(1000, func() {
		p.Write(benchMeta, payload34)
		v, err := c.Peek()
		if err != nil {
			t.Fatal(err)
		}
		v.CopyPayload(dst)
		c.Advance(&v)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// FuzzPeek gives Peek the rings FuzzConsumer gives Next — arbitrary data,
// head, tail, key and header bytes, as a hostile producer makes them — and
// reads each twice from the same start, with Next and with
// Peek/CopyPayload/Advance: the two must deliver the same records and
// count the same skips, and Peek's own rules must hold — every View lies
// inside the ring, one call skips at most a ring's worth, and every byte
// the tail passed is counted.
func FuzzPeek(f *testing.F) {
	const size = hostileSize
	p, load := hostileRing(f)
	type got struct {
		meta Meta
		pl   string
	}
	f.Fuzz(func(t *testing.T, ring []byte, head, tail uint64, key uint64, header []byte, gone bool) {
		load(ring, head, tail, key, header)
		var runs [2][]got
		var stats [2]Stats
		var tails [2]uint64
		for k, peek := range []bool{false, true} {
			atomic.StoreUint64(p.r.tail, tail)
			c, err := Attach(p.Fd())
			if err != nil {
				return // a header Attach refused: that is the answer to it
			}
			start := c.tail
			buf := make([]byte, size)
			for pass, g := range []bool{gone, true} {
				if g {
					c.ProducerGone()
				}
				for i := 0; ; i++ {
					if i > size/HeaderSize+1 {
						t.Fatalf("peek %v pass %d: %d records from a %d-byte ring", peek, pass, i, size)
					}
					before := c.tail
					if peek {
						v, err := c.Peek()
						if c.tail-before > size {
							t.Fatalf("one Peek skipped %d bytes of a %d-byte ring", c.tail-before, size)
						}
						if errors.Is(err, ErrNotReady) {
							break
						}
						if err != nil {
							t.Fatal(err)
						}
						// The view lies inside the window: its header at
						// the tail, its Size within the ring.
						off := uintptr(v.rec) - uintptr(c.r.data)
						if v.Size > size || v.Len > v.Size-HeaderSize || off >= size || off != uintptr(c.tail&(size-1)) {
							t.Fatalf("view at window offset %d, size %d, payload %d, tail %d", off, v.Size, v.Len, c.tail)
						}
					}
					rec, err := readOne(c, peek, buf)
					if errors.Is(err, ErrNotReady) {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					runs[k] = append(runs[k], got{rec.Meta, string(rec.Payload)})
				}
			}
			st := c.Stats()
			moved := c.tail - start
			if moved > size || moved%8 != 0 || st.Bytes+st.Discarded != moved {
				t.Fatalf("peek %v: the tail moved %d bytes, %d delivered and %d discarded", peek, moved, st.Bytes, st.Discarded)
			}
			stats[k], tails[k] = st, c.tail
			c.Close()
		}
		if stats[0] != stats[1] || tails[0] != tails[1] {
			t.Fatalf("Next: stats %+v, tail %d; Peek: stats %+v, tail %d", stats[0], tails[0], stats[1], tails[1])
		}
		if len(runs[0]) != len(runs[1]) {
			t.Fatalf("Next delivered %d records, Peek %d", len(runs[0]), len(runs[1]))
		}
		for i := range runs[0] {
			if runs[0][i] != runs[1][i] {
				t.Fatalf("record %d: Next %+v, Peek %+v", i, runs[0][i], runs[1][i])
			}
		}
	})
}

// BenchmarkConsume is the consumer's cost per record, the 34-byte payload
// read the two ways: next copies the record into a buffer (then the caller
// copies it on), peek hands it over in place and the payload is copied
// once into its destination.
func BenchmarkConsume(b *testing.B) {
	for _, peek := range []bool{false, true} {
		name := "next"
		if peek {
			name = "peek"
		}
		b.Run(name, func(b *testing.B) {
			p, c := pair(b, 1<<22)
			buf := make([]byte, c.Size())
			const batch = 1024
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for range batch {
					p.Write(benchMeta, payload34)
				}
				b.StartTimer()
				for range batch {
					if _, err := readOne(c, peek, buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}
