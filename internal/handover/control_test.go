package handover

import (
	"errors"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair is a control as the daemon makes it and as the reader maps it from
// the descriptor it received.
func pair(t testing.TB, rings int) (daemon, reader *Control) {
	t.Helper()
	d, err := CreateControl(rings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	fd, err := unix.FcntlInt(uintptr(d.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := AttachControl(fd, rings)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return d, r
}

// own is ring k's ownership word.
func own(c *Control, k int) uint64 { return atomic.LoadUint64(c.word(k, offOwn)) }

// TestControlProtocol: a new slot is the daemon's; Give makes it the
// reader's from a tail; a pass begins (Reading) and commits at a new tail
// with its counts; the daemon takes an idle ring back with the committed
// tail, at once, and takes the counts they grew by; a ring the daemon has
// gives no pass; and a ring given again goes on counting, the daemon
// taking only what is new.
func TestControlProtocol(t *testing.T) {
	d, r := pair(t, 3)
	if _, ok := r.Begin(1); ok {
		t.Fatal("a pass began on a ring never given")
	}
	if tail, forced := d.TakeBack(1, time.Millisecond); tail != 0 || forced {
		t.Fatalf("taking back a ring never given: %d, forced %v", tail, forced)
	}
	d.Give(1, 4096+5) // a tail is a multiple of 8
	if got := own(d, 1); got != 4096|Owned {
		t.Fatalf("own after Give: %#x", got)
	}
	tail, ok := r.Begin(1)
	if !ok || tail != 4096 {
		t.Fatalf("Begin: %d, %v", tail, ok)
	}
	if got := own(d, 1); got != 4096|Reading {
		t.Fatalf("own during a pass: %#x", got)
	}
	if _, ok := r.Begin(1); ok {
		t.Fatal("a second pass began during one")
	}
	c := Counts{Delivered: 10, Lost: 3}
	if !r.Commit(1, 8192, &c) {
		t.Fatal("a commit failed with nothing taken back")
	}
	if got := own(d, 1); got != 8192|Owned {
		t.Fatalf("own after Commit: %#x", got)
	}
	// Another pass adds its counts.
	if _, ok := r.Begin(1); !ok {
		t.Fatal("the next pass did not begin")
	}
	c = Counts{Delivered: 5, BadHead: 1}
	if !r.Commit(1, 9000, &c) {
		t.Fatal("the second commit failed")
	}
	if got, want := d.Counts(1), (Counts{Delivered: 15, Lost: 3, BadHead: 1}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	tail, forced := d.TakeBack(1, time.Hour)
	if tail != 9000 || forced {
		t.Fatalf("TakeBack of an idle ring: %d, forced %v", tail, forced)
	}
	if cs, ok := d.TakeCounts(1, tail, time.Millisecond, nil); !ok || cs.Delivered != 15 {
		t.Fatalf("counts at the tail taken back: %+v, %v", cs, ok)
	}
	if _, ok := r.Begin(1); ok {
		t.Fatal("a pass began on a ring taken back")
	}
	// Given again: nothing new until the reader commits, then only what
	// it added.
	d.Give(1, 9000)
	if cs, ok := d.TakeCounts(1, 9000, time.Millisecond, nil); !ok || cs != (Counts{}) {
		t.Fatalf("counts of a ring given again: %+v, %v", cs, ok)
	}
	r.Begin(1)
	r.Commit(1, 9600, &Counts{Delivered: 4})
	if tail, _ := d.TakeBack(1, time.Hour); tail != 9600 {
		t.Fatalf("taken back at %d", tail)
	}
	if cs, ok := d.TakeCounts(1, 9600, time.Millisecond, nil); !ok || cs != (Counts{Delivered: 4}) {
		t.Fatalf("counts of the second hand-over: %+v, %v", cs, ok)
	}
	// A reader that lowers a count adds nothing by it.
	r.storeCounts(1, 9600, 9600, &Counts{Delivered: 1, Voided: 2}, &eventTally{})
	if cs, _ := d.TakeCounts(1, 9600, 0, nil); cs != (Counts{Voided: 2}) {
		t.Fatalf("counts after a reader lowered one: %+v", cs)
	}
	// The other slots were never touched.
	for _, k := range []int{0, 2} {
		if own(d, k) != 0 || d.Counts(k) != (Counts{}) {
			t.Fatalf("slot %d: own %#x, counts %+v", k, own(d, k), d.Counts(k))
		}
	}
}

// TestTakeBackWaitsForPass: a take-back that finds the reader in a pass
// waits for its commit, and then has the committed tail, not forced.
func TestTakeBackWaitsForPass(t *testing.T) {
	d, r := pair(t, 1)
	d.Give(0, 64)
	if _, ok := r.Begin(0); !ok {
		t.Fatal("Begin")
	}
	type result struct {
		tail   uint64
		forced bool
	}
	done := make(chan result)
	go func() {
		tail, forced := d.TakeBack(0, time.Minute)
		done <- result{tail, forced}
	}()
	// The take-back spins while the pass lasts.
	select {
	case got := <-done:
		t.Fatalf("TakeBack returned during a pass: %+v", got)
	case <-time.After(time.Millisecond):
	}
	if !r.Commit(0, 128, &Counts{Delivered: 2}) {
		t.Fatal("the commit failed: the take-back did not wait")
	}
	if got := <-done; got.tail != 128 || got.forced {
		t.Fatalf("TakeBack after the commit: %+v, want tail 128, not forced", got)
	}
	if cs, ok := d.TakeCounts(0, 128, time.Millisecond, nil); !ok || cs.Delivered != 2 {
		t.Fatalf("counts: %+v, %v", cs, ok)
	}
}

// TestForcedTakeBack: a reader that stays in its pass past the bound has
// the ring forced back at the pass's start; its commit then fails, the
// slot's counts are those before the pass, and the ring is the daemon's.
func TestForcedTakeBack(t *testing.T) {
	d, r := pair(t, 2)
	d.Give(1, 800)
	r.Begin(1)
	r.Commit(1, 1600, &Counts{Delivered: 7})
	if _, ok := r.Begin(1); !ok {
		t.Fatal("Begin")
	}
	start := time.Now()
	tail, forced := d.TakeBack(1, 2*time.Millisecond)
	if took := time.Since(start); took < 2*time.Millisecond {
		t.Errorf("forced after %v, before the bound", took)
	}
	if tail != 1600 || !forced {
		t.Fatalf("TakeBack of a stalled pass: %d, forced %v; want 1600, forced", tail, forced)
	}
	if r.Commit(1, 2400, &Counts{Delivered: 5}) {
		t.Fatal("a commit after a forced take-back succeeded")
	}
	if got := own(d, 1); got != 1600|Daemon {
		t.Fatalf("own after the failed commit: %#x", got)
	}
	if cs, ok := d.TakeCounts(1, 1600, time.Millisecond, nil); !ok || cs.Delivered != 7 {
		t.Fatalf("counts after the failed commit: %+v, %v; want the 7 committed", cs, ok)
	}
	if _, ok := r.Begin(1); ok {
		t.Fatal("a pass began after a forced take-back")
	}
}

// TestTakeCountsWaitsForStore: a take-back right after a commit, before
// the reader stored the pass's counts, reads them again until they are
// as of its tail; one that gives up before takes what it found, and the
// rest next time — nothing twice.
func TestTakeCountsWaitsForStore(t *testing.T) {
	d, r := pair(t, 1)
	d.Give(0, 0)
	r.Begin(0)
	r.Commit(0, 256, &Counts{Delivered: 1})
	commitNoStore := func(from, to uint64) {
		t.Helper()
		r.Begin(0)
		if !atomic.CompareAndSwapUint64(r.word(0, offOwn), from|Reading, to|Owned) {
			t.Fatal("commit")
		}
	}
	// The reader's commit to 512, and the daemon's take-back, before its
	// store.
	commitNoStore(256, 512)
	tail, forced := d.TakeBack(0, time.Minute)
	if tail != 512 || forced {
		t.Fatalf("TakeBack: %d, forced %v", tail, forced)
	}
	done := make(chan Counts)
	go func() {
		cs, ok := d.TakeCounts(0, tail, time.Minute, nil)
		if !ok {
			t.Error("TakeCounts gave up before the reader stored its counts")
		}
		done <- cs
	}()
	r.storeCounts(0, 256, 512, &Counts{Delivered: 3}, &eventTally{})
	if cs := <-done; cs != (Counts{Delivered: 3}) {
		t.Fatalf("counts after the reader stored them: %+v", cs)
	}

	// Given again; a commit, a take-back that gives up before the store,
	// the ring given again, and the store landing late.
	d.Give(0, 512)
	commitNoStore(512, 1024)
	tail, _ = d.TakeBack(0, time.Minute)
	if cs, ok := d.TakeCounts(0, tail, time.Millisecond, nil); ok || cs != (Counts{}) {
		t.Fatalf("counts before the store: %+v, %v", cs, ok)
	}
	d.Give(0, tail)
	r.storeCounts(0, 512, 1024, &Counts{Delivered: 5}, &eventTally{})
	if cs, _ := d.TakeCounts(0, tail, 0, nil); cs != (Counts{Delivered: 2}) {
		t.Fatalf("the late store: %+v, want the 2 it added", cs)
	}
}

// TestHostileStateWord: a state the daemon never writes is taken as a
// pass — waited for, then forced back at the word's tail after the bound
// — and a word that a reader keeps changing is stored over once the bound
// has passed: TakeBack returns within about its bound, whatever the
// reader does.
func TestHostileStateWord(t *testing.T) {
	d, r := pair(t, 1)
	for st := uint64(3); st <= stateMask; st++ {
		atomic.StoreUint64(d.word(0, offOwn), 0x1000|st)
		tail, forced := d.TakeBack(0, 100*time.Microsecond)
		if tail != 0x1000 || !forced {
			t.Fatalf("state %d: TakeBack %#x, forced %v", st, tail, forced)
		}
		if own(d, 0) != 0x1000 {
			t.Fatalf("state %d: own %#x after TakeBack", st, own(d, 0))
		}
		if _, ok := r.Begin(0); ok {
			t.Fatalf("state %d: a pass began after the take-back", st)
		}
	}
	// A reader flipping its word as fast as it can.
	var stop atomic.Bool
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		w := r.word(0, offOwn)
		for i := uint64(0); !stop.Load(); i++ {
			atomic.StoreUint64(w, i<<3|(1+i%6))
		}
	}()
	bound := time.Millisecond
	start := time.Now()
	_, forced := d.TakeBack(0, bound)
	took := time.Since(start)
	stop.Store(true)
	<-flipped
	if took > bound+time.Second {
		t.Errorf("TakeBack against a flipping reader took %v, bound %v", took, bound)
	}
	t.Logf("against a flipping reader: %v (bound %v), forced %v", took, bound, forced)
}

// TestAttachControlChecks: the reader maps only a memfd sealed against
// shrinking and growing whose size is the rings' slots; a ring count out
// of range is EINVAL.
func TestAttachControlChecks(t *testing.T) {
	d, _ := pair(t, 4)
	if _, err := AttachControl(d.Fd(), 100); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachControl for 100 rings of a 4-ring control: %v", err)
	}
	for _, n := range []int{0, -1, 1 << 20} {
		if _, err := CreateControl(n); !errors.Is(err, unix.EINVAL) {
			t.Errorf("CreateControl(%d): %v", n, err)
		}
	}
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, int64(controlSize(4)))
	if _, err := AttachControl(fd, 4); !errors.Is(err, unix.EINVAL) {
		t.Errorf("AttachControl of an unsealed memfd: %v", err)
	}
	f, err := os.Open("/proc/self/fd/" + strconv.Itoa(d.Fd()))
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if c, err := AttachControl(int(f.Fd()), 4); !errors.Is(err, unix.EACCES) {
		if c != nil {
			c.Close()
		}
		t.Errorf("AttachControl of a read-only descriptor: %v", err)
	}
}

// TestCountsAddSaturates: a reader's claims add up without wrapping.
func TestCountsAddSaturates(t *testing.T) {
	a := Counts{Lost: math.MaxUint64 - 1, Delivered: 1}
	a.Add(&Counts{Lost: 5, Delivered: 2, BadHead: 3})
	if want := (Counts{Lost: math.MaxUint64, Delivered: 3, BadHead: 3}); a != want {
		t.Fatalf("%+v, want %+v", a, want)
	}
}

// TestControlEventCounts: a pass's event counts (Tally) are stored with
// its counts when it commits, and forgotten when it does not; the daemon
// takes what each write index's counts grew by, once, whether while the
// reader reads (TakeEventCounts) or at a take-back (TakeCounts); and a
// reader that writes its own numbers into the area can only add, to the
// write indices the daemon asked for.
func TestControlEventCounts(t *testing.T) {
	d, r := pair(t, 2)
	d.SetEvents(3)
	got := map[int]EventCounts{}
	take := func(i int, g EventCounts) {
		e := got[i]
		got[i] = EventCounts{e.Written + g.Written, e.Dropped + g.Dropped}
	}
	want := func(what string, w map[int]EventCounts) {
		t.Helper()
		if len(got) != len(w) {
			t.Errorf("%s: took %v, want %v", what, got, w)
		}
		for i, e := range w {
			if got[i] != e {
				t.Errorf("%s: took %v, want %v", what, got, w)
			}
		}
		clear(got)
	}

	d.Give(1, 0)
	if _, ok := r.Begin(1); !ok {
		t.Fatal("Begin failed")
	}
	r.Tally(1, 1, 5, 0)
	r.Tally(1, 2, 3, 3) // a loss record's
	r.Tally(1, 1, 1, 1) // a record too large
	r.Tally(1, MaxCountedEvents, 9, 9)
	if !r.Commit(1, 64, &Counts{Delivered: 7}) {
		t.Fatal("Commit failed")
	}
	if !d.TakeEventCounts(1, take) {
		t.Fatal("TakeEventCounts: not whole with no reader storing")
	}
	want("after a pass", map[int]EventCounts{1: {6, 1}, 2: {3, 3}})
	d.TakeEventCounts(1, take)
	want("taken again", nil)

	// A pass the daemon forces the ring back from counts nothing.
	if _, ok := r.Begin(1); !ok {
		t.Fatal("Begin failed")
	}
	r.Tally(1, 0, 100, 0)
	tail, forced := d.TakeBack(1, 0)
	if !forced || r.Commit(1, 128, &Counts{Delivered: 100}) {
		t.Fatal("the pass was not cut off")
	}
	d.TakeCounts(1, tail, time.Millisecond, take)
	want("after a pass cut off", nil)

	// Given again: the next pass counts only its own.
	d.Give(1, tail)
	if _, ok := r.Begin(1); !ok {
		t.Fatal("Begin failed")
	}
	r.Tally(1, 0, 2, 0)
	r.Commit(1, 96, &Counts{Delivered: 2})
	tail, _ = d.TakeBack(1, time.Millisecond)
	if _, ok := d.TakeCounts(1, tail, time.Millisecond, take); !ok {
		t.Fatal("TakeCounts: not as of the tail")
	}
	want("at the take-back", map[int]EventCounts{0: {2, 0}})

	// The reader's own numbers: lowered, nothing; raised, the rise from
	// the lowered value; beyond the events the daemon asked for, nothing.
	atomic.StoreUint64(r.eventWord(1, 1, 0), 1)
	d.TakeEventCounts(1, take)
	want("lowered", nil)
	atomic.StoreUint64(r.eventWord(1, 1, 0), 4)
	atomic.StoreUint64(r.eventWord(1, 3, 0), 1000)
	d.TakeEventCounts(1, take)
	want("raised", map[int]EventCounts{1: {3, 0}})
	// A ring no pass committed on has none to take.
	atomic.StoreUint64(r.eventWord(0, 0, 0), 1000)
	d.TakeEventCounts(0, take)
	want("a ring never committed", nil)
}
