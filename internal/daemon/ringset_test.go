package daemon

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// testRings is the ring count of the servers the tests start (serve),
// unless their Config says: 0, the default; TestRingSets makes it 2, so
// that two drainers share the work even where the test's subsystem has one
// CPU.
var testRings = 0

// testRing is what a test publishes into: a ring set whose ring of each
// record's CPU (Meta.CPU) the record goes into, as a producer publishes
// into its CPU's ring.
type testRing struct {
	set *shmring.SetProducer
	fd  int // the memfd
}

// shareTestRing makes a ring set of rings of size data bytes, shares it on
// c and closes it at the test's end.
func shareTestRing(t testing.TB, c *client.Conn, size int) *testRing {
	t.Helper()
	sp, err := shmring.CreateSet(c.Rings(), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	if err := c.ShareRingSet(sp); err != nil {
		t.Fatal(err)
	}
	return &testRing{set: sp, fd: sp.Fd()}
}

// of is the ring a record of CPU cpu goes into.
func (r *testRing) of(cpu uint32) *shmring.Producer { return r.set.For(cpu) }

// Write publishes a record into the ring of its CPU.
func (r *testRing) Write(m shmring.Meta, payload []byte) bool { return r.of(m.CPU).Write(m, payload) }

// Reserve reserves a record in the ring of its CPU.
func (r *testRing) Reserve(m shmring.Meta, n int) (shmring.Reservation, bool) {
	return r.of(m.CPU).Reserve(m, n)
}

// hostile maps the whole memfd writable, as its producer may, and returns
// it with the offsets of each ring's header page in it.
func (r *testRing) hostile(t testing.TB) (mem []byte, headers []int) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(r.fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	page := unix.Getpagesize()
	for k := range r.set.Len() {
		headers = append(headers, page+k*(page+r.set.Size()))
	}
	return mem, headers
}

// ringsReleased reports whether the server has released every set it was
// given.
func ringsReleased(s *testServer) bool {
	s.drainers.mu.Lock()
	defer s.drainers.mu.Unlock()
	return len(s.drainers.sets) == 0
}

// TestRingSets runs the ring tests again with two drainers, whatever the
// test's subsystem's CPUs: every test of what a ring gets delivered, in
// which order, with which losses, against which hostile producer, must
// hold with the work shared.
func TestRingSets(t *testing.T) {
	testRings = 2
	defer func() { testRings = 0 }()
	for name, test := range map[string]func(*testing.T){
		"DeliversWithWritersIdentity": TestRingDeliversWithWritersIdentity,
		"CannotWriteOthersEvents":     TestRingCannotWriteOthersEvents,
		"DeliveredBeforeClose":        TestRingDeliveredBeforeClose,
		"DrainsWithoutReads":          TestRingDrainsWithoutReads,
		"RecordsBeforeDisableKept":    TestRingRecordsBeforeDisableKept,
		"HostileProducer":             TestRingHostileProducer,
		"RecordSizes":                 TestRingRecordSizes,
		"TruncateClearsPublished":     TestRingTruncateClearsPublished,
		"SocketWriteKeepsOrder":       TestRingSocketWriteKeepsOrder,
		"TracePipe":                   TestRingTracePipe,
		"MergeOrderAcrossRings":       TestMergeOrderAcrossRings,
		"LossRecords":                 TestRingLossRecords,
		"ThreadIDs":                   TestRingThreadIDs,
		"LossRecordsCannotWrap":       TestLossRecordsCannotWrap,
		"ReleasedUnreachable":         TestRingReleasedUnreachable,
		"MadeUpThreadIDs":             TestMadeUpThreadIDsCostTheProducer,
	} {
		t.Run(name, test)
	}
}

// TestHeldRingStallsOnlyItsDrainer: a record reserved and not committed
// in ring 0 of a set holds drainer 0 — the records of every producer on
// CPU 0 wait behind it, as a single merge of every ring would make every
// ring wait — and
// nothing else: drainer 1 delivers CPU 1's records meanwhile. Once it is
// committed, CPU 0's follow.
func TestHeldRingStallsOnlyItsDrainer(t *testing.T) {
	holdMax = time.Hour
	t.Cleanup(func() { holdMax = holdMaxDefault })
	sys := subsys.New(subsys.Options{NumCPU: 2})
	s := serve(t, Config{Subsystem: sys, Rings: 2})
	holder := newRingClient(t, s, "held_ev", 1<<16)
	other := newRingClient(t, s, "held_ev", 1<<16)
	ss := sys.NewSession(subsysSessionOptions(1 << 20))
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:held_ev", false); err != nil {
		t.Fatal(err)
	}
	v, ok := holder.ring.Reserve(shmring.Meta{WriteIndex: holder.idx, CPU: 0}, 4)
	if !ok {
		t.Fatal("ring full")
	}
	v.Stamp(stamp.Now(), 0, 0)
	copy(v.Payload(), u32rec(1000))
	for i := range 10 {
		m := shmring.Meta{Time: stamp.Now(), WriteIndex: other.idx, TID: uint32(os.Getpid()), CPU: uint32(i % 2)}
		if !other.ring.Write(m, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	// No flush: the drainers deliver on their own. CPU 1's five arrive;
	// CPU 0's wait behind the held record.
	got := readSession(t, ss, 5)
	for _, r := range got {
		if r.CPU != 1 {
			t.Fatalf("a record of CPU %d was delivered while ring 0 held drainer 0: %+v", r.CPU, r)
		}
	}
	v.Commit()
	got = readSession(t, ss, 6)
	if got[0].CPU != 0 || wire.LE.Uint32(got[0].Raw[8:]) != 1000 {
		t.Fatalf("after the commit: %+v, want the held record first", got[0])
	}
}

// TestSetDescriptors: a ring set costs the daemon the eventfd it keeps and
// its memfd, kept to hand the set to a session's reader (handover.go);
// both are given back when the connection goes.
func TestSetDescriptors(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	// One set stays, so that the drainers and the waker, and their own
	// descriptors, stay too.
	newRingClient(t, s, "fd_ev", 1<<16)
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	sp, err := shmring.CreateSet(2, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	efd, _ := sp.WakeByEventfd()
	before := fdLinks(t)
	if _, _, err := wire.ParseResult(exchange(t, fd, wire.AppendHeader(nil, wire.OpRing, 0, wire.RingSet), sp.Fd(), efd)); err != nil {
		t.Fatal(err)
	}
	// The descriptors the request carried are closed after its reply:
	// one more round trip, and they are.
	exchange(t, fd, wire.AppendHeader(nil, wire.OpRingFlush, 0, 0))
	held := fdLinks(t)
	unix.Close(fd)
	testutil.Wait(t, "the connection gone", func() bool { return s.Conns() == 1 })
	after := fdLinks(t)
	// What the daemon took is one eventfd and the set's memfd; what it
	// gave back is those and its socket.
	var took, gave []string
	for fd, l := range held {
		if _, ok := before[fd]; !ok {
			took = append(took, l)
		}
		if _, ok := after[fd]; !ok {
			gave = append(gave, l)
		}
	}
	memfds := func(ls []string) int {
		n := 0
		for _, l := range ls {
			if strings.HasPrefix(l, "/memfd:") {
				n++
			}
		}
		return n
	}
	if len(took) != 2 || !slices.Contains(took, "anon_inode:[eventfd]") || memfds(took) != 1 ||
		!slices.Contains(gave, "anon_inode:[eventfd]") || memfds(gave) != 1 {
		t.Errorf("the daemon took %q and gave back %q: want an eventfd and a memfd, then them and its socket", took, gave)
	}
}

// TestSetCountsOnce: a ring set counts once in RingStats.Rings and, when
// its connection is gone, once in Released — as a ring does — whatever
// its ring count.
func TestSetCountsOnce(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	rc := newRingClient(t, s, "count_ev", 1<<16)
	if st := s.RingStats(); st.Rings != 1 || st.Released != 0 {
		t.Fatalf("with a set shared: %d rings, %d released; want 1, 0", st.Rings, st.Released)
	}
	rc.c.Close()
	testutil.Wait(t, "the set released", func() bool { return ringsReleased(s) })
	if st := s.RingStats(); st.Rings != 1 || st.Released != 1 {
		t.Errorf("after its connection went: %d rings, %d released; want 1, 1", st.Rings, st.Released)
	}
}

// TestSetStatsCountedOnce: while a ring set is let go of — each drainer
// releasing its ring, then the waker the set — RingStats never counts a
// record twice: the rings' live counts and the released set's are never
// both in it (they were: Delivered read twice the records, from the last
// ring's release until the waker took the set).
func TestSetStatsCountedOnce(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	for iter := range 20 {
		rc := newRingClient(t, s, "once_ev", 1<<16)
		base := s.RingStats().Delivered
		const n = 200
		for i := range n {
			if !rc.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: rc.idx, TID: uint32(os.Getpid()), CPU: uint32(i % 2)}, u32rec(uint32(i))) {
				t.Fatal("ring full")
			}
		}
		s.Flush()
		// Read the counts without pause while the connection goes.
		stop, most := make(chan struct{}), make(chan uint64)
		go func() {
			var m uint64
			for {
				select {
				case <-stop:
					most <- m
					return
				default:
				}
				m = max(m, s.RingStats().Delivered-base)
			}
		}()
		rc.c.Close()
		testutil.Wait(t, "the set released", func() bool { return ringsReleased(s) })
		close(stop)
		if m := <-most; m != n {
			t.Fatalf("iteration %d: RingStats said %d records delivered at most, of %d", iter, m, n)
		}
	}
}
