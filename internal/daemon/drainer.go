package daemon

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Ring sets and their drainers. A client that shares a ring set (the Ring
// request, version 2: internal/shmring's sets) publishes each record into
// the ring of the CPU it runs on; drainer k takes ring k of every set,
// merges those rings by time (merge) — what one CPU's records are — and
// delivers each record
// where it lies (subsys.File.Deliver), straight into the consumers' buffers
// of that CPU. Nothing is shared between drainers on the way of a record:
// their own rings, their own CPUs' trace buffers and session streams,
// their own shards of the counts. The records of all CPUs meet only in the
// readers, which merge by time at read time, as ftrace's iterator and
// perf's ordered events do.
//
// The drainers are as many as the largest divisor of the trace buffer's
// CPU count that is at most maxDrainers (Config.Rings overrides it): so
// that the records of one trace buffer CPU, c mod NumCPU, all come from one
// ring index, c mod R, and reach it in one drainer's time order.
//
// # Sleeping
//
// A drainer that finds its rings empty (or held) says in each that it
// sleeps until the ring holds a watermark (shmring.Consumer.SleepAt) and
// waits on a channel. Each set wakes its consumer through one eventfd,
// which a single waker goroutine watches with epoll, edge-triggered and
// never read (a client that plays with it cannot make the waker block);
// when one fires, the waker pokes each drainer that sleeps and whose ring
// of that set a producer woke (its sleeping word cleared). What matters
// is how often a drainer wakes, not how: a Go goroutine's sleep and wake
// costs the daemon 20–40 µs of CPU, so a drainer that is busy — it
// delivered records lately — sleeps until a quarter of a ring is full, or
// busyWait, whichever comes first: one wake per 2 700 records of 96 bytes
// in a 1 MiB ring, and a record below the watermark is read within
// busyWait. An idle drainer — its last busy sleep found nothing — sleeps
// until the first record (watermark 1) for at most idleWait, so that a
// lone record is delivered at once and an idle daemon wakes rarely. While
// someone waits in a read of the trace (trace_pipe), every drainer that
// goes to sleep uses watermark 1 (one already asleep at a busy watermark
// keeps it, for at most busyWait: a read does not wake the drainers).
const (
	maxDrainers     = 64
	busyWait        = 10 * time.Millisecond
	drainerIdleWait = 200 * time.Millisecond
)

// drainers are the Server's drainers of ring sets and their waker.
type drainers struct {
	s *Server
	n int // R: how many; the Hello reply says it
	d []*drainer

	mu       sync.Mutex
	shutdown bool
	sets     map[*ringSet]struct{} // attached and not yet released
	totals   RingStats             // of the sets released
	// The waker: its epoll set, its own eventfd (kick), whether it runs,
	// and the sets to add to and remove from its set.
	epfd, kick int
	waking     bool
	byFd       map[int32]*ringSet // the waker's
	adding     []*ringSet
	removing   []*ringSet

	outOfOrder atomic.Uint64
	lowLatency atomic.Int32 // readers waiting in a trace read
	// sleeps, woken and timeouts count the drainers' sleeps, and those
	// ended by a producer's wake and by the timeout (RingStats).
	sleeps, woken, timeouts atomic.Uint64
}

// drainerCount is R for a trace buffer of ncpu CPUs (see drainers).
func drainerCount(ncpu int) int {
	for r := min(ncpu, maxDrainers); r > 1; r-- {
		if ncpu%r == 0 {
			return r
		}
	}
	return 1
}

func (g *drainers) init(s *Server, n int) {
	g.s, g.n = s, n
	g.sets = map[*ringSet]struct{}{}
	g.byFd = map[int32]*ringSet{}
	g.kick = -1
	for k := range n {
		d := &drainer{g: g, k: k, nudge: make(chan struct{}, 1)}
		d.merge.outOfOrder = &g.outOfOrder
		g.d = append(g.d, d)
	}
}

// ringSet is a connection's ring set: ring k is drained by drainer k, or
// read by the session's reader it is handed to (handover.go).
type ringSet struct {
	log    *slog.Logger
	srcs   []*ringSource
	efd    int   // the client's wake eventfd, our duplicate
	memfd  int   // the set's memfd, our duplicate, to hand it over; -1 if none
	shared int64 // the memfd's size, in the uid's Limits.SharedKBPerUID
	done   chan struct{}

	handed  atomic.Pointer[handedSet] // the hand-over it is in, or nil
	closing atomic.Bool               // its connection is going: never handed again
	back    atomic.Int64              // when it was last taken back (UnixNano)

	mu    sync.Mutex
	left  int       // rings not yet released
	stats RingStats // of the rings released
}

// attachSet checks and maps the ring set memfd and the wake eventfd a
// client shared and hands ring k to drainer k (drainers.attach). The
// descriptors stay the caller's.
func (c *conn) attachSet(memfd, efd int) error {
	set, err := c.s.drainers.attach(c.log, c.file, c.w, memfd, efd, func(n int64) error {
		if err := c.share("ring", n); err != nil {
			return c.overLimit(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.set = set
	return nil
}

// attach checks and maps a ring set — memfd, of the drainers' ring count,
// and its wake eventfd — whose records w writes into f (a connection's
// Ring request; a FUSE share, FUSEShare), and hands ring k to drainer k.
// Both descriptors are hostile input: the memfd must be ordinary shmem
// sealed against shrinking and growing (preload.SharedMemfd: no access of
// the daemon's can fault) of at most R rings of wire.MaxRing bytes;
// shmring.AttachSet takes the geometry from its size and the daemon's own
// ring count, and checks every header; the eventfd must be one. reserve
// counts the memfd's bytes in the producer's uid's limit, or refuses them;
// attach gives them back (reserve of the negative) if it fails, the
// caller once it releases the set. The descriptors stay the caller's.
func (g *drainers) attach(log *slog.Logger, f *subsys.File, w subsys.Writer, memfd, efd int, reserve func(int64) error) (*ringSet, error) {
	size, err := preload.SharedMemfd(memfd, "ring set")
	if err != nil {
		return nil, err
	}
	page := int64(unix.Getpagesize())
	if most := page + int64(g.n)*(page+wire.MaxRing); size > most {
		return nil, fmt.Errorf("ring set: the memfd has %d bytes; this daemon takes %d rings of at most %d bytes (%d bytes): %w", size, g.n, wire.MaxRing, most, unix.EINVAL)
	}
	wake, err := dupEventfd(efd, "ring set")
	if err != nil {
		return nil, err
	}
	// The whole memfd counts: the daemon maps it and keeps it alive until
	// the producer goes.
	if err := reserve(size); err != nil {
		unix.Close(wake)
		return nil, err
	}
	cons, err := shmring.AttachSet(memfd, g.n)
	if err != nil {
		unix.Close(wake)
		reserve(-size)
		return nil, err
	}
	// Kept to hand the set to a session's reader; without it (no
	// descriptor left) the set is only the drainers'.
	keep, err := unix.FcntlInt(uintptr(memfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		keep = -1
	}
	set := &ringSet{log: log, efd: wake, memfd: keep, shared: size, done: make(chan struct{}), left: len(cons)}
	for _, cn := range cons {
		r := newRingSource(log, f, w, cn)
		r.set = set
		set.srcs = append(set.srcs, r)
	}
	if err := g.add(set); err != nil {
		for _, cn := range cons {
			cn.Close()
		}
		if keep >= 0 {
			unix.Close(keep)
		}
		unix.Close(wake)
		reserve(-size)
		return nil, err
	}
	return set, nil
}

// dupEventfd checks that efd is an eventfd and returns our duplicate.
func dupEventfd(efd int, what string) (int, error) {
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(efd)); err != nil || link != "anon_inode:[eventfd]" {
		return -1, fmt.Errorf("%s: the second descriptor is %q, not an eventfd: %w", what, link, unix.EINVAL)
	}
	wake, err := unix.FcntlInt(uintptr(efd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%s: dup of the eventfd: %w", what, err)
	}
	return wake, nil
}

// add hands the rings of set to the drainers and its eventfd to the
// waker, starting them if they are not running.
func (g *drainers) add(set *ringSet) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutdown {
		return errServerClosed
	}
	if !g.waking {
		epfd, kick, err := newKickedEpoll()
		if err != nil {
			return fmt.Errorf("ring set: the waker's %w", err)
		}
		g.epfd, g.kick, g.waking = epfd, kick, true
		g.s.wg.Add(1)
		go g.wake()
	}
	g.sets[set] = struct{}{}
	g.totals.Rings++
	g.adding = append(g.adding, set)
	kickFd(g.kick)
	for k, d := range g.d {
		d.add(set.srcs[k])
	}
	return nil
}

// close releases set once every drainer has delivered what its producer
// had committed in its ring: the connection's teardown, before its File is
// closed. A set handed to a session's reader is taken back first.
func (g *drainers) close(set *ringSet) {
	set.closing.Store(true)
	g.s.takeBackSet(set)
	for k, d := range g.d {
		d.closeRing(set.srcs[k])
	}
	<-set.done
}

// released is drainer k's word that ring r of its set is done with; the
// last one hands the set to the waker, which unmaps it once it no longer
// looks at it. A set counts once in RingStats, as it counts once in
// Rings: released with its last ring.
func (g *drainers) released(r *ringSource, st RingStats) {
	set := r.set
	st.Released = 0
	set.mu.Lock()
	set.stats.add(st)
	set.left--
	last := set.left == 0
	if last {
		set.stats.Released = 1
	}
	set.mu.Unlock()
	if !last {
		return
	}
	g.mu.Lock()
	g.removing = append(g.removing, set)
	kickFd(g.kick)
	g.mu.Unlock()
}

// wake is the waker: it waits in epoll_wait on every set's eventfd and
// pokes the drainers whose rings were woken, until no set is left.
func (g *drainers) wake() {
	defer g.s.wg.Done()
	var evs [64]unix.EpollEvent
	for {
		if !g.wakerRequests() {
			g.s.idleIfNoConns() // the last sets were unmapped
			return
		}
		n, err := unix.EpollWait(g.epfd, evs[:], -1)
		if err != nil {
			continue // EINTR
		}
		for _, ev := range evs[:n] {
			if ev.Fd == int32(g.kick) {
				continue
			}
			set := g.byFd[ev.Fd]
			if set == nil {
				continue
			}
			for k, d := range g.d {
				if d.asleep.Load() && set.srcs[k].cons.Woken() {
					d.poke()
				}
			}
		}
	}
}

// wakerRequests adds and removes sets (unmapping those removed) and
// reports false — the waker ends — when no set is left and none came.
func (g *drainers) wakerRequests() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	var cnt [8]byte
	unix.Read(g.kick, cnt[:]) // ours: keep its counter from growing
	for _, set := range g.adding {
		if err := epollAdd(g.epfd, set.efd); err != nil {
			// It was checked to be an eventfd: the drainers find its
			// records on their timeouts.
			set.log.Warn("ring set: epoll_ctl on its eventfd", "err", err)
		}
		g.byFd[int32(set.efd)] = set
	}
	clear(g.adding)
	g.adding = g.adding[:0]
	for _, set := range g.removing {
		epollDel(g.epfd, set.efd)
		delete(g.byFd, int32(set.efd))
		for _, r := range set.srcs {
			r.cons.Close()
		}
		unix.Close(set.efd)
		if set.memfd >= 0 {
			unix.Close(set.memfd)
		}
		delete(g.sets, set)
		g.totals.add(set.stats)
		logRelease(set.log, set.stats)
		close(set.done)
	}
	clear(g.removing)
	g.removing = g.removing[:0]
	if len(g.sets) == 0 {
		g.waking = false
		unix.Close(g.epfd)
		unix.Close(g.kick)
		g.kick = -1
		return false
	}
	return true
}

// stop is the Server's Close: the drainers stop once the connections'
// teardowns have released their sets.
func (g *drainers) stop() {
	g.mu.Lock()
	g.shutdown = true
	g.mu.Unlock()
}

// stats are the sets' counts: those released exactly, the live ones'
// as the drainers have counted so far — each ring's live counts, also of
// the rings of a live set already let go of, whose counts are in the
// set's stats too until the set is released (counted once, there).
func (g *drainers) stats() RingStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.totals
	t.Sleeps, t.Woken, t.Timeouts = g.sleeps.Load(), g.woken.Load(), g.timeouts.Load()
	for set := range g.sets {
		hs := set.handed.Load()
		for k, r := range set.srcs {
			t.add(r.live())
			if hs != nil && !hs.back.Load() {
				t.add(readerStats(hs.ctl.Counts(k)))
			}
		}
	}
	return t
}

// drainer k: ring k of every set.
type drainer struct {
	g *drainers
	k int

	mu      sync.Mutex
	running bool
	ringRequests
	hands []handRequest // rings to give to readers and to resume, in order
	lent  int           // rings given to readers; the drainer's own

	nudge  chan struct{} // requests and the waker's pokes
	asleep atomic.Bool   // says in its rings it sleeps

	// The drainer goroutine's own.
	merge
	busy  bool // it delivered records lately: sleep until a watermark
	timer *time.Timer
	late  []lateCounts // rings resumed whose reader's last counts are not stored yet
	// lateAt is when the late counts were last looked for: at most
	// every lateNap, however fast the drainer turns.
	lateAt time.Time
}

// poke ends the drainer's sleep.
func (d *drainer) poke() {
	select {
	case d.nudge <- struct{}{}:
	default:
	}
}

// add hands r to the drainer, starting it if it is not running. Called
// with g.mu held.
func (d *drainer) add(r *ringSource) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.startLocked()
	d.adds = append(d.adds, r)
	d.poke()
}

// startLocked starts the drainer if it does not run. d.mu is held.
func (d *drainer) startLocked() {
	if !d.running {
		d.running = true
		d.g.s.wg.Add(1)
		go d.run()
	}
}

// closeRing asks the drainer to release r once it has delivered what r's
// producer committed.
func (d *drainer) closeRing(r *ringSource) {
	d.mu.Lock()
	d.closes = append(d.closes, r)
	d.mu.Unlock()
	d.poke()
}

// askFlush asks the drainer to deliver everything committed now, and
// returns the channel closed once it has; nil if it does not run.
func (d *drainer) askFlush() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return nil
	}
	ch := make(chan struct{})
	d.flushes = append(d.flushes, ch)
	d.poke()
	return ch
}

