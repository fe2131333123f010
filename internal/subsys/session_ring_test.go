package subsys

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// ringSession makes a session that delivers into a new ring of size bytes
// and returns the reader's side of the ring.
func ringSession(t testing.TB, s *Subsystem, size int, opts SessionOptions) (*Session, *shmring.Consumer) {
	ss, c, _ := hostileRingSession(t, s, size, opts)
	return ss, c
}

// hostileRingSession is ringSession, also returning the ring's header page
// mapped writable, as a hostile reader maps the memfd it was given.
func hostileRingSession(t testing.TB, s *Subsystem, size int, opts SessionOptions) (*Session, *shmring.Consumer, unsafe.Pointer) {
	t.Helper()
	p, err := shmring.Create(size)
	if err != nil {
		t.Fatal(err)
	}
	ss := s.NewSession(opts)
	if err := ss.DeliverToRing(p); err != nil {
		t.Fatal(err)
	}
	c, err := shmring.Attach(p.Fd())
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := unix.Mmap(p.Fd(), 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	p.CloseFd()
	t.Cleanup(func() {
		c.Close()
		unix.Munmap(hdr)
	})
	return ss, c, unsafe.Pointer(&hdr[0])
}

// ringRec is one record of a session ring, decoded.
type ringRec struct {
	kind     uint32
	ts       uint64
	tid, cpu uint32
	pid, id  uint32
	raw      []byte // a sample's raw record, a comm's name
	lost     uint64
	flags    uint32
}

func drainRing(t testing.TB, c *shmring.Consumer) []ringRec {
	t.Helper()
	buf := make([]byte, c.Size())
	var out []ringRec
	for {
		rec, err := c.Next(buf)
		if err != nil {
			return out
		}
		p, ne := rec.Payload, binary.NativeEndian
		r := ringRec{kind: rec.WriteIndex, ts: rec.Time, tid: rec.TID, cpu: rec.CPU}
		switch rec.WriteIndex {
		case wire.RingSample, wire.RingComm:
			r.pid, r.id, r.raw = ne.Uint32(p), ne.Uint32(p[4:]), append([]byte(nil), p[8:]...)
		case wire.RingLost:
			if len(p) != 16 {
				t.Fatalf("lost record of %d bytes", len(p))
			}
			r.lost, r.id, r.flags = ne.Uint64(p), ne.Uint32(p[8:]), ne.Uint32(p[12:])
		default:
			t.Fatalf("record kind %d", rec.WriteIndex)
		}
		out = append(out, r)
	}
}

// TestSessionRing: a session with a ring delivers there what its buffer
// would hold — the thread's name before its first record and when it
// changes, then the record with its time, pid, tid, CPU, type id and raw
// bytes — and Read says the records are in the ring.
func TestSessionRing(t *testing.T) {
	e, f, iov := benchWriteSetup(t)
	ev := e.s.Lookup("user_events", "bench")
	ss, c := ringSession(t, e.s, 1<<16, SessionOptions{Comm: true})
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 11, TGID: 10, Comm: "worker", CPU: 1}
	idx := binary.NativeEndian.Uint32(iov[0])
	for i, ts := range []uint64{100, 200} {
		if i == 1 {
			w.Comm = "renamed"
		}
		if _, err := f.WriteStamped(w, ts, idx, iov[1]); err != nil {
			t.Fatal(err)
		}
	}
	got := drainRing(t, c)
	if len(got) != 4 {
		t.Fatalf("%d records, want comm, sample, comm, sample: %+v", len(got), got)
	}
	for i, want := range []struct {
		kind uint32
		ts   uint64
		name string
	}{{wire.RingComm, 100, "worker"}, {wire.RingSample, 100, ""}, {wire.RingComm, 200, "renamed"}, {wire.RingSample, 200, ""}} {
		r := got[i]
		if r.kind != want.kind || r.ts != want.ts || r.tid != 11 || r.pid != 10 || r.cpu != 1 {
			t.Errorf("record %d: %+v, want kind %d at %d by 10/11 on CPU 1", i, r, want.kind, want.ts)
		}
		switch r.kind {
		case wire.RingComm:
			if string(r.raw) != want.name || r.id != 0 {
				t.Errorf("record %d: name %q id %d, want %q", i, r.raw, r.id, want.name)
			}
		case wire.RingSample:
			if r.id != uint32(ev.ID()) || len(r.raw) != 8+len(iov[1]) || string(r.raw[8:]) != string(iov[1]) ||
				binary.NativeEndian.Uint16(r.raw) != uint16(ev.ID()) || binary.NativeEndian.Uint32(r.raw[4:]) != 11 {
				t.Errorf("record %d: id %d raw % x", i, r.id, r.raw)
			}
		}
	}
	if _, err := ss.Read(context.Background(), make([]byte, 4096), nil); err == nil {
		t.Error("Read of a ring session succeeded")
	} else {
		wantErrno(t, "Read of a ring session", err, unix.EINVAL)
	}
}

