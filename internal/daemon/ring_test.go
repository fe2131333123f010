package daemon

import (
	"errors"
	"fmt"
	"math/rand/v2"
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

// newSet makes a ring set of n rings of size data bytes, closed at the
// test's end.
func newSet(t testing.TB, n, size int) *shmring.SetProducer {
	t.Helper()
	p, err := shmring.CreateSet(n, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func u32rec(v uint32) []byte { return wire.LE.AppendUint32(nil, v) }

// TestRingDeliversWithWritersIdentity: a record published into a shared
// ring reaches trace and sessions with the thread, CPU and time the record
// carries, and the pid of the connection's peer.
func TestRingDeliversWithWritersIdentity(t *testing.T) {
	s := serve(t, Config{})
	rc := newRingClient(t, s, "ring_ev", 1<<16)
	c, idx, ring := rc.c, rc.idx, rc.ring
	ss := sessionOn(t, s, "ring_ev", client.SessionOptions{})
	if err := writeFile(c, "events/user_events/ring_ev/enable", "1"); err != nil {
		t.Fatal(err)
	}
	ts := stamp.Now()
	tid := uint32(unix.Gettid())
	if !ring.Write(shmring.Meta{Time: ts, WriteIndex: idx, TID: tid, CPU: 1}, u32rec(77)) {
		t.Fatal("ring full")
	}
	// A Read flushes the rings first: the record is there at once.
	recs, _, _, err := ss.Poll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("session got %d records, want 1", len(recs))
	}
	r := recs[0]
	if r.TS != ts || r.TID != int32(tid) || r.CPU != 1 || r.PID != int32(os.Getpid()) || wire.LE.Uint32(r.Raw[8:]) != 77 {
		t.Errorf("record %+v; want time %d, tid %d, cpu 1, pid %d, v 77", r, ts, tid, os.Getpid())
	}
	// The trace shows the ring's thread and CPU; the subsystem has one CPU,
	// so CPU 1 is folded onto 0 as for any write.
	tr := readFile(t, c, "trace")
	if !strings.Contains(tr, fmt.Sprintf("-%d ", tid)) || !strings.Contains(tr, "ring_ev: v=0x4d (77)") {
		t.Errorf("trace lacks the record:\n%s", tr)
	}
	if st := s.RingStats(); st.Rings != 1 || st.Delivered != 1 || st.Rejected != 0 {
		t.Errorf("ring stats %+v", st)
	}
}

// TestRingCannotWriteOthersEvents: write indices in a ring are resolved
// against its own connection's events only. A connection with no events
// that publishes the index of another connection's enabled event
// delivers nothing; its records are counted as rejected.
func TestRingCannotWriteOthersEvents(t *testing.T) {
	s := serve(t, Config{})
	_, victim, idx := producer(t, s, "victim_ev u32 v")
	if err := writeFile(victim, "events/user_events/victim_ev/enable", "1"); err != nil {
		t.Fatal(err)
	}
	b := newArena(t, 4096, unix.F_SEAL_SHRINK)
	forger := b.dial(t, s.sock)
	ring := shareTestRing(t, forger, 1<<16)
	forged := []uint32{idx, idx + 1, 1 << 31, ^uint32(0)}
	for _, i := range forged {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: i, TID: 1, CPU: 0}, u32rec(666)) {
			t.Fatal("ring full")
		}
	}
	s.Flush()
	if tr := readFile(t, victim, "trace"); strings.Contains(tr, "victim_ev") {
		t.Errorf("a forged write index reached another connection's event:\n%s", tr)
	}
	if st := s.RingStats(); st.Rejected != uint64(len(forged)) || st.Delivered != 0 {
		t.Errorf("ring stats %+v; want %d rejected, none delivered", st, len(forged))
	}
	// The victim's own socket writes still work.
	if _, err := victim.Writev(7, 0, append(wire.LE.AppendUint32(nil, idx), u32rec(5)...)); err != nil {
		t.Fatal(err)
	}
	if tr := readFile(t, victim, "trace"); strings.Count(tr, "victim_ev") != 1 {
		t.Errorf("trace:\n%s", tr)
	}
}