// A handRequest asks drainer k to give ring r to a reader (hand-over) or
// to resume it (take-back).
type handRequest struct {
	give  bool
	r     *ringSource
	hs    *handedSet
	given *sync.WaitGroup // a give's: done once given (or not, taken back first)
}

// give asks the drainer to give r to hs's reader at a pass boundary.
func (d *drainer) give(r *ringSource, hs *handedSet, given *sync.WaitGroup) {
	d.hand(handRequest{give: true, r: r, hs: hs, given: given})
}

// resume asks the drainer to take r back from hs's reader.
func (d *drainer) resume(r *ringSource, hs *handedSet) {
	d.hand(handRequest{r: r, hs: hs})
}

// hand queues h, starting the drainer if it does not run (all its rings
// may be lent).
func (d *drainer) hand(h handRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.startLocked()
	d.hands = append(d.hands, h)
	d.poke()
}

// handOvers gives and resumes rings as asked, in order. A ring is given
// only while its hand-over has not been taken back, and resumed only if
// it was given: each ring of a hand-over counts once as resumed
// (Server.resumed), whichever order the requests came in.
func (d *drainer) handOvers(hands []handRequest) {
	for _, h := range hands {
		r := h.r
		switch {
		case h.give && !h.hs.back.Load() && r.given == nil:
			d.merge.giveRing(d.k, r, h.hs)
			r.given = h.hs
			d.lent++
			h.given.Done()
		case h.give:
			h.given.Done()
			d.g.s.resumed(h.hs)
		case r.given == h.hs:
			r.given = nil
			d.lent--
			if tail, whole := d.merge.resumeRing(d.k, r, h.hs); !whole {
				h.hs.set.log.Debug("ring set taken back before the reader stored its last pass's counts; taken when they come", "handover", h.hs.id, "ring", d.k)
				d.late = append(d.late, lateCounts{r: r, hs: h.hs, tail: tail, until: time.Now().Add(lateCountsMax)})
				continue
			}
			d.g.s.resumed(h.hs)
		}
	}
}

