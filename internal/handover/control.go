package handover

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
)

// The control memfd: one slot of slotSize bytes per ring of the set, at
// k·slotSize, the memfd a whole number of pages (the rest zero):
//
//	word 0   own         tail | state: the ring's consumer position (a
//	                     multiple of 8) and who reads it, in the low 3 bits
//	word 1   countsTail  the tail the counts are as of; tail|1 while the
//	                     reader stores them
//	words 2… counts      the reader's counts (Counts, in its order)
//
// A slot is a cache line pair of its own: the reader of ring k stores its
// words once per pass, and no other ring's reader or the daemon's taking
// back of another ring touches its lines.
//
// After the slots, from the next page: ring k's event counts, at
// k·eventsStride, one EventCounts (written, dropped) per write index of
// the set, up to MaxCountedEvents — what the daemon adds to the events'
// counts (subsys's uetrace_event_counts), stored with the ring's Counts,
// between the same marks. The memfd's pages are its own until touched:
// the events a set has, on the rings its producer writes.
const (
	slotSize   = 128
	offOwn     = 0
	offCounted = 8
	offCounts  = 16

	eventsStride = MaxCountedEvents * 16
)

// MaxCountedEvents is the most write indices a handed set may have: their
// counts fill a ring's events area. The daemon hands no set with more
// (its drainers keep it), as none whose events do not fit a message.
const MaxCountedEvents = 256

// EventCounts are the reader's counts of one write index of a ring: the
// records written to its event (delivered, or dropped for their size, or
// claimed lost by the producer's loss records) and, of them, those
// dropped — subsys's per-event counts, as File.write and File.WriteLost
// count them. Like Counts, cumulative claims the daemon only adds.
type EventCounts struct {
	Written, Dropped uint64
}

// The states of a ring, in own's low bits.
const (
	// Daemon: the daemon's drainer reads the ring (a new slot is zero:
	// the daemon's at tail 0).
	Daemon = 0
	// Owned: the reader may read it from the tail; it does not now.
	Owned = 1
	// Reading: the reader is in a pass from the tail, its output not yet
	// committed.
	Reading = 2

	stateMask = 7
)

// Counts are the reader's counts for one ring: the daemon's RingStats of
// the same names. The slot holds them cumulative, over every pass any
// reader committed on the ring; the daemon takes what they grew by since
// it last looked (TakeCounts) when it takes the ring back, and while the
// ring is handed for its RingStats (lagging, as a live ring's do). They
// are claims of a process the daemon does not trust, which it only adds,
// saturating (Add).
type Counts struct {
	Delivered, Rejected, Disabled, Voided uint64
	Lost, LostRecords, LostCapped         uint64
	ForgedTID, UncheckedTID, Future       uint64
	Torn, TooLong, Discarded, BadHead     uint64
}

// nCounts is the words of Counts; they fill a slot after own and
// countsTail.
const nCounts = 14

// The slot holds own, countsTail and Counts exactly; Counts is nCounts
// words in its fields' order (words).
var (
	_ [slotSize - offCounts - nCounts*8]struct{}
	_ [nCounts*8 - unsafe.Sizeof(Counts{})]struct{}
	_ [unsafe.Sizeof(Counts{}) - nCounts*8]struct{}
)

func (c *Counts) words() *[nCounts]uint64 { return (*[nCounts]uint64)(unsafe.Pointer(c)) }

// Add adds o to c, each count saturating at the largest uint64 rather than
// wrapping: o may be a reader's claim, and no claim can lower what others
// added.
func (c *Counts) Add(o *Counts) {
	a, b := c.words(), o.words()
	for i := range a {
		a[i] = satAdd(a[i], b[i])
	}
}

// A Control is the control memfd of a handed set, mapped: the daemon's
// (CreateControl) or the reader's (AttachControl). Each side's methods
// are for its own goroutines: the daemon's Give, TakeBack and TakeCounts
// of ring k from the goroutine that hands ring k over (any number of rings
// at once), the reader's Begin and Commit of ring k from the goroutine
// that reads it.
type Control struct {
	fd    int
	ownFd bool
	mem   unsafe.Pointer
	size  uintptr
	rings int

	// The reader's own, per ring: the tail its Begin found, the counts
	// the slot held then, which the pass's add to, and the pass's event
	// counts (Tally).
	began  []uint64
	kept   []Counts
	passEv []*eventTally
	// The daemon's own, per ring, under dmu (TakeCounts and
	// TakeEventCounts may run on different goroutines): the counts it
	// took last, and the event counts.
	dmu     sync.Mutex
	taken   []Counts
	events  int             // the write indices whose counts it takes (SetEvents)
	takenEv [][]EventCounts // by ring, then write index
	readEv  []EventCounts   // a read's, by write index
	// backEv are TakeCounts' reads, by ring: ring k's is only ever
	// taken back by the daemon's drainer k, which reads it outside dmu.
	backEv [][]EventCounts
}