// TestRingDeliveredBeforeClose: records a client published before it
// closed its connection are in the trace once Close returns.
func TestRingDeliveredBeforeClose(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c, err := client.Dial(s.sock, &client.Arena{FD: a.fd, Addr: a.addr(0), Size: uint64(len(a.mem))})
	if err != nil {
		t.Fatal(err)
	}
	idx, _, err := c.Register(reg(a.addr(0), 0), "closing_ev u32 v", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(c, "events/user_events/closing_ev/enable", "1"); err != nil {
		t.Fatal(err)
	}
	ring := shareTestRing(t, c, 1<<16)
	const n = 100
	for i := range n {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 9, CPU: 0}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	// A reservation never committed: counted as torn when the connection
	// goes, and it does not hold back what came before it.
	ring.Reserve(shmring.Meta{WriteIndex: idx}, 4)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	other, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The event went with its last file; the records stay in the buffer.
	if tr := readFile(t, other, "trace"); strings.Count(tr, "closing_ev: v=") != n {
		t.Errorf("trace has %d records, want %d:\n%s", strings.Count(tr, "closing_ev: v="), n, tr)
	}
	if st := s.RingStats(); st.Delivered != n || st.Torn != 1 {
		t.Errorf("ring stats %+v; want %d delivered, 1 torn", st, n)
	}
	if l := s.log.String(); !strings.Contains(l, "level=WARN msg=\"ring released\" pid=") || !strings.Contains(l, "delivered=100") || !strings.Contains(l, "torn=1") {
		t.Errorf("log lacks the ring's counts:\n%s", l)
	}
}

// TestRingRefused: the daemon takes only a sealed memfd ring set of its
// ring count and of a sane size, one per connection, and says why it
// refuses one; version 1 (one ring) is no longer taken.
func TestRingRefused(t *testing.T) {
	s := serve(t, Config{})
	n := s.drainers.n
	c := rawConn(t, s.sock)
	exchange(t, c, helloMsg(0, 0))
	shareRing := func(fds ...int) error {
		_, _, err := wire.ParseResult(exchange(t, c, wire.AppendHeader(nil, wire.OpRing, 0, wire.RingSet), fds...))
		return err
	}

	unsealed, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unsealed)
	unix.Ftruncate(unsealed, 4096+65536)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := shareRing(unsealed, efd); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("unsealed memfd: %v; want EINVAL saying it is not sealed", err)
	}
	big := newSet(t, n, 2*wire.MaxRing)
	bigEfd, err := big.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	if err := shareRing(big.Fd(), bigEfd); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), fmt.Sprint(wire.MaxRing)) {
		t.Errorf("ring over wire.MaxRing: %v; want EINVAL naming the limit", err)
	}
	ring := newSet(t, n, 1<<16)
	v1, _, err := wire.ParseResult(exchange(t, c, wire.AppendHeader(nil, wire.OpRing, 0, 1), ring.Fd(), efd))
	if !errors.Is(err, unix.EPROTONOSUPPORT) {
		t.Errorf("a Ring request of version 1: %v, %v; want EPROTONOSUPPORT", v1, err)
	}
	if err := shareRing(ring.Fd(), unsealed); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "not an eventfd") {
		t.Errorf("a memfd for the eventfd: %v; want EINVAL saying it is not an eventfd", err)
	}
	if err := shareRing(ring.Fd()); !errors.Is(err, unix.EINVAL) {
		t.Errorf("no eventfd: %v; want EINVAL", err)
	}
	ringEfd, err := ring.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	if err := shareRing(ring.Fd(), ringEfd); err != nil {
		t.Fatal(err)
	}
	if err := shareRing(ring.Fd(), efd); !errors.Is(err, unix.EBUSY) {
		t.Errorf("second ring: %v; want EBUSY", err)
	}
	// A Ring request without a descriptor.
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	wantErrno(t, "ring without a memfd", exchange(t, fd, wire.AppendHeader(nil, wire.OpRing, 0, wire.RingSet)), unix.EINVAL)
	healthy(t, s)
}

