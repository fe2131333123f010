package shmring

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setPair is pair for ring k of a set of pairSetRings rings of size bytes:
// its producer and consumer, the others idle.
func setPair(t testing.TB, size, k int) (*Producer, *Consumer) {
	t.Helper()
	sp, err := CreateSet(pairSetRings, size)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := AttachSet(sp.Fd(), pairSetRings)
	if err != nil {
		sp.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
		if err := sp.Close(); err != nil {
			t.Error(err)
		}
	})
	return sp.Ring(k), cs[k]
}

// TestRingsOfASet runs the ring's tests on the middle ring of a set: each
// ring of a set is a ring, whatever its neighbours.
func TestRingsOfASet(t *testing.T) {
	pairInSet = 1
	defer func() { pairInSet = -1 }()
	for name, test := range map[string]func(*testing.T){
		"OrderAndWrap":          TestOrderAndWrap,
		"FullRingAccounting":    TestFullRingAccounting,
		"ConcurrentProducers":   TestConcurrentProducers,
		"TornKnownLength":       TestTornKnownLength,
		"TornUnknownLength":     TestTornUnknownLength,
		"TornAtTheEnd":          TestTornAtTheEnd,
		"TooLong":               TestTooLong,
		"HostileHead":           TestHostileHead,
		"NoWakeWhileAwake":      TestNoWakeWhileAwake,
		"WaitTimesOut":          TestWaitTimesOut,
		"WakeupStress":          TestWakeupStress,
		"ScribbledRing":         TestScribbledRing,
		"PeekOrderAndWrap":      TestPeekOrderAndWrap,
		"WatermarkWakesOnce":    TestWatermarkWakesOnce,
		"WatermarkStaleTail":    TestWatermarkStaleTail,
		"WatermarkTailLast":     TestWatermarkTailCommittedLast,
		"WatermarkPerWatermark": TestWatermarkWakesPerWatermark,
	} {
		t.Run(name, test)
	}
}

// TestSetRoutesByCPU: For(cpu) is ring cpu mod R, for R a power of two
// and not; consumer k of AttachSet sees exactly the records of ring k,
// whole, and the rings' counts are their own.
func TestSetRoutesByCPU(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		sp, err := CreateSet(n, 4096)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := AttachSet(sp.Fd(), n)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Len() != n || sp.Size() != 4096 || len(cs) != n {
			t.Fatalf("R=%d: Len %d, Size %d, %d consumers", n, sp.Len(), sp.Size(), len(cs))
		}
		var pb [64]byte
		for cpu := range uint32(16) {
			if !sp.For(cpu).Write(metaFor(cpu, cpu), payloadFor(pb[:], cpu, cpu)) {
				t.Fatalf("R=%d: cpu %d's record dropped", n, cpu)
			}
		}
		buf := make([]byte, 4096)
		for k, c := range cs {
			var got []uint32
			for {
				rec, err := c.Next(buf)
				if errors.Is(err, ErrNotReady) {
					break
				}
				stream, _ := checkRecord(t, rec)
				got = append(got, stream)
			}
			for i, cpu := range got {
				if int(cpu)%n != k || i > 0 && cpu <= got[i-1] {
					t.Fatalf("R=%d: ring %d delivered CPUs %v", n, k, got)
				}
			}
			if want := (16 - k + n - 1) / n; len(got) != want {
				t.Fatalf("R=%d: ring %d delivered %d records, want %d", n, k, len(got), want)
			}
			c.Close()
		}
		sp.Close()
	}
}