// TestSessionRingOrder: DeliverToRing comes before the session is attached
// to anything, and once.
func TestSessionRingOrder(t *testing.T) {
	e, _, _ := benchWriteSetup(t)
	ss := e.s.NewSession(SessionOptions{})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		t.Fatal(err)
	}
	p, err := shmring.Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	wantErrno(t, "ring after attach", ss.DeliverToRing(p), unix.EBUSY)
	ss2, _ := ringSession(t, e.s, 4096, SessionOptions{})
	wantErrno(t, "second ring", ss2.DeliverToRing(p), unix.EBUSY)
	ss2.Close()
	ss3 := e.s.NewSession(SessionOptions{})
	ss3.Close()
	wantErrno(t, "ring of a closed session", ss3.DeliverToRing(p), unix.EBADF)
}

// TestSessionRingLost: records that do not fit are dropped and counted,
// and the reader learns of them in the ring where they happened — a lost
// record with the count, the event, the time and CPU of the first of them,
// before the next record that fits — or from TakeLost when none fits.
// Written = delivered + lost, exactly; the event's dropped count agrees.
func TestSessionRingLost(t *testing.T) {
	e, f, iov := benchWriteSetup(t)
	ev := e.s.Lookup("user_events", "bench")
	ss, c := ringSession(t, e.s, 4096, SessionOptions{})
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	w := Writer{PID: 5, TGID: 5, Comm: "w", CPU: 0}
	const n = 200 // 4 KiB holds ~40
	for i := range n {
		w.CPU = i % 2
		if _, err := f.WriteStamped(w, uint64(1000+i), idx, iov[1]); err != nil {
			t.Fatal(err)
		}
	}
	first := drainRing(t, c)
	samples := count(first, wire.RingSample)
	if samples == 0 || samples == n {
		t.Fatalf("first drain: %d samples of %d; want some, not all", samples, n)
	}
	if ss.Lost() != uint64(n-samples) {
		t.Errorf("Lost() = %d, want %d", ss.Lost(), n-samples)
	}
	// The next record that fits brings the lost records before it (a
	// lost record is smaller than a sample: one may have fitted already).
	if _, err := f.WriteStamped(w, 5000, idx, iov[1]); err != nil {
		t.Fatal(err)
	}
	second := drainRing(t, c)
	if len(second) == 0 || second[len(second)-1].kind != wire.RingSample || second[len(second)-1].ts != 5000 {
		t.Fatalf("after the drain: %+v, want lost records and the sample", second)
	}
	var lostRecs []ringRec
	var inRing uint64
	for _, r := range append(first, second...) {
		if r.kind == wire.RingLost {
			lostRecs = append(lostRecs, r)
			inRing += r.lost
		}
	}
	if inRing != uint64(n-samples) || len(lostRecs) == 0 {
		t.Fatalf("lost records %+v say %d, want %d", lostRecs, inRing, n-samples)
	}
	l := lostRecs[0]
	if l.id != uint32(ev.ID()) || l.ts != uint64(1000+samples) || l.cpu != uint32(samples%2) || l.flags != 0 {
		t.Errorf("first lost record %+v, want event %d from time %d on CPU %d", l, ev.ID(), 1000+samples, samples%2)
	}
	if k := len(first) - 1; first[k].kind == wire.RingLost && first[k].ts != uint64(1000+samples) {
		t.Errorf("a lost record in the first drain is not the first loss: %+v", first[k])
	}
	written, dropped := ev.Counts()
	if written != n+1 || dropped != uint64(n-samples) {
		t.Errorf("event counts: %d written, %d dropped; want %d, %d", written, dropped, n+1, n-samples)
	}

	// Fill the ring again without draining, then ask: what fits in the
	// ring goes there, TakeLost hands over the rest; together they are
	// what was lost.
	for i := range n {
		f.WriteStamped(w, uint64(6000+i), idx, iov[1])
	}
	lost, _ := ss.TakeLost()
	rest := drainRing(t, c)
	var restLost uint64
	for _, r := range rest {
		restLost += r.lost
	}
	if want := uint64(n - count(rest, wire.RingSample)); lost+restLost != want {
		t.Errorf("handed over %d and %d in the ring, want %d in all", lost, restLost, want)
	}
	if lost == 0 {
		t.Errorf("TakeLost found room in a full ring")
	}
	if lost, _ := ss.TakeLost(); lost != 0 {
		t.Errorf("TakeLost again: %d", lost)
	}
	// With room, TakeLost writes the lost record and hands nothing over.
	for i := range n {
		f.WriteStamped(w, uint64(9000+i), idx, iov[1])
	}
	got := drainRing(t, c)
	if lost, big := ss.TakeLost(); lost != 0 || big != 0 {
		t.Errorf("TakeLost with room: %d, %d", lost, big)
	}
	last := drainRing(t, c)
	var total uint64
	for _, r := range append(got, last...) {
		total += r.lost
	}
	if want := uint64(n - count(got, wire.RingSample)); total != want || len(last) != 1 || last[0].kind != wire.RingLost {
		t.Errorf("lost records say %d, want %d; after TakeLost: %+v", total, want, last)
	}
}

