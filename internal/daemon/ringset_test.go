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

// ringVersion is what the ring tests share: a ring (wire.RingV1), the
// merger's, or — TestRingSets runs them again so — a ring set
// (wire.RingSet), the drainers'.
var ringVersion uint32 = wire.RingV1

// testRings is the ring count of the servers the tests start (serve),
// unless their Config says: 0, the default; TestRingSets makes it 2, so
// that two drainers share the work even where the test's subsystem has one
// CPU.
var testRings = 0

// testRing is what a test publishes into: a version-1 ring, or a ring set
// whose ring of each record's CPU (Meta.CPU) the record goes into, as a
// producer publishes into its CPU's ring.
type testRing struct {
	p   *shmring.Producer
	set *shmring.SetProducer
	fd  int // the memfd
}

// shareTestRing makes a ring of size data bytes — per ring of a set — of
// ringVersion, shares it on c and closes it at the test's end.
func shareTestRing(t testing.TB, c *client.Conn, size int) *testRing {
	t.Helper()
	if ringVersion == wire.RingSet {
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
	p := newRing(t, size)
	if err := c.ShareRing(p); err != nil {
		t.Fatal(err)
	}
	return &testRing{p: p, fd: p.Fd()}
}

// of is the ring a record of CPU cpu goes into.
func (r *testRing) of(cpu uint32) *shmring.Producer {
	if r.set != nil {
		return r.set.For(cpu)
	}
	return r.p
}

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
	if r.set == nil {
		return mem, []int{0}
	}
	for k := range r.set.Len() {
		headers = append(headers, page+k*(page+r.set.Size()))
	}
	return mem, headers
}

// ringsReleased reports whether the server has released every ring and
// set it was given.
func ringsReleased(s *testServer) bool {
	s.merger.mu.Lock()
	n := len(s.merger.all)
	s.merger.mu.Unlock()
	s.drainers.mu.Lock()
	n += len(s.drainers.sets)
	s.drainers.mu.Unlock()
	return n == 0
}