// An eventTally is a pass's event counts of one ring: by write index, and
// the indices it counted, in the order it first did.
type eventTally struct {
	by   [MaxCountedEvents]EventCounts
	used []uint16
}

// controlSize is the memfd's size for n rings: their slots, then their
// events areas, each in whole pages.
func controlSize(n int) uintptr {
	return eventsOffset(n) + roundPage(uintptr(n)*eventsStride)
}

// eventsOffset is where the events areas of a control of n rings begin.
func eventsOffset(n int) uintptr { return roundPage(uintptr(n) * slotSize) }

func roundPage(n uintptr) uintptr {
	page := uintptr(unix.Getpagesize())
	return (n + page - 1) &^ (page - 1)
}

// CreateControl makes the control memfd of a set of rings rings, every
// ring the daemon's at tail 0, sealed against shrinking and growing (the
// reader maps it too: nothing it does can make the daemon's accesses
// fault), and maps it. The daemon sends Fd to the reader.
func CreateControl(rings int) (*Control, error) {
	if err := checkRings(rings); err != nil {
		return nil, err
	}
	fd, err := shmring.SealedMemfd("uetrace-handover", uint64(controlSize(rings)))
	if err != nil {
		return nil, err
	}
	c, err := mapControl(fd, rings)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	c.ownFd = true
	return c, nil
}

// AttachControl maps the control memfd fd of a set of rings rings, for
// the reader. It checks that the memfd is sealed against shrinking and
// growing and has the size of rings slots, so that no access to the
// mapping can fault. The mapping does not keep fd, which the caller may
// close.
func AttachControl(fd, rings int) (*Control, error) {
	if err := checkRings(rings); err != nil {
		return nil, err
	}
	size, err := shmring.SealedSize(fd, "hand-over control")
	if err != nil {
		return nil, err
	}
	if want := controlSize(rings); size != int64(want) {
		return nil, fmt.Errorf("hand-over control: the memfd has %d bytes; %d rings take %d: %w", size, rings, want, unix.EINVAL)
	}
	return mapControl(fd, rings)
}

func checkRings(n int) error {
	if n < 1 || n > shmring.MaxSetRings {
		return fmt.Errorf("hand-over control: %d rings: want 1 to %d: %w", n, shmring.MaxSetRings, unix.EINVAL)
	}
	return nil
}

func mapControl(fd, rings int) (*Control, error) {
	size := controlSize(rings)
	mem, err := unix.MmapPtr(fd, 0, nil, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("hand-over control: mmap: %w", err)
	}
	return &Control{fd: fd, mem: mem, size: size, rings: rings, began: make([]uint64, rings), kept: make([]Counts, rings), passEv: make([]*eventTally, rings), taken: make([]Counts, rings)}, nil
}

// eventWord is word w (0 written, 1 dropped) of write index i of ring k's
// events area.
func (c *Control) eventWord(k, i, w int) *uint64 {
	off := eventsOffset(c.rings) + uintptr(k)*eventsStride + uintptr(i)*16 + uintptr(w)*8
	return (*uint64)(unsafe.Add(c.mem, off))
}

// Fd is the control memfd: the daemon sends it to the reader.
func (c *Control) Fd() int { return c.fd }

// Read is how far the reader of ring k has committed its passes, and
// whether it has the ring (Owned or Reading): the daemon's view of a
// handed ring's progress. The word is the reader's: a position to compare,
// never one to read records at.
func (c *Control) Read(k int) (tail uint64, reader bool) {
	w := atomic.LoadUint64(c.word(k, offOwn))
	return w &^ stateMask, w&stateMask != Daemon
}

// TakeFd hands the memfd CreateControl made to the caller, who sends and
// closes it: Close then only unmaps.
func (c *Control) TakeFd() int {
	fd := c.fd
	c.fd, c.ownFd = -1, false
	return fd
}

// Rings is the number of rings the control has a slot for.
func (c *Control) Rings() int { return c.rings }

// Close unmaps the control and, if CreateControl made it, closes its
// memfd. No method may be running or be called after.
func (c *Control) Close() error {
	var err error
	if c.mem != nil {
		if e := unix.MunmapPtr(c.mem, c.size); e != nil {
			err = fmt.Errorf("hand-over control: munmap: %w", e)
		}
		c.mem = nil
	}
	if c.ownFd && c.fd >= 0 {
		if e := unix.Close(c.fd); e != nil && err == nil {
			err = e
		}
	}
	c.fd = -1
	return err
}

