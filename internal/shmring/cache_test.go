package shmring

import (
	"errors"
	"sync/atomic"
	"testing"
)

// The consumer delivers the records before the last head it believed
// without loading head again: a head scribbled after that does not stop
// them, and is counted (and not believed) once they are used up.
func TestConsumerKeepsBelievedHead(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	var pb [64]byte
	for i := range uint32(3) {
		if !p.Write(metaFor(1, i), payloadFor(pb[:], 1, i)) {
			t.Fatal("dropped")
		}
	}
	rec, err := c.Next(buf) // loads head: three records
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, rec)
	good := atomic.LoadUint64(p.r.head)
	atomic.StoreUint64(p.r.head, good+1<<40)
	for i := uint32(1); i < 3; i++ {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatalf("record %d, before the believed head: %v", i, err)
		}
		if _, seq := checkRecord(t, rec); seq != i {
			t.Fatalf("record %d, want %d", seq, i)
		}
	}
	if c.Stats().BadHead != 0 {
		t.Fatalf("head loaded again before the records it announced were used up: %+v", c.Stats())
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("past the believed head with a head not to believe: %v", err)
	}
	if c.Stats().BadHead == 0 {
		t.Fatal("the scribbled head was not counted")
	}
	// Put back, the ring goes on.
	atomic.StoreUint64(p.r.head, good)
	p.Write(metaFor(1, 3), payloadFor(pb[:], 1, 3))
	if rec, err := c.Next(buf); err != nil {
		t.Fatal(err)
	} else if _, seq := checkRecord(t, rec); seq != 3 {
		t.Fatalf("record %d, want 3", seq)
	}
}

// A record the consumer cannot deliver under the head it keeps is judged
// on a head loaded again: a record whose producer committed after the
// consumer last loaded head is delivered, not taken for garbage or
// skipped.
func TestConsumerReloadsHeadForVerdicts(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	var pb [64]byte
	p.Write(metaFor(1, 0), payloadFor(pb[:], 1, 0))
	v, ok := p.Reserve(metaFor(1, 1), len(payloadFor(pb[:], 1, 1)))
	if !ok {
		t.Fatal("dropped")
	}
	if _, err := c.Next(buf); err != nil { // head: both reservations
		t.Fatal(err)
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) { // reserved, not committed
		t.Fatalf("an uncommitted record: %v", err)
	}
	copy(v.Payload(), payloadFor(pb[:], 1, 1))
	v.Commit()
	p.Write(metaFor(1, 2), payloadFor(pb[:], 1, 2)) // beyond the head the consumer last loaded
	c.ProducerGone()                                // nothing is to be skipped for all that
	for i := uint32(1); i < 3; i++ {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if _, seq := checkRecord(t, rec); seq != i {
			t.Fatalf("record %d, want %d", seq, i)
		}
	}
	if st := c.Stats(); st.Discarded != 0 || st.Torn != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A producer that found the ring full under the tail it keeps loads the
// shared one again: the room the consumer made is used; and a shared tail
// ahead of head (a consumer's lie) drops the record once, without a loop.
func TestProducerKeepsTail(t *testing.T) {
	p, c := pair(t, 4096)
	buf := make([]byte, c.Size())
	pl := make([]byte, 64-HeaderSize)
	n := 0
	for p.Write(Meta{}, pl) {
		n++
	}
	if n != 4096/64 {
		t.Fatalf("%d records of 64 bytes in a 4096-byte ring", n)
	}
	drainAll(c, buf) // publishes the tail: the ring is empty again
	for i := range n {
		if !p.Write(Meta{}, pl) {
			t.Fatalf("record %d dropped in an emptied ring", i)
		}
	}
	drainAll(c, buf)
	atomic.StoreUint64(p.r.tail, atomic.LoadUint64(p.r.head)+64)
	d0, _ := p.Dropped()
	if p.Write(Meta{}, pl) {
		t.Fatal("written with the tail ahead of head")
	}
	if d, _ := p.Dropped(); d != d0+1 {
		t.Fatalf("dropped %d, want %d", d, d0+1)
	}
}