// TestRingSets runs the ring tests again with ring sets, which the
// per-CPU drainers deliver: every test of what a ring gets delivered, in
// which order, with which losses, against which hostile producer, must
// hold for sets too.
func TestRingSets(t *testing.T) {
	ringVersion, testRings = wire.RingSet, 2
	defer func() { ringVersion, testRings = wire.RingV1, 0 }()
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

// TestPerCPUTraceIdentity: the records of several producers on several
// CPUs give the same trace — byte for byte, overwritten records, the
// per-CPU counts and a session's records of each CPU included — whether
// one merger delivers them from version-1 rings in time order across all
// CPUs, or the per-CPU drainers from ring sets, each CPU's records in time
// order and the CPUs merged by the trace's reader, as ftrace's iterator
// merges its per-CPU buffers.
func TestPerCPUTraceIdentity(t *testing.T) {
	// The test's goroutine preempted between a reservation and its commit
	// holds the merge as long as it takes: the order is then exact on any
	// machine.
	holdMax = time.Hour
	t.Cleanup(func() { holdMax = holdMaxDefault })
	const ncpu = 2
	type side struct {
		s       *testServer
		clients []*ringClient
		ss      *subsys.Session
	}
	var sides [2]side
	for i, v := range []uint32{wire.RingV1, wire.RingSet} {
		ringVersion = v
		sys := subsys.New(subsys.Options{NumCPU: ncpu, BufferKB: 4})
		s := serve(t, Config{Subsystem: sys, Rings: ncpu})
		sd := side{s: s, ss: sys.NewSession(subsysSessionOptions(8 << 20))}
		for range 3 {
			sd.clients = append(sd.clients, newRingClient(t, s, "ident_ev", 1<<20))
		}
		if _, err := sd.ss.AttachMatching("user_events:ident_ev", false); err != nil {
			t.Fatal(err)
		}
		sides[i] = sd
	}
	ringVersion = wire.RingV1
	// Records of 3 producers, 2 threads each, on both CPUs, interleaved
	// across producers and CPUs — while the merger and the drainers take
	// them — each stamped after it was reserved on both sides, as a
	// producer stamps (the merge's bound), with the same time on both.
	const n = 6000
	pid := uint32(os.Getpid())
	var last uint64
	for i := range n {
		p := i % 3
		tid := pid
		if i%2 == 1 {
			tid = madeUpTID(p, 3) // a thread no task has: believed
		}
		cpu := uint32(i/3) % ncpu
		var vs [2]shmring.Reservation
		for k, sd := range sides {
			rc := sd.clients[p]
			v, ok := rc.ring.Reserve(shmring.Meta{WriteIndex: rc.idx, TID: tid, CPU: cpu}, 4)
			if !ok {
				t.Fatal("ring full")
			}
			vs[k] = v
		}
		last = max(stamp.Now(), last+1)
		for _, v := range vs {
			v.Stamp(last, tid, cpu)
			copy(v.Payload(), u32rec(uint32(i)))
			v.Commit()
		}
	}
	var traces [2]string
	var recs [2][]subsys.Record
	for i, sd := range sides {
		sd.s.Flush()
		b, err := sd.s.Subsystem().FS().ReadFile(subsys.FileTrace, subsys.Cred{PerfmonCapable: true})
		if err != nil {
			t.Fatal(err)
		}
		traces[i] = string(b)
		recs[i] = readSession(t, sd.ss, n)
	}
	if traces[0] != traces[1] {
		t.Fatalf("the traces differ:\nmerger:\n%s\ndrainers:\n%s", traces[0], traces[1])
	}
	if !strings.Contains(traces[0], "entries-in-buffer/entries-written: ") || strings.Count(traces[0], "ident_ev: v=") == n {
		t.Fatalf("the test wants records overwritten:\n%s", traces[0][:min(len(traces[0]), 2000)])
	}
	// The session's records of each CPU, in the same order.
	for cpu := range int32(ncpu) {
		var a, b []subsys.Record
		for _, r := range recs[0] {
			if r.CPU == cpu {
				a = append(a, r)
			}
		}
		for _, r := range recs[1] {
			if r.CPU == cpu {
				b = append(b, r)
			}
		}
		if len(a) != len(b) {
			t.Fatalf("CPU %d: %d records from the merger, %d from the drainers", cpu, len(a), len(b))
		}
		for i := range a {
			if a[i].TS != b[i].TS || a[i].TID != b[i].TID || string(a[i].Raw) != string(b[i].Raw) {
				t.Fatalf("CPU %d record %d: merger %+v, drainers %+v", cpu, i, a[i], b[i])
			}
		}
	}
}

// TestHeldRingStallsOnlyItsDrainer: a record reserved and not committed
// in ring 0 of a set holds drainer 0 — the records of every producer on
// CPU 0 wait behind it, as today's merger would make every ring wait — and
// nothing else: drainer 1 delivers CPU 1's records meanwhile. Once it is
// committed, CPU 0's follow.
func TestHeldRingStallsOnlyItsDrainer(t *testing.T) {
	holdMax = time.Hour
	t.Cleanup(func() { holdMax = holdMaxDefault })
	ringVersion = wire.RingSet
	defer func() { ringVersion = wire.RingV1 }()
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

// TestSetDescriptors: a ring costs the daemon the eventfd it keeps (its
// memfd is closed once mapped), a ring set that and its memfd, kept to
// hand the set to a session's reader (handover.go); both are given back
// when the connection goes.
func TestSetDescriptors(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	// One of each kind stays, so that the merger, the drainers and the
	// waker, and their own descriptors, stay too.
	for _, v := range []uint32{wire.RingV1, wire.RingSet} {
		ringVersion = v
		newRingClient(t, s, "fd_ev", 1<<16)
	}
	ringVersion = wire.RingV1
	var cost, given [2]int
	for i, v := range []uint32{wire.RingV1, wire.RingSet} {
		fd := rawConn(t, s.sock)
		exchange(t, fd, helloMsg(0, 0))
		var memfd, efd int
		if v == wire.RingV1 {
			p := newRing(t, 1<<16)
			efd, _ = p.WakeByEventfd()
			memfd = p.Fd()
		} else {
			sp, err := shmring.CreateSet(2, 1<<16)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sp.Close() })
			efd, _ = sp.WakeByEventfd()
			memfd = sp.Fd()
		}
		before := fdLinks(t)
		if _, _, err := wire.ParseResult(exchange(t, fd, wire.AppendHeader(nil, wire.OpRing, 0, v), memfd, efd)); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		// The descriptors the request carried are closed after its reply:
		// one more round trip, and they are.
		exchange(t, fd, wire.AppendHeader(nil, wire.OpRingFlush, 0, 0))
		held := fdLinks(t)
		unix.Close(fd)
		testutil.Wait(t, "the connection gone", func() bool { return s.Conns() == 2 })
		after := fdLinks(t)
		// What the daemon took is one eventfd (and a ring's memfd,
		// closed once mapped; a set's, kept); what it gave back is those
		// and its socket.
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
		if wantMemfd := i; !slices.Contains(took, "anon_inode:[eventfd]") || memfds(took) != wantMemfd ||
			!slices.Contains(gave, "anon_inode:[eventfd]") || memfds(gave) != wantMemfd {
			t.Errorf("version %d: the daemon took %q and gave back %q: want an eventfd and %d memfds, then them", v, took, gave, wantMemfd)
		}
		cost[i], given[i] = len(took), len(gave)
	}
	if cost[0]+1 != cost[1] || given[0]+1 != given[1] {
		t.Errorf("a ring costs %d descriptors and gives %d back; a set %d and %d, want one more each", cost[0], given[0], cost[1], given[1])
	}
}

// TestSetCountsOnce: a ring set counts once in RingStats.Rings and, when
// its connection is gone, once in Released — as a ring does — whatever
// its ring count.
func TestSetCountsOnce(t *testing.T) {
	ringVersion = wire.RingSet
	defer func() { ringVersion = wire.RingV1 }()
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
	ringVersion = wire.RingSet
	defer func() { ringVersion = wire.RingV1 }()
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