// TestSetDropsPerRing: a full ring drops and counts its own records only;
// the set's Dropped sums the rings'.
func TestSetDropsPerRing(t *testing.T) {
	sp, err := CreateSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for sp.Ring(1).Write(benchMeta, payload34) {
	}
	sp.Ring(1).Write(benchMeta, payload34)
	if d, _ := sp.Ring(0).Dropped(); d != 0 {
		t.Fatalf("ring 0 counted %d drops of ring 1's", d)
	}
	if d, _ := sp.Ring(1).Dropped(); d != 2 {
		t.Fatalf("ring 1 counted %d drops, want 2", d)
	}
	if d, _ := sp.Dropped(); d != 2 {
		t.Fatalf("the set counted %d drops, want 2", d)
	}
	if !sp.Ring(0).Write(benchMeta, payload34) {
		t.Fatal("ring 0 dropped a record: ring 1's fill is not its own")
	}
}

// TestSetWakesByOneEventfd: every ring of a set wakes its consumer through
// the set's one eventfd.
func TestSetWakesByOneEventfd(t *testing.T) {
	sp, err := CreateSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	efd, err := sp.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.WakeByEventfd(); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("a second WakeByEventfd: %v, want EBUSY", err)
	}
	cs, err := AttachSet(sp.Fd(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		defer c.Close()
	}
	for k, c := range cs {
		if !c.Sleep() {
			t.Fatalf("ring %d: an empty ring must let its consumer sleep", k)
		}
		sp.Ring(k).Write(benchMeta, payload34)
		var cnt [8]byte
		if n, err := unix.Read(efd, cnt[:]); n != 8 || err != nil || *(*uint64)(unsafe.Pointer(&cnt)) != 1 {
			t.Fatalf("ring %d: read of the set's eventfd: %d, %v, %x", k, n, err, cnt)
		}
	}
}

// TestAttachSetRejects: the consumer takes the geometry from the memfd and
// its own ring count, and every ring's header as a ring's, and refuses
// what does not match with EINVAL; the set's first page, reserved, is
// nobody's word.
func TestAttachSetRejects(t *testing.T) {
	sp, err := CreateSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for _, n := range []int{0, 1, 3, 4, MaxSetRings + 1} {
		if _, err := AttachSet(sp.Fd(), n); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AttachSet(a set of 2, %d): %v, want EINVAL", n, err)
		}
	}
	// The first page is reserved: what it holds changes nothing.
	hdr, err := unix.Mmap(sp.Fd(), 0, int(pageSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(hdr)
	for i := range hdr {
		hdr[i] = byte(i)
	}
	if cs, err := AttachSet(sp.Fd(), 2); err != nil {
		t.Errorf("AttachSet with its first page scribbled: %v", err)
	} else {
		for _, c := range cs {
			c.Close()
		}
	}
	// A ring's own header, ring 1's magic.
	r1 := sp.Ring(1).r
	old := atomic.LoadUint64(r1.u64(offMagic))
	atomic.StoreUint64(r1.u64(offMagic), 0)
	if _, err := AttachSet(sp.Fd(), 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachSet with ring 1's magic gone: %v, want EINVAL", err)
	}
	atomic.StoreUint64(r1.u64(offMagic), old)
	if cs, err := AttachSet(sp.Fd(), 2); err != nil {
		t.Fatalf("AttachSet of the mended set: %v", err)
	} else {
		for _, c := range cs {
			c.Close()
		}
	}
	// A plain ring is no set, and a set no plain ring.
	p, err := Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := AttachSet(p.Fd(), 1); err == nil {
		t.Error("AttachSet(a plain ring): no error")
	}
	if _, err := Attach(sp.Fd()); err == nil {
		t.Error("Attach(a set): no error")
	}
	// Unsealed.
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, int64(pageSize()+2*(pageSize()+4096)))
	if _, err := AttachSet(fd, 2); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachSet(an unsealed memfd): %v, want EINVAL", err)
	}
	// Bad geometry at creation.
	for _, c := range [][2]int{{0, 4096}, {MaxSetRings + 1, 4096}, {2, 1000}, {2, 3 << 12}} {
		if sp, err := CreateSet(c[0], c[1]); !errors.Is(err, unix.EINVAL) {
			if err == nil {
				sp.Close()
			}
			t.Errorf("CreateSet(%d, %d): %v, want EINVAL", c[0], c[1], err)
		}
	}
}

