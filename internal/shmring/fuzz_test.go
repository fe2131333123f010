package shmring

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/uetrace/uetrace/internal/shmring/shmringtest"
)

// FuzzConsumer gives the consumer a ring whose data area, head, tail and
// header fields are arbitrary bytes, as a hostile producer can make them. It
// must not panic, read outside the ring, or loop: each drain ends with
// ErrNotReady after at most a ring's worth of progress, every byte the tail
// passed is counted, and what it delivers is a record that fits the ring.
func FuzzConsumer(f *testing.F) {
	const size = hostileSize
	p, load := hostileRing(f)
	f.Fuzz(func(t *testing.T, ring []byte, head, tail uint64, key uint64, header []byte, gone bool) {
		load(ring, head, tail, key, header)

		c, err := Attach(p.Fd())
		if err != nil {
			return // a header Attach refused: that is the answer to it
		}
		defer c.Close()
		start := c.tail
		buf, small := make([]byte, size), make([]byte, 16)
		for pass, g := range []bool{gone, true} {
			if g {
				c.ProducerGone()
			}
			for i := 0; ; i++ {
				if i > size/HeaderSize+1 {
					t.Fatalf("pass %d: %d records from a %d-byte ring", pass, i, size)
				}
				// The first pass reads as the daemon's merger did, from a
				// small buffer grown as records need; the second with one
				// that holds any record.
				var rec Record
				var err error
				if pass == 0 {
					rec, small, err = c.NextGrow(small, size)
				} else {
					rec, err = c.Next(buf)
				}
				if errors.Is(err, ErrNotReady) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(rec.Payload) > size-HeaderSize {
					t.Fatalf("a payload of %d bytes from a %d-byte ring", len(rec.Payload), size)
				}
			}
		}
		c.Wait(1) // a nanosecond: it must return, and not fault on the word
		st := c.Stats()
		moved := c.tail - start
		if moved > size {
			t.Fatalf("the tail moved %d bytes through a %d-byte ring", moved, size)
		}
		if moved%8 != 0 {
			t.Fatalf("the tail moved %d bytes, not a multiple of 8", moved)
		}
		if st.Bytes+st.Discarded != moved {
			t.Fatalf("the tail moved %d bytes, %d delivered and %d discarded", moved, st.Bytes, st.Discarded)
		}
		if got := atomic.LoadUint64(p.r.tail); got != c.tail {
			t.Fatalf("published tail %d, consumer's %d", got, c.tail)
		}
		// After ProducerGone the ring is drained to head, when head was
		// believable.
		if head-start <= size && c.tail != head&^7 {
			t.Fatalf("gone producer: tail %d, head %d", c.tail, head)
		}
	})
}

// hostileSize is the data size of the fuzz targets' hostile rings.
const hostileSize = 4096

// hostileRing is the ring of the fuzz targets that read a hostile ring
// (FuzzConsumer, FuzzPeek), seeded with seedRings; load makes it what one
// input says — its data area, head, tail, key and header bytes (usually
// none: a valid header) — as a hostile producer can (shmringtest, which
// other readers' fuzz targets share).
func hostileRing(f *testing.F) (p *Producer, load func(ring []byte, head, tail, key uint64, header []byte)) {
	p, err := Create(hostileSize)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	m := shmringtest.Map(f, p.Fd(), 0)
	seedRings(f, p)
	return p, func(ring []byte, head, tail, key uint64, header []byte) {
		m.Load(0, ring, head, tail, key, header)
	}
}

// TestHostileLayout: shmringtest writes a ring's words where the ring
// has them.
func TestHostileLayout(t *testing.T) {
	if shmringtest.OffKey != offKey || shmringtest.OffHead != offHead || shmringtest.OffTail != offTail || shmringtest.HeaderBytes != offHead {
		t.Fatalf("shmringtest's offsets %d %d %d %d, the ring's %d %d %d %d", shmringtest.OffKey, shmringtest.OffHead, shmringtest.OffTail, shmringtest.HeaderBytes, offKey, offHead, offTail, offHead)
	}
	p, err := Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := shmringtest.Map(t, p.Fd(), 0)
	m.Load(0, nil, 64, 8, 0x1234, nil)
	if atomic.LoadUint64(p.r.head) != 64 || atomic.LoadUint64(p.r.tail) != 8 || *p.r.u64(offKey) != 0x1234 {
		t.Fatal("Load wrote the words elsewhere")
	}
	if _, head, tail, key := m.Save(0); head != 64 || tail != 8 || key != 0x1234 {
		t.Fatalf("Save: %d %d %#x", head, tail, key)
	}
}

// seedRings adds the seeds of the fuzz targets that read a hostile ring:
// real rings — empty, records, a wrap, a torn one, a dead reservation —
// each with the producer alive and gone. Each seed is the data area, head,
// tail, key, header bytes (none: a valid header) and gone.
func seedRings(f *testing.F, p *Producer) {
	size := p.r.size
	data := unsafe.Slice((*byte)(p.r.data), size)
	seed := func(setup func()) {
		clear(data)
		atomic.StoreUint64(p.r.head, 0)
		atomic.StoreUint64(p.r.tail, 0)
		setup()
		for _, gone := range []bool{false, true} {
			f.Add(append([]byte(nil), data...), atomic.LoadUint64(p.r.head), atomic.LoadUint64(p.r.tail), p.r.key, []byte(nil), gone)
		}
	}
	var pb [64]byte
	seed(func() {})
	seed(func() {
		for i := uint32(0); i < 30; i++ {
			p.Write(metaFor(1, i), payloadFor(pb[:], 1, i))
		}
	})
	seed(func() {
		atomic.StoreUint64(p.r.head, 3*size-200)
		atomic.StoreUint64(p.r.tail, 3*size-200)
		for i := uint32(0); i < 10; i++ {
			p.Write(metaFor(2, i), payloadFor(pb[:], 2, i))
		}
		p.Reserve(Meta{}, 40)
		atomic.AddUint64(p.r.head, 64)
		p.Write(metaFor(2, 10), payloadFor(pb[:], 2, 10))
	})
}
