package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/handover"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// handReader is a session's reader that takes the ring sets the daemon
// hands over, as `uetrace record` does: it reads its streams and the sets
// it holds, and keeps what both gave, stream by stream.
type handReader struct {
	t    testing.TB
	ss   *client.Session
	st   *client.SessionStreams
	comm bool
	sets []*handover.Set
	outs []*handover.Stream
	got  [][]byte // by ring index: what the streams and the sets gave
	// handed counts the hand-overs taken.
	handed int
	// ring and idx are the producer's ring set and write index, when the
	// test publishes through them (handedRaw).
	ring *testRing
	idx  uint32
}

// newHandReader is a reader of a session of its own on s, attached to
// pattern, delivering into streams.
func newHandReader(t testing.TB, s *testServer, pattern string, comm bool) *handReader {
	t.Helper()
	ss := newSession(t, s, client.SessionOptions{Comm: comm})
	st, err := ss.ShareStreams(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := ss.Attach(pattern, false); err != nil {
		t.Fatal(err)
	}
	hr := &handReader{t: t, ss: ss, st: st, comm: comm, got: make([][]byte, st.Len())}
	for range st.Len() {
		hr.outs = append(hr.outs, handover.NewStream(comm))
	}
	t.Cleanup(func() {
		for _, set := range hr.sets {
			set.Close()
		}
	})
	return hr
}

// take asks for a hand-over and maps it; false when there was none.
func (hr *handReader) take() bool {
	t := hr.t
	h, err := hr.ss.HandOver()
	if err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return false
	}
	defer h.Close()
	g, err := handover.GrantOf(h.HandOver)
	if err != nil {
		t.Fatal(err)
	}
	set, err := handover.OpenSet(g, h.SetFd, h.ControlFd)
	if err != nil {
		t.Fatal(err)
	}
	hr.sets = append(hr.sets, set)
	hr.handed++
	return true
}

// pass reads what the streams and the sets hold, dropping the sets taken
// back, and reports how many records the sets gave.
func (hr *handReader) pass() int {
	total := 0
	for k := range hr.got {
		r := hr.st.Reader(k)
		if b := r.Available(); len(b) > 0 {
			hr.got[k] = append(hr.got[k], b...)
			r.Consume(len(b))
		}
	}
	live := hr.sets[:0]
	for _, set := range hr.sets {
		gone := 0
		for k := range set.Rings() {
			for {
				n, g := set.Pass(k, hr.outs[k], 256)
				total += n
				if g {
					gone++
				}
				if g || n < 256 {
					break
				}
			}
		}
		if gone == set.Rings() {
			set.Close()
			continue
		}
		live = append(live, set)
	}
	clear(hr.sets[len(live):])
	hr.sets = live
	for k, o := range hr.outs {
		hr.got[k] = append(hr.got[k], o.Bytes()...)
		o.Reset()
	}
	return total
}

// settle has the daemon deliver what was published, reads everything, and
// tells the losses that wait.
func (hr *handReader) settle() {
	for hr.pass() > 0 {
	}
	if _, _, err := hr.st.Sync(); err != nil {
		hr.t.Fatal(err)
	}
	hr.pass()
	for k, o := range hr.outs {
		o.FlushLost()
		hr.got[k] = append(hr.got[k], o.Bytes()...)
		o.Reset()
	}
}

// sampleSeqs are the u32 after the trace header of every sample in b.
func sampleSeqs(t testing.TB, b []byte) []uint32 {
	seqs, _ := sampleSeqsLost(t, b)
	return seqs
}

// sampleSeqsLost is sampleSeqs, and the records b's PERF_RECORD_LOST
// count.
func sampleSeqsLost(t testing.TB, b []byte) (seqs []uint32, lost uint64) {
	t.Helper()
	ne := binary.NativeEndian
	for len(b) > 0 {
		n := int(ne.Uint16(b[6:]))
		if n < 8 || n > len(b) {
			t.Fatalf("a record of %d bytes with %d left", n, len(b))
		}
		switch ne.Uint32(b) {
		case 9: // PERF_RECORD_SAMPLE
			seqs = append(seqs, ne.Uint32(b[wire.SampleHeadSize+8:]))
		case 2: // PERF_RECORD_LOST
			lost += ne.Uint64(b[16:])
		}
		b = b[n:]
	}
	return seqs, lost
}