// word is word off of slot k.
func (c *Control) word(k int, off uintptr) *uint64 {
	return (*uint64)(unsafe.Add(c.mem, uintptr(k)*slotSize+off))
}

// Give hands ring k to the reader from tail (the drainer dropped the ring
// at a pass boundary first): the counts are said to be as of tail (they
// are: the reader has passed nowhere since), then own says Owned — the
// store the reader's Begin loads. The counts themselves go on: the daemon
// took what it had of them, and takes what they grow by (TakeCounts).
func (c *Control) Give(k int, tail uint64) {
	tail &^= stateMask
	atomic.StoreUint64(c.word(k, offCounted), tail)
	atomic.StoreUint64(c.word(k, offOwn), tail|Owned)
}

// Spinning, then yielding, then napping: how the daemon waits for a
// reader's pass to end (TakeBack). A pass is a few microseconds: most
// take-backs that find one end within the spins and yields; the naps,
// from napMin doubling to napMax, cost the waiting goroutine little more
// until the bound.
const (
	spins  = 64
	yields = 16
	napMin = 10 * time.Microsecond
	napMax = 500 * time.Microsecond
	// forceTries bounds the compare-and-swaps of a forced take-back: an
	// honest reader changes own at most once more once the bound has
	// passed (its commit), so more failures are a reader playing with the
	// word, which then gets the word stored over it.
	forceTries = 8
)

// TakeBack takes ring k back for the daemon and returns the tail its
// drainer goes on from. If the reader is not in a pass (Owned), it is
// one compare-and-swap; if it is (Reading), the daemon waits for the pass
// to end, at most bound (spinning, yielding, then short naps), then
// forces the ring back (forced): the reader's commit then fails and it
// discards its pass, so that no record is in its output and in the
// drainer's — even if the reader is stopped, or dead. A state the daemon
// never writes (3 to 7: a hostile reader's) is taken as Reading: the
// bound, then forced. A ring the daemon has already is returned as it is.
//
// The tail is the reader's word, as hostile as the rest of the slot: the
// drainer's consumer validates every position (shmring.Consumer.Resume),
// so a tail that is not where records are delivers nothing that is not a
// record of the producer's.
func (c *Control) TakeBack(k int, bound time.Duration) (tail uint64, forced bool) {
	own := c.word(k, offOwn)
	deadline := time.Now().Add(bound)
	nap := napMin
	waits, tries := 0, 0
	for {
		w := atomic.LoadUint64(own)
		st := w & stateMask
		if st == Daemon {
			return w &^ stateMask, false
		}
		late := !time.Now().Before(deadline)
		if st == Owned || late {
			if atomic.CompareAndSwapUint64(own, w, w&^stateMask|Daemon) {
				return w &^ stateMask, st != Owned
			}
			// The reader moved: it began a pass, or ended one. Past
			// the bound, one that keeps moving it gets the word stored
			// over.
			if late {
				if tries++; tries >= forceTries {
					atomic.StoreUint64(own, w&^stateMask|Daemon)
					return w &^ stateMask, true
				}
			}
			continue
		}
		// Reading, or a state no one should have written: wait.
		switch waits++; {
		case waits < spins:
		case waits < spins+yields:
			runtime.Gosched()
		default:
			time.Sleep(max(min(nap, time.Until(deadline)), 0))
			nap = min(2*nap, napMax)
		}
	}
}

// Counts are the reader's counts for ring k as the slot has them now,
// cumulative. They are read between the reader's marks (countsTail even
// and unchanged across the read), a bounded number of times; a reader
// that keeps storing gets what was read last.
func (c *Control) Counts(k int) Counts {
	cs, _, _ := c.readCounts(k, nil)
	return cs
}

// SetEvents says how many write indices the daemon takes event counts of
// (TakeCounts, TakeEventCounts): the handed set's, at most
// MaxCountedEvents. The daemon calls it before it gives a ring.
func (c *Control) SetEvents(n int) {
	n = min(max(n, 0), MaxCountedEvents)
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.events = n
	c.takenEv = make([][]EventCounts, c.rings)
	for k := range c.takenEv {
		c.takenEv[k] = make([]EventCounts, n)
	}
	c.readEv = make([]EventCounts, n)
	c.backEv = make([][]EventCounts, c.rings)
	for k := range c.backEv {
		c.backEv[k] = make([]EventCounts, n)
	}
}