func count(recs []ringRec, kind uint32) int {
	n := 0
	for _, r := range recs {
		if r.kind == kind {
			n++
		}
	}
	return n
}

// TestSessionRingTooLarge: a record over perf's raw sample limit is
// dropped, counted in TooLarge and not Lost, and reported in the ring
// flagged as such.
func TestSessionRingTooLarge(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	idx, err := e.reg(f, "__big char[1024] a; char[1024] b; char[1024] c; char[1024] d; char[1024] e; char[1024] f; char[1024] g; char[1024] h; char[1024] i", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	ss, c := ringSession(t, e.s, 1<<16, SessionOptions{})
	if err := ss.Attach(e.s.Lookup("user_events", "__big")); err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 1, TGID: 1, Comm: "x", CPU: 1}
	if _, err := f.WriteStamped(w, 7, idx, make([]byte, 9*1024)); err != nil {
		t.Fatal(err)
	}
	if ss.TooLarge() != 1 || ss.Lost() != 0 {
		t.Errorf("TooLarge %d Lost %d, want 1 and 0", ss.TooLarge(), ss.Lost())
	}
	lost, big := ss.TakeLost() // fits: written into the ring
	got := drainRing(t, c)
	if lost != 0 || big != 0 || len(got) != 1 || got[0].kind != wire.RingLost || got[0].lost != 1 || got[0].flags != wire.RingLostTooLarge || got[0].ts != 7 || got[0].cpu != 1 {
		t.Errorf("TakeLost %d, %d; ring %+v; want one too-large lost record", lost, big, got)
	}
}

// TestSessionRingHostileReader: the reader may write anything into the
// ring. A sleeping word it keeps setting costs at most a wake per
// ringWakeMin, not one per record; head and tail it scribbles on cost only
// its own records (dropped and counted), and the writers neither block nor
// touch memory outside the ring.
func TestSessionRingHostileReader(t *testing.T) {
	e, f, iov := benchWriteSetup(t)
	ss, c, hdr := hostileRingSession(t, e.s, 1<<16, SessionOptions{})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		t.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	w := Writer{PID: 5, TGID: 5, Comm: "w"}
	buf := make([]byte, c.Size())

	// The sleeping word set for every record.
	const n = 20000
	start := time.Now()
	for i := range n {
		atomic.StoreUint32((*uint32)(unsafe.Add(hdr, 192)), 1)
		f.WriteStamped(w, uint64(i), idx, iov[1])
		if i%100 == 99 {
			for {
				if _, err := c.Next(buf); err != nil {
					break
				}
			}
		}
	}
	elapsed := time.Since(start)
	wakes, skipped := ss.RingWakes()
	if max := uint64(elapsed/(ringWakeMin*time.Nanosecond)) + 1; wakes > max {
		t.Errorf("%d wakes in %v: more than one per %dns (%d)", wakes, elapsed, ringWakeMin, max)
	}
	if wakes+skipped != n {
		t.Errorf("%d wakes and %d held back for %d records, all with the word set", wakes, skipped, n)
	}

	// Head and tail scribbled on: every write still returns, and every
	// record is delivered or counted.
	head := (*uint64)(unsafe.Add(hdr, 64))
	tail := (*uint64)(unsafe.Add(hdr, 128))
	lost0 := ss.Lost()
	written0, _ := e.s.Lookup("user_events", "bench").Counts()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			atomic.StoreUint64(head, i*0x9e3779b97f4a7c15)
			atomic.StoreUint64(tail, i*0x7f4a7c159e3779b9)
		}
	}()
	for i := range n {
		f.WriteStamped(w, uint64(i), idx, iov[1])
	}
	close(stop)
	<-done
	written1, _ := e.s.Lookup("user_events", "bench").Counts()
	if written1-written0 != n {
		t.Errorf("%d writes counted, want %d", written1-written0, n)
	}
	if ss.Lost() == lost0 {
		t.Log("no record was lost to the scribbling (it raced the writes rarely)")
	}
}

