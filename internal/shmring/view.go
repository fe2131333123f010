package shmring

import (
	"sync/atomic"
	"unsafe"
)

// A View is the committed record at a consumer's tail, still in the ring:
// what Peek found. Its Meta is the record's header as loaded once at Peek;
// the payload is in the ring (hostile memory) until copied. It is valid
// until the consumer's next Peek, Next or Advance.
type View struct {
	Meta
	// Len is the payload's length in bytes, as the record's first word
	// said: the record is HeaderSize+Len bytes, padded to 8, and fits the
	// ring and the head.
	Len int
	// Size is the record's bytes in the ring, header and padding included.
	Size int

	rec unsafe.Pointer
}

// Peek returns the committed record at the tail without copying it or
// moving the tail past it, skipping (and counting) on its way what Next
// would skip: torn records and garbage once the producer is gone. With
// nothing committed at the tail it returns ErrNotReady. Each call does at
// most O(Size) work, and every record it returns is wholly inside the ring.
func (c *Consumer) Peek() (View, error) { return c.PeekMax(int(c.r.size)) }

// PeekMax is Peek for a reader that takes records of at most most bytes
// in the ring (header and padding included), as NextGrow with most: a
// longer committed record is skipped and counted in Stats.TooLong.
func (c *Consumer) PeekMax(most int) (View, error) {
	rec, n, sz, ok := c.find(uint64(max(most, 0)))
	if !ok {
		return View{}, ErrNotReady
	}
	return View{
		Meta: Meta{
			Time:       atomic.LoadUint64((*uint64)(unsafe.Add(rec, 8))),
			WriteIndex: atomic.LoadUint32((*uint32)(unsafe.Add(rec, 16))),
			TID:        atomic.LoadUint32((*uint32)(unsafe.Add(rec, 20))),
			CPU:        atomic.LoadUint32((*uint32)(unsafe.Add(rec, 24))),
		},
		Len:  int(n - HeaderSize),
		Size: int(sz),
		rec:  rec,
	}, nil
}

// CopyPayload copies the record's payload into dst and returns how many
// bytes it copied: min(len(dst), Len). Call it once per destination and
// read the copy: the ring's bytes may change under the copy — a hostile
// producer's own record is then garbage, which the caller's validation of
// the copy rejects or delivers as garbage, but never a record of anyone
// else, and never bytes outside the ring.
func (v *View) CopyPayload(dst []byte) int {
	return copy(dst, unsafe.Slice((*byte)(unsafe.Add(v.rec, HeaderSize)), v.Len))
}

// Advance moves the tail past v, the record Peek returned last, counting
// it delivered. The tail is published in batches, as after Next.
func (c *Consumer) Advance(v *View) {
	c.take(uint64(v.Size))
	v.rec = nil
}