// countReads bounds Counts' attempts at a read between the reader's
// marks.
const countReads = 16

// readCounts reads ring k's counts — and, into ev, its event counts —
// and the tail they are as of, and whether the read was whole (the reader
// was not storing them).
func (c *Control) readCounts(k int, ev []EventCounts) (cs Counts, at uint64, whole bool) {
	ct := c.word(k, offCounted)
	w := cs.words()
	for range countReads {
		at = atomic.LoadUint64(ct)
		for i := range w {
			w[i] = atomic.LoadUint64(c.word(k, offCounts+uintptr(i)*8))
		}
		if at != 0 {
			// (A ring no pass committed on has no event counts: its
			// page is not read, which would make the memfd's.)
			for i := range ev {
				ev[i] = EventCounts{atomic.LoadUint64(c.eventWord(k, i, 0)), atomic.LoadUint64(c.eventWord(k, i, 1))}
			}
		} else {
			clear(ev)
		}
		if at&stateMask == 0 && atomic.LoadUint64(ct) == at {
			return cs, at, true
		}
		runtime.Gosched()
	}
	return cs, at &^ stateMask, false
}

// TakeCounts returns what ring k's counts grew by since the daemon last
// took them — each count on its own; one that went down (a reader that
// lies) adds nothing, and is taken from its new value on. With bound > 0,
// for a ring taken back at tail, it first waits, at most bound, for the
// counts to be as of tail: the reader stores a pass's counts just after
// the commit that moved the ring there (Commit). ok is false if they are
// not yet — the reader stopped (or died) between its commit and its
// store, or it lies; what they grew by so far is returned all the same,
// and a store that lands later is taken by a later call (the daemon's
// drainer calls again, with bound 0, until they are or a second has
// passed): nothing is counted twice, or lost but the last pass of a
// reader that died, or stopped that long.
//
// The event counts (of the write indices SetEvents said) are taken with
// them, in the same read: each write index's growth is passed to each
// (if not nil), the indices that did not grow skipped. Ring k's counts
// are taken by one goroutine at a time (the daemon's drainer k).
func (c *Control) TakeCounts(k int, tail uint64, bound time.Duration, each func(i int, grown EventCounts)) (grown Counts, ok bool) {
	// The wait for the reader's store is not under dmu: the count hook
	// (TakeEventCounts) must not wait behind a take-back's bound.
	var ev []EventCounts
	c.dmu.Lock()
	if c.backEv != nil {
		ev = c.backEv[k]
	}
	c.dmu.Unlock()
	cs, ok := c.countsAt(k, tail&^stateMask, bound, ev)
	c.dmu.Lock()
	defer c.dmu.Unlock()
	now, was, g := cs.words(), c.taken[k].words(), grown.words()
	for i := range now {
		if now[i] > was[i] {
			g[i] = now[i] - was[i]
		}
	}
	c.taken[k] = cs
	c.takeEvents(k, ev, each)
	return grown, ok
}

// TakeEventCounts passes to each what ring k's event counts grew by since
// the daemon last took them, as TakeCounts does, while the reader may be
// reading: the counts as of the reader's last stored pass. It reports
// false, taking nothing, if the reader was storing them on each of a
// bounded number of reads: the next take has them.
func (c *Control) TakeEventCounts(k int, each func(i int, grown EventCounts)) bool {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	if c.events == 0 {
		return true
	}
	if _, _, whole := c.readCounts(k, c.readEv); !whole {
		return false
	}
	c.takeEvents(k, c.readEv, each)
	return true
}

// takeEvents passes the growth of read, ring k's event counts as just
// read, over those taken before to each, and takes them. c.dmu is held.
func (c *Control) takeEvents(k int, read []EventCounts, each func(i int, grown EventCounts)) {
	if c.events == 0 {
		return
	}
	was := c.takenEv[k]
	for i, now := range read {
		var g EventCounts
		if now.Written > was[i].Written {
			g.Written = now.Written - was[i].Written
		}
		if now.Dropped > was[i].Dropped {
			g.Dropped = now.Dropped - was[i].Dropped
		}
		was[i] = now
		if g != (EventCounts{}) && each != nil {
			each(i, g)
		}
	}
}

