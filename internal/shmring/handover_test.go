package shmring

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// What a consumer that hands its ring to another reader for a while, and
// the reader, need (internal/handover): a tail to hand over (Tail), a way
// to go on where the other stopped (Resume), and a reader that publishes
// only what it has kept (DeferPublish, PublishTail).

// TestResumeGoesOnAtTail: after Resume(t) the consumer delivers the
// records from position t, whatever it read before; Resume itself
// publishes nothing, and the next publishing point stores the tail even
// if the consumer has not moved since (the shared tail may lag).
func TestResumeGoesOnAtTail(t *testing.T) {
	p, c := pair(t, 4096)
	var pb [64]byte
	var at [8]uint64 // the position of record i
	buf := make([]byte, c.Size())
	for i := range uint32(8) {
		at[i] = atomic.LoadUint64(p.r.head)
		if !p.Write(metaFor(1, i), payloadFor(pb[:], 1, i)) {
			t.Fatalf("record %d dropped", i)
		}
	}
	for i := range uint32(5) {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, seq := checkRecord(t, rec); seq != i {
			t.Fatalf("record %d read as %d", i, seq)
		}
	}
	if c.Tail() != at[5] {
		t.Fatalf("Tail %d after 5 records, want %d", c.Tail(), at[5])
	}
	shared := atomic.LoadUint64(p.r.tail)
	c.Resume(at[2] + 3) // rounded down to 8: record 2
	if c.Tail() != at[2] {
		t.Fatalf("Tail %d after Resume(%d), want %d", c.Tail(), at[2]+3, at[2])
	}
	if got := atomic.LoadUint64(p.r.tail); got != shared {
		t.Fatalf("Resume published tail %d (was %d)", got, shared)
	}
	for i := uint32(2); i < 8; i++ {
		rec, err := c.Next(buf)
		if err != nil {
			t.Fatalf("record %d after Resume: %v", i, err)
		}
		if _, seq := checkRecord(t, rec); seq != i {
			t.Fatalf("record %d after Resume read as %d", i, seq)
		}
	}
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("after the last record: %v", err)
	}
	if got := atomic.LoadUint64(p.r.tail); got != c.Tail() {
		t.Fatalf("dry: shared tail %d, consumer's %d", got, c.Tail())
	}

	// Resume at the tail it has, while another wrote an older tail into
	// the header: the next publishing point (here, running dry) puts it
	// right, though the consumer did not move.
	end := c.Tail()
	atomic.StoreUint64(p.r.tail, at[3])
	c.Resume(end)
	if _, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
		t.Fatalf("at the head: %v", err)
	}
	if got := atomic.LoadUint64(p.r.tail); got != end {
		t.Fatalf("shared tail %d after running dry at %d", got, end)
	}

	// Any position is safe: one inside a record, or far away, delivers
	// nothing that is not a record of its position (here, nothing while
	// the producer lives), and moves the tail by nothing.
	for _, bad := range []uint64{at[4] + 8, end + 1<<40, ^uint64(0)} {
		c.Resume(bad)
		if rec, err := c.Next(buf); !errors.Is(err, ErrNotReady) {
			t.Fatalf("Resume(%#x): %+v, %v", bad, rec.Meta, err)
		}
		if c.Tail() != bad&^7 {
			t.Fatalf("Resume(%#x): the tail moved to %#x", bad, c.Tail())
		}
	}
}

// TestDeferPublish: a consumer that publishes only when told leaves the
// shared tail where it was through reading, skipping, running dry, Wait
// and SleepAt — the producers see no space it read — until PublishTail.
func TestDeferPublish(t *testing.T) {
	for _, peek := range []bool{false, true} {
		p, c := pair(t, 4096)
		c.DeferPublish()
		var pb [64]byte
		buf := make([]byte, c.Size())
		before := atomic.LoadUint64(p.r.tail)
		n := 0
		// More than an eighth of the ring, in two rounds, so that a
		// batch publish would have happened.
		for round := range 2 {
			for i := range uint32(40) {
				if !p.Write(metaFor(uint32(round), i), payloadFor(pb[:], uint32(round), i)) {
					t.Fatal("dropped: the ring is full")
				}
			}
			for {
				if _, err := readOne(c, peek, buf); err != nil {
					break
				}
				n++
			}
			if c.Wait(1) || !c.SleepAt(1) {
				t.Fatal("an empty ring says it has a record")
			}
			c.Awake()
			if got := atomic.LoadUint64(p.r.tail); got != before {
				t.Fatalf("peek %v: the shared tail moved to %d (consumer at %d) without PublishTail", peek, got, c.Tail())
			}
			c.PublishTail()
			if got := atomic.LoadUint64(p.r.tail); got != c.Tail() {
				t.Fatalf("peek %v: PublishTail: shared tail %d, consumer's %d", peek, got, c.Tail())
			}
			before = c.Tail()
		}
		if n != 80 {
			t.Fatalf("peek %v: %d records read, want 80", peek, n)
		}
	}
}

// TestAttachSetHandedReader: a reader that is handed a producer's set
// maps it with AttachSet from the memfd it received, publishes its tail
// into the ring's header (the producer reuses the space) and says it
// sleeps in the ring's sleeping word (the producer wakes it by the set's
// eventfd); a descriptor opened read-only cannot be mapped so, and is
// refused with EACCES.
func TestAttachSetHandedReader(t *testing.T) {
	const size = 4096
	sp, err := CreateSet(2, size)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	efd, err := sp.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	// What a reader receives: a descriptor of its own for the memfd.
	fd, err := unix.FcntlInt(uintptr(sp.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := AttachSet(fd, 2)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	c, p := cs[1], sp.Ring(1)
	c.DeferPublish()
	pb := make([]byte, 200)
	buf := make([]byte, c.Size())
	// Fill the ring, read it all, publish: the producer has the room
	// again.
	n := 0
	for p.Write(metaFor(1, uint32(n)), pb) {
		n++
	}
	for range n {
		if _, err := c.Next(buf); err != nil {
			t.Fatal(err)
		}
	}
	if p.Write(metaFor(1, 0), pb) {
		t.Fatal("the producer reused space the reader had not published")
	}
	c.PublishTail()
	if !p.Write(metaFor(1, 0), pb) {
		t.Fatal("the producer found no room after the reader published its tail")
	}
	if _, err := c.Next(buf); err != nil {
		t.Fatal(err)
	}
	c.PublishTail()
	// Sleep, and be woken through the eventfd.
	if !c.SleepAt(1) {
		t.Fatal("an empty ring: SleepAt says do not sleep")
	}
	p.Write(metaFor(1, 1), pb)
	var cnt [8]byte
	if _, err := unix.Read(efd, cnt[:]); err != nil {
		t.Fatalf("no wake on the set's eventfd: %v", err)
	}
	if !c.Woken() {
		t.Fatal("the producer woke the reader and left its sleeping word set")
	}

	ro, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(sp.Fd()), os.O_RDONLY, 0)
	if err != nil {
		t.Skipf("reopening the memfd read-only: %v", err)
	}
	defer ro.Close()
	if cs, err := AttachSet(int(ro.Fd()), 2); !errors.Is(err, unix.EACCES) {
		for _, c := range cs {
			c.Close()
		}
		t.Fatalf("AttachSet of a read-only descriptor: %v, want EACCES", err)
	}
}