// handProducer is a producer with a ring set whose events — registered
// here, so that a reader can attach them — nothing else consumes.
func handProducer(t *testing.T, s *testServer, commands ...string) (*client.Conn, []uint32, *testRing) {
	t.Helper()
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	var idx []uint32
	for i, cmd := range commands {
		x, _, err := c.Register(reg(a.addr(4*i), 0), cmd, false)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, x)
	}
	return c, idx, shareTestRing(t, c, 1<<16)
}

// TestHandOverSameBytes: the same records of a producer's ring set reach
// a session's reader byte for byte the same through the daemon's drainers
// (the session's streams) and handed over to the reader — samples from
// two threads on two CPUs, a loss record, a record whose __data_loc
// points outside it (rejected), a record of an event nobody consumes
// (disabled), a record too large for perf (told lost), names before
// samples.
func TestHandOverSameBytes(t *testing.T) {
	pid, tid := uint32(unix.Getpid()), uint32(liveThread(t))
	now := stamp.Now()
	type rec struct {
		m       shmring.Meta
		payload []byte
	}
	var recs []rec
	loc := func(off, n uint16) []byte {
		b := binary.NativeEndian.AppendUint32(nil, 0)
		return binary.NativeEndian.AppendUint32(b, uint32(n)<<16|uint32(off))
	}
	for i := range 40 {
		th := pid
		if i%3 == 1 {
			th = tid
		}
		m := shmring.Meta{Time: now + uint64(i), TID: th, CPU: uint32(i % 2), WriteIndex: 0}
		recs = append(recs, rec{m, append(loc(8, 3), 'a', 'b', 0)})
		switch i {
		case 10:
			// Loss record: 5 of index 0 lost before the next record.
			lost := binary.LittleEndian.AppendUint32(nil, 0)
			lost = binary.LittleEndian.AppendUint32(lost, 0)
			lost = binary.LittleEndian.AppendUint64(lost, 5)
			recs = append(recs, rec{shmring.Meta{Time: now + uint64(i), TID: th, CPU: m.CPU, WriteIndex: wire.LostIndex}, lost})
		case 20:
			recs = append(recs, rec{m, loc(200, 3)}) // outside: EFAULT
		case 25:
			recs = append(recs, rec{shmring.Meta{Time: m.Time, TID: th, CPU: m.CPU, WriteIndex: 1}, []byte{1, 2, 3, 4}})
		case 27:
			// Loss record: 7 of index 1, which nothing consumes.
			lost := binary.LittleEndian.AppendUint32(nil, 1)
			lost = binary.LittleEndian.AppendUint32(lost, 0)
			lost = binary.LittleEndian.AppendUint64(lost, 7)
			recs = append(recs, rec{shmring.Meta{Time: now + uint64(i), TID: th, CPU: m.CPU, WriteIndex: wire.LostIndex}, lost})
		case 30:
			big := append(loc(8, 9000), make([]byte, 9000)...)
			big[8+8999] = 0
			recs = append(recs, rec{m, big})
		}
	}
	// counts are the events' counts (uetrace_event_counts) as the
	// records were delivered, and after the set was taken back (the
	// reader's last counts added then, and not twice).
	type counts struct{ delivered, back string }
	run := func(hand bool) ([][]byte, counts) {
		s := serve(t, Config{Rings: 2})
		c, _, ring := handProducer(t, s, "ho_same u32 n; __data_loc char[] s", "ho_none u32 x")
		hr := newHandReader(t, s, "user_events:ho_same", true)
		if hand && !hr.take() {
			t.Fatal("no hand-over: the session is the only consumer")
		}
		for _, r := range recs {
			if !ring.Write(r.m, r.payload) {
				t.Fatal("ring full")
			}
		}
		hr.settle()
		var cs counts
		cs.delivered = readFile(t, c, "uetrace_event_counts")
		if err := writeFile(c, "events/user_events/ho_same/enable", "1"); err != nil {
			t.Fatal(err)
		}
		if hand && s.handOvers.handed.Load() != 1 {
			t.Fatalf("%d hand-overs, want 1", s.handOvers.handed.Load())
		}
		cs.back = readFile(t, c, "uetrace_event_counts")
		return hr.got, cs
	}
	drained, drainedCounts := run(false)
	handed, handedCounts := run(true)
	// 40 delivered, 5 and 7 lost, one too large for perf: written, and
	// the 6 and the 7 dropped.
	if want := "ho_same 46 6\nho_none 7 7\n"; drainedCounts.delivered != want || drainedCounts.back != want {
		t.Errorf("the events' counts through the drainers: %q, then %q; want %q", drainedCounts.delivered, drainedCounts.back, want)
	}
	if handedCounts != drainedCounts {
		t.Errorf("the events' counts handed over: %q, then %q; through the drainers %q, then %q", handedCounts.delivered, handedCounts.back, drainedCounts.delivered, drainedCounts.back)
	}
	// What the test is about is in the records.
	kinds := map[uint32]int{}
	for _, b := range drained {
		for len(b) > 0 {
			kinds[binary.NativeEndian.Uint32(b)]++
			b = b[binary.NativeEndian.Uint16(b[6:]):]
		}
	}
	if kinds[9] != 40 || kinds[2] != 2 || kinds[3] < 2 { // samples, LOST, COMM
		t.Errorf("records by type %v: want 40 samples, 2 LOST (the loss record's, the large one's), the names", kinds)
	}
	for k := range drained {
		if len(drained[k]) == 0 {
			t.Fatalf("stream %d: nothing", k)
		}
		if !bytes.Equal(drained[k], handed[k]) {
			t.Errorf("stream %d: through the drainers %d bytes, handed over %d:\n%x\n%x", k, len(drained[k]), len(handed[k]), drained[k], handed[k])
		}
	}
}