// TestRingDrainsWithoutReads: the drainers deliver what is published on
// their own, without a read asking them to flush — woken by the publish
// when they sleep on the idle rings.
func TestRingDrainsWithoutReads(t *testing.T) {
	s := serve(t, Config{})
	rc := newRingClient(t, s, "wake_ev", 1<<16)
	idx, ring := rc.idx, rc.ring
	for i := range 3 {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 1}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
		deadline := time.Now().Add(waitLimit)
		for s.RingStats().Delivered != uint64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("record %d not drained within %v", i, waitLimit)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestRingRecordsBeforeDisableKept: records published while the event was
// enabled are in the trace even when the disable comes before the
// drainers got to them — the disable flushes the rings first, as the kernel's
// synchronous writes would be in the buffer already.
func TestRingRecordsBeforeDisableKept(t *testing.T) {
	s := serve(t, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1, BufferKB: 4096})})
	rc := newRingClient(t, s, "dis_ev", 1<<20)
	c, idx, ring := rc.c, rc.idx, rc.ring
	const n = 10000
	for i := range n {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 3}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	if err := writeFile(c, "events/user_events/dis_ev/enable", "0"); err != nil {
		t.Fatal(err)
	}
	if st := s.RingStats(); st.Delivered != n || st.Disabled != 0 {
		t.Errorf("ring stats after the disable %+v; want all %d delivered", st, n)
	}
}

// TestRingHostileProducer: a client that scribbles over its whole ring —
// header words, head, records — and one that never stops publishing
// cannot make the daemon crash, hang a flush or a close, or deliver
// anything it did not validate; everyone else is served on.
func TestRingHostileProducer(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c, err := client.Dial(s.sock, &client.Arena{FD: a.fd, Addr: a.addr(0), Size: uint64(len(a.mem))})
	if err != nil {
		t.Fatal(err)
	}
	idx, _, err := c.Register(reg(a.addr(0), 0), "hostile_ev u32 v", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(c, "events/user_events/hostile_ev/enable", "1"); err != nil {
		t.Fatal(err)
	}
	ring := shareTestRing(t, c, 1<<16)
	mem, _ := ring.hostile(t)
	// What is published before the scribbling starts is delivered.
	for i := range 10 {
		ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 1}, u32rec(uint32(i)))
	}
	s.Flush()
	if st := s.RingStats(); st.Delivered != 10 {
		t.Fatalf("ring stats %+v; want 10 delivered", st)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	stop := make(chan struct{})
	scribbled := make(chan struct{})
	go func() {
		defer close(scribbled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Mostly records, as a fast producer would publish; now and
			// then garbage anywhere past the magic and geometry.
			for range 100 {
				ring.Write(shmring.Meta{Time: rnd.Uint64(), WriteIndex: idx + uint32(rnd.IntN(2)), TID: rnd.Uint32(), CPU: rnd.Uint32()}, u32rec(rnd.Uint32()))
			}
			for range rnd.IntN(64) {
				off := 64 + rnd.IntN(len(mem)-64-8)
				wire.LE.PutUint64(mem[off:], rnd.Uint64())
			}
		}
	}()
	for range 20 {
		s.Flush()
		readFile(t, c, "trace")
	}
	// Closing while the producer still scribbles and publishes.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-scribbled
	t.Logf("ring stats %+v", s.RingStats())
	healthy(t, s)
}

// TestRingRecordSizes: records of every size up to a write's largest pass
// through a ring, read where they lie, and one longer than a write may be
// is not delivered. (A session
// gets those perf would: up to PERF_MAX_TRACE_SIZE.)
func TestRingRecordSizes(t *testing.T) {
	s := serve(t, Config{})
	rc := newRingClient(t, s, "sizes_ev", 1<<20)
	idx, ring := rc.idx, rc.ring
	ss := sessionOn(t, s, "sizes_ev", client.SessionOptions{BufferBytes: 4 << 20})
	tid := uint32(unix.Gettid())
	sizes := []int{4, 200, 5000, 40000, wire.MaxWrite, 300}
	for i, n := range append(sizes, wire.MaxWrite+8) { // the last is longer than a write may be
		p := make([]byte, n)
		wire.LE.PutUint32(p, uint32(i))
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: tid}, p) {
			t.Fatalf("ring full at %d bytes", n)
		}
	}
	var got []int
	testutil.Wait(t, "the records", func() bool {
		recs, _, _, err := ss.Poll(nil) // flushes the rings first
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, int(wire.LE.Uint32(r.Raw[8:])))
		}
		return len(got) >= 4 && s.RingStats().Delivered >= uint64(len(sizes))
	})
	if want := []int{0, 1, 2, 5}; !slices.Equal(got, want) {
		t.Errorf("the session got records %v, want %v (the others are longer than perf takes)", got, want)
	}
	if d := s.RingStats().Delivered; d != uint64(len(sizes)) {
		t.Errorf("%d records delivered, want %d: the overlong one too", d, len(sizes))
	}
}