// BenchmarkSessionRingDeliver is the daemon's per-record work for a
// session that delivers into a ring: File.WriteStamped (the write's
// checks, validation) and the delivery — a reservation, the copy and the
// publish — with the reader draining every 256 records on the same
// goroutine (so that what is timed is the work, not two cores' races).
// Target (issue 15): ~100 ns or less, 0 allocs.
func BenchmarkSessionRingDeliver(b *testing.B) {
	e, f, iov := benchWriteSetup(b)
	ss, c := ringSession(b, e.s, 8<<20, SessionOptions{Comm: true})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		b.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	w := Writer{PID: 5, TGID: 5, Comm: "w", CPU: 1}
	buf := make([]byte, 16<<10)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := f.WriteStamped(w, uint64(i), idx, iov[1]); err != nil {
			b.Fatal(err)
		}
		i++
		if i%256 == 0 {
			for {
				if _, err := c.Next(buf); err != nil {
					break
				}
			}
		}
	}
	b.ReportMetric(float64(ss.Lost()), "lost")
}

// TestSessionRingWakesReader: a reader asleep on its ring is woken by the
// first record after a quiet spell, not left to its timeout.
func TestSessionRingWakesReader(t *testing.T) {
	e, f, iov := benchWriteSetup(t)
	ss, c, hdr := hostileRingSession(t, e.s, 1<<16, SessionOptions{})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		t.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	for round := range 3 {
		woke := make(chan bool)
		start := time.Now()
		go func() {
			// Wait may return early (a signal): a reader loops.
			for !c.Wait(time.Hour) {
			}
			woke <- true
		}()
		deadline := time.Now().Add(time.Minute)
		for atomic.LoadUint32((*uint32)(unsafe.Add(hdr, 192))) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the reader never said it sleeps")
			}
			time.Sleep(time.Millisecond)
		}
		// A quiet spell longer than ringWakeMax since the last wake.
		time.Sleep(2 * ringWakeMax * time.Nanosecond)
		if _, err := f.WriteStamped(Writer{PID: 1, TGID: 1, Comm: "w"}, uint64(round), idx, iov[1]); err != nil {
			t.Fatal(err)
		}
		select {
		case <-woke:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the reader was not woken within a minute", round)
		}
		t.Logf("round %d: woken after %v", round, time.Since(start))
		if _, err := c.Next(make([]byte, c.Size())); err != nil {
			t.Fatal(err)
		}
	}
	if wakes, _ := ss.RingWakes(); wakes > 3 {
		t.Errorf("%d wakes for 3 records", wakes)
	}
}

// TestSessionRingLostRuns: losses of many events, more runs than the
// session keeps, still add up exactly, each kind (too large or not) apart.
func TestSessionRingLostRuns(t *testing.T) {
	e := newEnv(t)
	ss, c := ringSession(t, e.s, 1<<16, SessionOptions{})
	for i := range 40 {
		ss.noteLost(&Event{id: 1000 + i}, uint64(i), 0, uint64(i+1))
		if i%10 == 9 {
			ss.noteLostFlags(&Event{id: 2000 + i}, uint64(i), 1, 2, wire.RingLostTooLarge)
		}
	}
	if lost, big := ss.TakeLost(); lost != 0 || big != 0 {
		t.Fatalf("TakeLost with room: %d, %d", lost, big)
	}
	var lost, big uint64
	recs := drainRing(t, c)
	for _, r := range recs {
		if r.flags&wire.RingLostTooLarge != 0 {
			big += r.lost
		} else {
			lost += r.lost
		}
	}
	if lost != 40*41/2 || big != 8 || len(recs) > maxLostNotes+1 {
		t.Errorf("%d lost records say %d lost and %d too large; want %d and 8 in at most %d", len(recs), lost, big, 40*41/2, maxLostNotes+1)
	}
	if recs[0].id != 1000 || recs[0].ts != 0 || recs[0].lost != 1 {
		t.Errorf("first lost record %+v, want 1 of event 1000 at 0", recs[0])
	}
	if ss.Lost() != 40*41/2 || ss.TooLarge() != 8 {
		t.Errorf("Lost %d, TooLarge %d", ss.Lost(), ss.TooLarge())
	}
}

// BenchmarkSessionRingDeliverReader is BenchmarkSessionRingDeliver with the
// reader on a goroutine of its own (another core, when there is one), as
// in the daemon: what the cache lines that move between the writer and the
// reader add to the writer's work. "lost" counts what the reader did not
// keep up with.
func BenchmarkSessionRingDeliverReader(b *testing.B) {
	e, f, iov := benchWriteSetup(b)
	ss, c := ringSession(b, e.s, 8<<20, SessionOptions{Comm: true})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		b.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	w := Writer{PID: 5, TGID: 5, Comm: "w", CPU: 1}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 16<<10)
		for !stop.Load() {
			if _, err := c.Next(buf); err != nil {
				c.Wait(time.Millisecond)
			}
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := f.WriteStamped(w, uint64(i), idx, iov[1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	stop.Store(true)
	<-done
	b.ReportMetric(float64(ss.Lost())/float64(b.N), "lost/op")
}