// TestHandOverExactlyOnce: while a producer publishes, a tracer enables
// and disables one of its events in the trace buffer again and again:
// each enable takes the set back from the reader (before the write, with
// what the rings held delivered), and the reader takes it again once the
// trace buffer lets go. Every record reaches the session once — through
// the reader or through the drainers — none twice; none lost but those
// the session's streams counted lost (PERF_RECORD_LOST) when the drainers
// found them full.
func TestHandOverExactlyOnce(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	_, idx, ring := handProducer(t, s, "ho_once u32 n")
	hr := newHandReader(t, s, "user_events:ho_once", false)
	tracer, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tracer.Close() })

	// The producer writes until the set has gone back and forth enough.
	var written atomic.Uint32
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var p [4]byte
		for i := uint32(0); !stop.Load(); {
			binary.NativeEndian.PutUint32(p[:], i)
			if ring.Write(shmring.Meta{Time: stamp.Now(), TID: uint32(unix.Getpid()), CPU: i % 2, WriteIndex: idx[0]}, p[:]) {
				i++
				written.Store(i)
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	toggles := 0
	for toggles < 8 {
		hr.pass()
		if hr.take() || len(hr.sets) == 0 {
			continue
		}
		// Take it back: the enable's sync hook does.
		for _, v := range []string{"1", "0"} {
			if err := writeFile(tracer, "events/user_events/ho_once/enable", v); err != nil {
				t.Fatal(err)
			}
		}
		toggles++
	}
	stop.Store(true)
	wg.Wait()
	n := written.Load()
	// The last hand-over ended, whatever its state.
	testutil.Wait(t, "a set handed again after the toggles", func() bool { hr.pass(); return hr.take() || len(hr.sets) > 0 })
	hr.settle()
	seen := make([]int, n)
	var lost uint64
	for _, b := range hr.got {
		seqs, l := sampleSeqsLost(t, b)
		lost += l
		for _, v := range seqs {
			if v >= n {
				t.Fatalf("record %d: never written", v)
			}
			seen[v]++
		}
	}
	missing := uint64(0)
	for v, c := range seen {
		if c > 1 {
			t.Fatalf("record %d reached the session %d times (toggles %d, hand-overs %d)", v, c, toggles, hr.handed)
		}
		if c == 0 {
			missing++
		}
	}
	if missing != lost {
		t.Fatalf("%d records never reached the session, %d counted lost (toggles %d, hand-overs %d)", missing, lost, toggles, hr.handed)
	}
	if got := s.Stats(); got.HandOvers != uint64(hr.handed) || !strings.Contains(string(got.AppendText(nil)), fmt.Sprintf("handovers %d\n", hr.handed)) {
		t.Errorf("Stats says %d hand-overs; the reader took %d", got.HandOvers, hr.handed)
	}
	st := s.RingStats()
	if st.Delivered != uint64(n) {
		t.Errorf("RingStats.Delivered %d, want %d: the readers' counts added to the drainers'", st.Delivered, n)
	}
	t.Logf("%d records, %d lost in the streams, %d hand-overs, %d toggles, %d forced", n, lost, hr.handed, toggles, s.handOvers.forced.Load())
}

// TestHandOverRefused: no hand-over while the trace buffer also consumes
// an event of the connection, nor to a session without streams.
func TestHandOverRefused(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	c, _, _ := handProducer(t, s, "ho_ref u32 n")
	hr := newHandReader(t, s, "user_events:ho_ref", false)
	if err := writeFile(c, "events/user_events/ho_ref/enable", "1"); err != nil {
		t.Fatal(err)
	}
	if hr.take() {
		t.Fatal("handed over while the trace buffer consumes the event")
	}
	plain := newSession(t, s, client.SessionOptions{})
	if _, err := plain.HandOver(); err == nil {
		t.Fatal("a session without streams was answered")
	}
}

// TestHandOverStuckReader: a reader that stopped in the middle of a pass
// — its ring says Reading, and it never commits — does not hold the
// daemon: the enable that takes the set back waits at most takeBackBound
// for it, then forces the ring back (counted), and the drainers deliver
// what the producer publishes, from where the reader's last commit left
// the ring.
func TestHandOverStuckReader(t *testing.T) {
	s, hr, h := handedRaw(t, "ho_stuck")
	ctl, err := handover.AttachControl(h.ControlFd, h.Rings)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	// Both rings begin a pass, and stay in it.
	for k := range h.Rings {
		if _, ok := ctl.Begin(k); !ok {
			t.Fatalf("ring %d: not the reader's", k)
		}
	}
	hr.publish(10)
	tracer, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tracer.Close()
	began := time.Now()
	if err := writeFile(tracer, "events/user_events/ho_stuck/enable", "1"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if got := s.handOvers.forced.Load(); got != 2 {
		t.Errorf("%d rings forced back, want 2", got)
	}
	// The stuck reader's commit finds the ring taken.
	var cs handover.Counts
	if ctl.Commit(0, 0, &cs) {
		t.Error("a commit after a forced take-back succeeded")
	}
	hr.settle()
	var seqs []uint32
	for _, b := range hr.got {
		seqs = append(seqs, sampleSeqs(t, b)...)
	}
	if len(seqs) != 10 {
		t.Errorf("the session has %d of the 10 records: %v", len(seqs), seqs)
	}
	t.Logf("the enable took %v with a stuck reader", took)
}

// TestHandOverHostileControl: a reader that writes anything into the
// control memfd — a state no one writes, a tail that is no position of
// the ring — costs the daemon one bounded wait, and the drainers go on
// from where they gave the ring: every record reaches the session.
func TestHandOverHostileControl(t *testing.T) {
	s, hr, h := handedRaw(t, "ho_hostile")
	mem, err := unix.Mmap(h.ControlFd, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	hr.publish(10)
	// Ring 0: a state no one writes; ring 1: Owned at a tail far away.
	binary.NativeEndian.PutUint64(mem[0:], 0xdead_beef_0000_0005)
	binary.NativeEndian.PutUint64(mem[128:], 1<<40|1)
	tracer, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tracer.Close()
	if err := writeFile(tracer, "events/user_events/ho_hostile/enable", "1"); err != nil {
		t.Fatal(err)
	}
	hr.settle()
	var seqs []uint32
	for _, b := range hr.got {
		seqs = append(seqs, sampleSeqs(t, b)...)
	}
	if len(seqs) != 10 {
		t.Errorf("the session has %d of the 10 records: %v", len(seqs), seqs)
	}
	healthy(t, s)
}

// handedRaw is a producer of event name (u32 n) with a ring set, and a
// reader that took its set but has not mapped it: the test plays the
// reader with the hand-over's descriptors, closed at its end.
func handedRaw(t *testing.T, name string) (*testServer, *handReader, *client.HandOver) {
	t.Helper()
	s := serve(t, Config{Rings: 2})
	_, idx, ring := handProducer(t, s, name+" u32 n")
	hr := newHandReader(t, s, "user_events:"+name, false)
	hr.ring, hr.idx = ring, idx[0]
	h, err := hr.ss.HandOver()
	if err != nil || h == nil {
		t.Fatalf("no hand-over: %v", err)
	}
	t.Cleanup(h.Close)
	return s, hr, h
}

// publish writes n records into the producer's ring set (handedRaw),
// their n the sequence 0 to n-1, on CPUs 0 and 1 in turn.
func (hr *handReader) publish(n int) {
	var p [4]byte
	for i := range n {
		binary.NativeEndian.PutUint32(p[:], uint32(i))
		if !hr.ring.Write(shmring.Meta{Time: stamp.Now(), TID: uint32(unix.Getpid()), CPU: uint32(i % 2), WriteIndex: hr.idx}, p[:]) {
			hr.t.Fatal("ring full")
		}
	}
}

// TestHandOverTakenBackWhileGiven: a set taken back while its drainers
// are still giving its rings — a tracer's write, whose sync hook takes
// every hand-over back, racing with the reader's ask. The drainers then
// resume rings the take-back has not reached yet, and the control they
// share must stay mapped until the take-back is done with it: unmapped
// early, the daemon faulted (the soak's daemon died so, its producers'
// connections broken all at once).
func TestHandOverTakenBackWhileGiven(t *testing.T) {
	old := handAgain
	handAgain = 0
	// Long enough between rings that the drainers give and resume
	// meanwhile.
	betweenTakeBacks = func() { time.Sleep(200 * time.Microsecond) }
	t.Cleanup(func() { handAgain, betweenTakeBacks = old, nil })
	s := serve(t, Config{Rings: 4})
	_, _, _ = handProducer(t, s, "ho_race u32 n")
	hr := newHandReader(t, s, "user_events:ho_race", false)
	tracer, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tracer.Close() })

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if err := writeFile(tracer, "events/user_events/ho_race/enable", "0"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	asks := 0
	for ; time.Now().Before(deadline) || asks < 2000; asks++ {
		hr.take()
		hr.pass()
	}
	stop.Store(true)
	wg.Wait()
	testutil.Wait(t, "every hand-over ended", func() bool {
		hr.pass()
		s.beforeChange(subsys.AnyEvent)
		s.handOvers.mu.Lock()
		defer s.handOvers.mu.Unlock()
		return len(s.handOvers.live) == 0
	})
	t.Logf("%d asks, %d hand-overs", asks, hr.handed)
}

// TestHandOverRefusedWhileClosing: a producer that goes while a reader's
// ask for its set is being refused — the set claimed, then refused by the
// subsystem, since nobody consumes its events — goes as every producer
// does: its close takes the set back and waits for the hand-over's end,
// which the refusal brings. Before, the refusal unmapped the control under
// that take-back, or left it waiting for ever (the soak's daemon, CI at
// a150a2c: writers killed mid-write, whose events nobody records, while
// the recording asks for hand-overs).
func TestHandOverRefusedWhileClosing(t *testing.T) {
	// The hook is set before the daemon runs, and cleared after it ends.
	var victim atomic.Pointer[client.Conn]
	var once sync.Once
	handing = func(hs *handedSet, claimed bool) {
		c := victim.Load()
		if c == nil || !claimed {
			return
		}
		once.Do(func() {
			go c.Close()
			// The producer's teardown found the set handed and took it
			// back: done with the control, it waits for the end.
			if !testutil.Eventually(func() bool { return hs.back.Load() && hs.left.Load() <= int32(len(hs.set.srcs)) }) {
				t.Error("the producer's close did not take the set back")
			}
		})
	}
	t.Cleanup(func() { handing = nil })
	s := serve(t, Config{Rings: 2})
	// The reader's event, registered by a producer without rings (no
	// set to hand).
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	plain := a.dial(t, s.sock)
	if _, _, err := plain.Register(reg(a.addr(0), 0), "ho_mine u32 n", false); err != nil {
		t.Fatal(err)
	}
	hr := newHandReader(t, s, "user_events:ho_mine", false)
	c, _, _ := handProducer(t, s, "ho_nobody u32 n")
	victim.Store(c)
	if hr.take() {
		t.Fatal("handed a set whose events the session does not consume")
	}
	testutil.Wait(t, "the producer's set released", func() bool {
		s.drainers.mu.Lock()
		defer s.drainers.mu.Unlock()
		return len(s.drainers.sets) == 0
	})
	healthy(t, s)
}

// TestHandOverClosingSet: a set whose producer is going is not handed,
// even when the producer's close looked for a hand-over to take back just
// before the reader's ask claimed the set. Handed, its drainers gave rings
// they had released, and resumed them once they were unmapped (the soak's
// daemon died so, in resumeRing).
func TestHandOverClosingSet(t *testing.T) {
	var srv atomic.Pointer[testServer]
	handing = func(hs *handedSet, claimed bool) {
		if s := srv.Load(); s != nil && !claimed {
			// The first steps of the producer's close (drainers.close),
			// between the reader's choice of the set and its claim.
			hs.set.closing.Store(true)
			s.takeBackSet(hs.set)
		}
	}
	t.Cleanup(func() { handing = nil })
	s := serve(t, Config{Rings: 2})
	c, _, _ := handProducer(t, s, "ho_closing u32 n")
	hr := newHandReader(t, s, "user_events:ho_closing", false)
	srv.Store(s)
	if hr.take() {
		t.Fatal("handed a set whose producer is going")
	}
	srv.Store(nil)
	c.Close()
	testutil.Wait(t, "the producer's set released", func() bool {
		s.drainers.mu.Lock()
		defer s.drainers.mu.Unlock()
		return len(s.drainers.sets) == 0
	})
	healthy(t, s)
}

// TestHandOverBeforeAdopted: a set handed over before its drainers took
// its rings in — the rings' adds and the hand-over's gives served in the
// same turn — is read by the reader alone. Given first and adopted after,
// each ring stayed in its drainer's merge while the reader had it: both
// delivered the same records (the soak: recorded + lost over written, and
// the daemon's warning that the reader's tail was before the drainer's).
func TestHandOverBeforeAdopted(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	// The hook is set before the daemon runs, and cleared after it ends.
	var held atomic.Bool
	drainerTurn = func(*drainer) {
		if held.Load() {
			<-release
		}
	}
	t.Cleanup(func() { drainerTurn = nil })
	s := serve(t, Config{Rings: 2})
	t.Cleanup(open)
	// The producer's event attached first (the attach's flush waits for
	// the drainers), then its rings shared: the drainers, held before
	// their first turn, have the rings' adds, and turn once each has the
	// hand-over's give too.
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	idx, _, err := c.Register(reg(a.addr(0), 0), "ho_early u32 n", false)
	if err != nil {
		t.Fatal(err)
	}
	hr := newHandReader(t, s, "user_events:ho_early", false)
	held.Store(true)
	ring := shareTestRing(t, c, 1<<16)
	go func() {
		defer open()
		testutil.Eventually(func() bool {
			for _, d := range s.drainers.d {
				d.mu.Lock()
				n := len(d.hands)
				d.mu.Unlock()
				if n == 0 {
					return false
				}
			}
			return true
		})
	}()
	if !hr.take() {
		t.Fatal("no hand-over")
	}
	const n = 2000
	var p [4]byte
	for i := uint32(0); i < n; i++ {
		binary.NativeEndian.PutUint32(p[:], i)
		if !ring.Write(shmring.Meta{Time: stamp.Now(), TID: uint32(unix.Getpid()), CPU: i % 2, WriteIndex: idx}, p[:]) {
			t.Fatalf("record %d: the ring is full", i)
		}
	}
	// What the drainers would deliver of the rings, they have delivered
	// once the rings are flushed; the reader then reads what is left.
	s.Flush()
	hr.settle()
	seen := make([]int, n)
	for _, b := range hr.got {
		for _, v := range sampleSeqs(t, b) {
			if v >= n {
				t.Fatalf("record %d: never written", v)
			}
			seen[v]++
		}
	}
	for v, c := range seen {
		if c != 1 {
			t.Fatalf("record %d reached the session %d times", v, c)
		}
	}
	if st := s.RingStats(); st.Delivered != n {
		t.Errorf("RingStats.Delivered %d, want %d", st.Delivered, n)
	}
}

// TestHandOverScope: a change that does not concern a handed set's events
// — another session attached to another producer's event and closed, that
// event's enable written — leaves the set with its reader; one that does
// takes it back.
func TestHandOverScope(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	handProducer(t, s, "ho_kept u32 n")
	handProducer(t, s, "ho_stranger u32 n")
	hr := newHandReader(t, s, "user_events:ho_kept", false)
	if !hr.take() {
		t.Fatal("no hand-over")
	}
	tracer, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tracer.Close() })
	// Handed, and no take-back begun (its end, the drainers' resumes,
	// comes after the write returns).
	handed := func() bool {
		hss := s.handOvers.snapshot()
		return len(hss) == 1 && !hss[0].back.Load()
	}
	ss, err := tracer.NewSession(client.SessionOptions{BufferBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Attach("user_events:ho_stranger", false); err != nil {
		t.Fatal(err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "0"} {
		if err := writeFile(tracer, "events/user_events/ho_stranger/enable", v); err != nil {
			t.Fatal(err)
		}
	}
	if !handed() {
		t.Fatal("the set was taken back by changes to another producer's event")
	}
	if err := writeFile(tracer, "events/user_events/ho_kept/enable", "0"); err != nil {
		t.Fatal(err)
	}
	if handed() {
		t.Fatal("the set is still handed after a write to its event's enable")
	}
}