// countsAt reads ring k's counts (and event counts, into ev), waiting for
// them to be as of tail for at most bound (none: at once).
func (c *Control) countsAt(k int, tail uint64, bound time.Duration, ev []EventCounts) (Counts, bool) {
	var deadline time.Time
	nap := napMin
	for i := 0; ; i++ {
		cs, at, whole := c.readCounts(k, ev)
		if whole && at == tail {
			return cs, true
		}
		if i == 0 {
			deadline = time.Now().Add(bound)
		}
		if !time.Now().Before(deadline) {
			return cs, false
		}
		time.Sleep(max(min(nap, time.Until(deadline)), 0))
		nap = min(2*nap, napMax)
	}
}

// Begin starts the reader's pass on ring k: Owned becomes Reading, and
// the pass reads from the tail returned. It reports false if the daemon
// has the ring (it took it back: the reader drops it). The counts the
// pass adds to are those the slot holds now, whichever reader stored
// them.
func (c *Control) Begin(k int) (tail uint64, ok bool) {
	own := c.word(k, offOwn)
	w := atomic.LoadUint64(own)
	if w&stateMask != Owned || !atomic.CompareAndSwapUint64(own, w, w&^stateMask|Reading) {
		return 0, false
	}
	c.began[k] = w &^ stateMask
	kw := c.kept[k].words()
	for i := range kw {
		kw[i] = atomic.LoadUint64(c.word(k, offCounts+uintptr(i)*8))
	}
	if c.passEv[k] == nil {
		c.passEv[k] = new(eventTally)
	}
	c.passEv[k].reset()
	return c.began[k], true
}

// Tally counts, in the reader's pass on ring k, written records of write
// index i, dropped of them: stored with the pass's counts when it
// commits, forgotten if it does not. An index past MaxCountedEvents is
// not counted (no set handed has one).
func (c *Control) Tally(k, i int, written, dropped uint64) {
	if uint(i) >= MaxCountedEvents {
		return
	}
	t := c.passEv[k]
	e := &t.by[i]
	if *e == (EventCounts{}) {
		t.used = append(t.used, uint16(i))
	}
	e.Written = satAdd(e.Written, written)
	e.Dropped = satAdd(e.Dropped, dropped)
}

// reset forgets the tally's counts.
func (t *eventTally) reset() {
	for _, i := range t.used {
		t.by[i] = EventCounts{}
	}
	t.used = t.used[:0]
}

// Commit ends the reader's pass on ring k at tail, adding the pass's
// counts cs to the ring's: Reading at the pass's start becomes Owned at
// tail, then the counts are stored as of tail. It reports false if the
// daemon forced the ring back during the pass: the pass's output is not
// the reader's (the drainer delivers those records from the pass's
// start), its counts are not stored, and the reader drops the ring.
//
// The counts are stored after the commit, not before: stored before, a
// pass whose commit fails would leave its counts in the slot, to be put
// back. A take-back right after a commit finds the counts as of the tail
// before it, and reads them again until they are as of its tail
// (TakeCounts); a store that lands after the daemon gave the ring again
// only adds what that pass counted, since the counts are cumulative.
func (c *Control) Commit(k int, tail uint64, cs *Counts) bool {
	began := c.began[k]
	tail &^= stateMask
	if !atomic.CompareAndSwapUint64(c.word(k, offOwn), began|Reading, tail|Owned) {
		return false
	}
	if committed != nil {
		committed(k)
	}
	total := c.kept[k]
	total.Add(cs)
	c.storeCounts(k, began, tail, &total, c.passEv[k])
	c.passEv[k].reset()
	return true
}

// committed, when set (by tests), runs between a commit and the store of
// its counts: where a reader preempted there is when the daemon takes its
// ring back.
var committed func(k int)

// storeCounts stores cs as ring k's counts as of tail, and adds the
// pass's event counts ev to the area's, between the marks the daemon reads
// by: countsTail odd (from began, the tail they were as of) while the
// words change, tail after. Only the write indices the pass counted are
// touched: one or two, for most passes.
func (c *Control) storeCounts(k int, began, tail uint64, cs *Counts, ev *eventTally) {
	ct := c.word(k, offCounted)
	atomic.StoreUint64(ct, began|1)
	for i, v := range cs.words() {
		atomic.StoreUint64(c.word(k, offCounts+uintptr(i)*8), v)
	}
	for _, i := range ev.used {
		e := ev.by[i]
		for w, v := range [2]uint64{e.Written, e.Dropped} {
			if v != 0 {
				p := c.eventWord(k, int(i), w)
				atomic.StoreUint64(p, satAdd(atomic.LoadUint64(p), v))
			}
		}
	}
	atomic.StoreUint64(ct, tail)
}

// satAdd is a+b, saturating at the largest uint64: the counts sum a
// reader's and producers' claims.
func satAdd(a, b uint64) uint64 { return min(a, math.MaxUint64-b) + b }