// lateCounts is a ring resumed at tail whose reader had committed its
// last pass there but not yet stored that pass's counts: a reader
// preempted between the two (Control.Commit), past takeBackBound. The
// ring is delivered from meanwhile; its hand-over's control stays mapped,
// and the counts are taken when they come (settleLate) — so that the
// pass's records count in RingStats and in their events' counts, and its
// loss claims in the ring's budget, once, however late.
type lateCounts struct {
	r     *ringSource
	hs    *handedSet
	tail  uint64
	until time.Time
}

// lateNap is how long a drainer waiting for late counts sleeps between
// its looks.
const lateNap = time.Millisecond

// lateCountsMax bounds the wait for a reader's late counts: a reader
// stopped longer (or dead) loses its last pass's counts, said so.
const lateCountsMax = time.Second

// settleLate takes the late counts that came, each ring's once, and
// gives up on those past lateCountsMax; each settled ring counts as
// resumed then (Server.resumed), which lets its hand-over end.
func (d *drainer) settleLate() {
	now := time.Now()
	d.lateAt = now
	keep := d.late[:0]
	for _, l := range d.late {
		cs, whole := l.hs.ctl.TakeCounts(d.k, l.tail, 0, l.hs.countEvent)
		l.r.addReader(cs)
		if !whole && now.Before(l.until) {
			keep = append(keep, l)
			continue
		}
		if !whole {
			l.hs.set.log.Warn("ring set taken back: the reader's counts of its last pass never came; taken as they were", "handover", l.hs.id, "waited", lateCountsMax)
		}
		d.g.s.resumed(l.hs)
	}
	clear(d.late[len(keep):])
	d.late = keep
}