// TestOpenSetProducesForTheConsumer: a set opened by another mapping (a
// child that inherited it) publishes into the same rings, with the keys
// the creator chose.
func TestOpenSetProducesForTheConsumer(t *testing.T) {
	sp, err := CreateSet(2, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	op, err := OpenSet(sp.Fd(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	cs, err := AttachSet(sp.Fd(), 2)
	if err != nil {
		t.Fatal(err)
	}
	var pb [64]byte
	op.For(1).Write(metaFor(5, 1), payloadFor(pb[:], 5, 1))
	buf := make([]byte, 4096)
	rec, err := cs[1].Next(buf)
	if err != nil {
		t.Fatal(err)
	}
	checkRecord(t, rec)
	for _, c := range cs {
		c.Close()
	}
}

// FuzzAttachSet gives AttachSet memfds of arbitrary sizes and seals,
// ring counts and set and ring headers, and has the consumers it returns
// drain scribbled data: it must refuse (an error), or return consumers
// whose every access stays within their rings — no fault, Next and Peek
// bounded, every byte the tail passed counted.
func FuzzAttachSet(f *testing.F) {
	f.Add(uint32(2), uint32(2), uint32(4096), true, []byte(nil), []byte(nil), []byte(nil))
	f.Add(uint32(3), uint32(3), uint32(8192), true, []byte("anything\x02\x00\x00\x00\x03"), []byte(nil), []byte{1, 2, 3})
	f.Add(uint32(2), uint32(1), uint32(4096), true, []byte(nil), []byte("UETRING\x01"), []byte(nil))
	f.Add(uint32(1), uint32(1), uint32(4096), false, []byte(nil), []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, made, asked, size uint32, sealed bool, setHdr, ringHdr, data []byte) {
		made, asked = made%9, asked%9
		size = 1 << (12 + size%3) // 4, 8 or 16 KiB: the fuzzer varies the rest
		fd, err := unix.MemfdCreate("fuzz-set", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		page := pageSize()
		total := page + uint64(max(made, 1))*(page+uint64(size))
		if made == 0 {
			total = page + uint64(len(data)) // an odd size
		}
		if err := unix.Ftruncate(fd, int64(total)); err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(fd, 0, int(total), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		// A real set's headers, then the fuzzer's bytes over them.
		ne := func(off int, v uint64, n int) {
			for i := range n {
				m[off+i] = byte(v >> (8 * i))
			}
		}
		copy(m[:page], setHdr)
		for k := 0; k < int(made); k++ {
			off := int(ringOffset(page, uint64(size), k))
			ne(off+offMagic, magic, 8)
			ne(off+offVersion, version, 4)
			ne(off+offDataOffset, page, 4)
			ne(off+offSize, uint64(size), 8)
			ne(off+offKey, 0x1234, 8)
			copy(m[off:off+int(page)], ringHdr)
			copy(m[off+int(page):off+int(page)+int(size)], data)
		}
		if sealed {
			unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		}
		cs, err := AttachSet(fd, int(asked))
		if err != nil {
			return
		}
		if !sealed {
			t.Fatal("AttachSet took an unsealed memfd")
		}
		buf := make([]byte, size)
		for k, c := range cs {
			c.ProducerGone()
			start := c.tail
			for i := 0; ; i++ {
				if i > int(size)/HeaderSize+1 {
					t.Fatalf("ring %d: %d records from a %d-byte ring", k, i, size)
				}
				if _, err := readOne(c, i%2 == 1, buf); err != nil {
					break
				}
			}
			st := c.Stats()
			if moved := c.tail - start; moved > uint64(size) || st.Bytes+st.Discarded != moved {
				t.Fatalf("ring %d: the tail moved %d bytes, %d delivered and %d discarded", k, moved, st.Bytes, st.Discarded)
			}
			c.Close()
		}
	})
}