// drainerTurn, if set (by tests), runs at the start of each turn of a
// drainer's loop, before it takes its requests: a test holds a drainer
// there while requests pile up (TestHandOverBeforeAdopted).
var drainerTurn func(d *drainer)

// requests takes the drainer's requests; false when it is to exit: no ring
// left and none came.
func (d *drainer) requests() (flushes []chan struct{}, ok bool) {
	d.mu.Lock()
	hands := d.hands
	d.hands = nil
	// The rings added are adopted before the hand-overs are served, in
	// the same turn: a give found in hands was asked after its ring's add
	// (a set is a candidate only once drainers.add queued its rings), so
	// its ring is in the merge when it is given, and leaves it. Adopted
	// after its give, the ring stayed in the merge while the reader had
	// it: both read it, and the records between reached the session twice
	// (the soak's accounting, recorded + lost over written; its daemon
	// warned that the reader's tail was before the drainer's).
	d.adoptAdds(&d.merge)
	d.mu.Unlock()
	// Outside the queue's lock: giving a ring tells its waiting losses,
	// which takes streams' locks; the subsystem asks for resumes under its
	// own lock, and must not wait for those.
	d.handOvers(hands)
	if len(d.late) > 0 && time.Since(d.lateAt) >= lateNap {
		d.settleLate()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	flushes = d.take(&d.merge)
	if len(d.rings) == 0 && len(flushes) == 0 && d.lent == 0 && len(d.hands) == 0 && len(d.late) == 0 {
		d.running = false
		return flushes, false
	}
	return flushes, true
}

func (d *drainer) run() {
	defer d.g.s.wg.Done()
	for {
		if drainerTurn != nil {
			drainerTurn(d)
		}
		flushes, ok := d.requests()
		if !ok {
			d.g.s.idleIfNoConns()
			return
		}
		n, more := d.step(flushes, nap, d.g.released)
		if n > 0 {
			d.busy = true
		}
		if !more {
			d.sleep()
		}
	}
}

// sleep says in every ring that the drainer sleeps until the watermark
// (see drainers) and, if none has that much to deliver, waits for a poke,
// a request, or the timeout.
func (d *drainer) sleep() {
	low := d.g.lowLatency.Load() > 0
	d.asleep.Store(true)
	for i, r := range d.rings {
		w := uint32(1)
		if d.busy && !low {
			w = uint32(r.cons.Size() / 4)
		}
		if !r.cons.SleepAt(w) {
			for _, q := range d.rings[:i] {
				q.cons.Awake()
			}
			d.asleep.Store(false)
			d.busy = true
			return
		}
	}
	wait := drainerIdleWait
	switch {
	case len(d.late) > 0:
		wait = lateNap
	case d.busy:
		wait = busyWait
	}
	if d.timer == nil {
		d.timer = time.NewTimer(wait)
	} else {
		d.timer.Reset(wait)
	}
	poked := false
	d.g.sleeps.Add(1)
	select {
	case <-d.nudge:
		poked = true
		d.g.woken.Add(1)
		d.timer.Stop()
	case <-d.timer.C:
		d.g.timeouts.Add(1)
	}
	d.asleep.Store(false)
	pending := false
	for _, r := range d.rings {
		r.cons.Awake()
		if r.cons.Pending() > 0 {
			pending = true
		}
	}
	// Woken, or records below the watermark: busy. A busy sleep that
	// timed out on empty rings: idle.
	d.busy = poked || pending
}

// readerWaits says a reader waits in a read of the trace: until done is
// called, drainers go to sleep with watermark 1, so that what producers
// publish reaches it at once rather than within busyWait (once a drainer
// asleep at a busy watermark has woken: see drainers).
func (g *drainers) readerWaits() (done func()) {
	g.lowLatency.Add(1)
	return func() { g.lowLatency.Add(-1) }
}

// newKickedEpoll is an epoll set for a goroutine that waits on others'
// eventfds (the drainers' waker), holding an eventfd of its
// own, kick, that a request adds to (kickFd) to end its epoll_wait.
func newKickedEpoll() (epfd, kick int, err error) {
	epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, -1, fmt.Errorf("epoll_create1: %w", err)
	}
	kick, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err == nil {
		if err = epollAdd(epfd, kick); err != nil {
			unix.Close(kick)
		}
	}
	if err != nil {
		unix.Close(epfd)
		return -1, -1, fmt.Errorf("eventfd: %w", err)
	}
	return epfd, kick, nil
}

// kickFd adds 1 to an eventfd of ours: eventfd(2) takes a u64 in the
// machine's byte order.
func kickFd(fd int) {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	unix.Write(fd, one[:])
}

func epollAdd(epfd, fd int) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev)
}

func epollDel(epfd, fd int) { unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, fd, nil) }
