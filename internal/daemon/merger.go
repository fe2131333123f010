package daemon

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// mergeBatch bounds the records the merger delivers before it looks
	// at its requests again, so that producers that never stop cannot
	// keep a flush or a close waiting.
	mergeBatch = 4096
	// holdMaxDefault is the longest a ring's record, reserved and not yet
	// committed, holds the delivery of later records of other rings. A
	// producer between its reservation and its commit normally takes
	// nanoseconds; one preempted there, killed there, or hostile, would
	// otherwise stop every ring. A ring that holds past it is counted
	// (RingStats.Held) and never holds the merge again.
	holdMaxDefault = time.Millisecond
	// idleWait bounds the merger's sleep: producers' eventfds and the
	// merger's own requests end it; the timeout is what keeps a producer
	// that clears its ring's sleeping word from keeping its records
	// waiting for ever.
	idleWait = 200 * time.Millisecond
	// napMax is how long the merger naps between looks at rings that were
	// just busy, and idleNaps how many empty looks it makes before it
	// sleeps: about a millisecond. A merger that slept as soon as the
	// rings were empty would make the next publish pay the wake-up system
	// call the ring exists to avoid; one that spun would read the lines
	// producers are writing, record by record. Napping, it takes what
	// accumulated in one batch, long after the producers left those lines,
	// and a producer that publishes at least every millisecond never pays
	// a wake — as perf's wakeup watermark and LTTng's consumer timer do.
	napMax   = 50 * time.Microsecond
	napMin   = 2 * time.Microsecond
	idleNaps = 20
)

// holdMax is holdMaxDefault; the tests that check the order on a busy
// machine raise it, so that a producer preempted between its reservation
// and its commit holds the merge as long as it takes.
var holdMax = holdMaxDefault

// merger delivers the records of every client's version-1 ring into the
// subsystem, in one goroutine, in time order across rings (see merge): as
// ftrace reads its per-CPU buffers merged by time stamp, consumers here
// see the records of different processes in the order they were written.
// A version-1 ring holds its producer's records of every CPU, so one
// merger takes them all; ring sets go to the per-CPU drainers instead
// (drainer.go).
//
// # Napping and sleeping
//
// When no ring offers anything, the merger naps (nanosleep, napMax) and
// looks at the rings' head lines only, up to idleNaps times, so that
// producers that keep publishing never pay a wake-up. Then it says in
// every ring that it sleeps and looks again (shmring.Consumer.Sleep), then waits in
// epoll_wait on every ring's eventfd, edge-triggered: the first publisher
// after it said so adds 1 to its eventfd. The merger never reads those
// eventfds — a client that clears their O_NONBLOCK or empties them cannot
// make it block — and epoll has no limit on their number, where a futex
// wait would need a thread per ring. Its own eventfd, in the same set,
// brings requests: a new ring, a closing one, a flush.
type merger struct {
	s *Server

	mu      sync.Mutex
	running bool
	ringRequests
	shutdown bool
	kick     int // the running merger's eventfd; -1 when none runs
	all      map[*ringSource]struct{}
	totals   RingStats

	outOfOrder atomic.Uint64

	// nudge ends the naps: a request sends on it, and the merger looks
	// at it after each nap (at most napMax).
	nudge chan struct{}

	// The merger goroutine's own.
	nap  time.Duration // the next nap's length (see napMax)
	epfd int
	merge
}

func (m *merger) init(s *Server) {
	m.s = s
	m.kick = -1
	m.nudge = make(chan struct{}, 1)
	m.nap = napMax
	m.all = map[*ringSource]struct{}{}
	m.merge.outOfOrder = &m.outOfOrder
}

// add hands r to the merger, starting it if it is not running.
func (m *merger) add(r *ringSource) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shutdown {
		return errServerClosed
	}
	if !m.running {
		epfd, kick, err := newKickedEpoll()
		if err != nil {
			return fmt.Errorf("ring: the merger's %w", err)
		}
		m.epfd, m.kick, m.running = epfd, kick, true
		m.s.wg.Add(1)
		go m.run()
	}
	m.adds = append(m.adds, r)
	m.all[r] = struct{}{}
	m.totals.Rings++
	m.wake()
	return nil
}

// wake interrupts the merger's sleep. Called with m.mu held.
func (m *merger) wake() {
	if m.kick >= 0 {
		kickFd(m.kick)
	}
	select {
	case m.nudge <- struct{}{}:
	default:
	}
}

// closeRing asks the merger to release r once it has delivered what r's
// producer committed.
func (m *merger) closeRing(r *ringSource) {
	m.mu.Lock()
	m.closes = append(m.closes, r)
	m.wake()
	m.mu.Unlock()
}

// askFlush asks the merger to deliver everything published before the
// call, and returns the channel closed once it has; nil if it does not
// run.
func (m *merger) askFlush() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		return nil
	}
	ch := make(chan struct{})
	m.flushes = append(m.flushes, ch)
	m.wake()
	return ch
}

// stop is the Server's Close: the merger stops once the connections'
// teardowns have released their rings.
func (m *merger) stop() {
	m.mu.Lock()
	m.shutdown = true
	m.mu.Unlock()
}

// requests takes the merger's requests. It reports false when the merger
// is to exit: it has no ring left and none came.
func (m *merger) requests() (flushes []chan struct{}, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cnt [8]byte
	unix.Read(m.kick, cnt[:]) // ours: keep its counter from growing
	flushes = m.take(&m.merge, func(r *ringSource) {
		if err := epollAdd(m.epfd, r.efd); err != nil {
			// The eventfd cannot be watched (it was checked to be
			// one): the ring is drained on every pass and on the
			// sleep's timeout.
			r.log.Warn("ring: epoll_ctl on its eventfd", "err", err)
		}
	})
	if len(m.rings) == 0 && len(flushes) == 0 {
		m.running = false
		unix.Close(m.epfd)
		unix.Close(m.kick)
		m.kick = -1
		return flushes, false
	}
	return flushes, true
}

func (m *merger) run() {
	defer m.s.wg.Done()
	for {
		flushes, ok := m.requests()
		if !ok {
			m.s.idleIfNoConns()
			return
		}
		if _, more := m.step(flushes, m.napOnce, m.released); more || m.napUntilPending() {
			continue
		}
		m.sleep(idleWait)
	}
}

// released is the merge's word that r is done with: its eventfd and
// mapping go, and its counts join the totals.
func (m *merger) released(r *ringSource, st RingStats) {
	epollDel(m.epfd, r.efd)
	r.cons.Close()
	unix.Close(r.efd)
	logRelease(r.log, st)
	m.mu.Lock()
	delete(m.all, r)
	m.totals.add(st)
	m.mu.Unlock()
	close(r.done)
}

// napOnce naps for d, or until a request comes.
func (m *merger) napOnce(d time.Duration) {
	select {
	case <-m.nudge:
	default:
		nap(d)
	}
}

// nap sleeps for d in nanosleep(2), not on a Go timer: the runtime rounds
// a timer under a millisecond up to one when it has nothing else to run,
// and a millisecond's nap would let a busy producer fill its ring. A
// request that comes meanwhile waits for the nap's end, at most napMax.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Nanosleep(&ts, nil)
}

// napUntilPending naps, looks, and naps again, up to idleNaps times, until
// a ring has records or a request comes; it reports whether one did. A
// look reads each ring's head line only (Consumer.Pending), never the data
// a producer may be writing. The nap shortens while a look finds a ring a
// quarter full, so that a small ring does not fill up during a nap, and
// grows back to napMax while looks find little.
func (m *merger) napUntilPending() bool {
	for range idleNaps {
		nap(m.nap)
		select {
		case <-m.nudge:
			return true
		default:
		}
		pending, fill := m.pending()
		switch {
		case fill > 0.25:
			m.nap = max(m.nap/2, napMin)
		case fill < 1.0/16:
			m.nap = min(m.nap*2, napMax)
		}
		if pending {
			return true
		}
	}
	return false
}

// pending says whether a ring has bytes past its tail or a request came,
// and how full the fullest ring is.
func (m *merger) pending() (bool, float64) {
	any, fill := false, 0.0
	for _, r := range m.rings {
		if p := r.cons.Pending(); p > 0 {
			any = true
			fill = max(fill, float64(p)/float64(r.cons.Size()))
		}
	}
	m.mu.Lock()
	req := len(m.adds)+len(m.closes)+len(m.flushes) > 0
	m.mu.Unlock()
	return any || req, fill
}

// sleep says in every ring that the merger sleeps and, if none has
// anything to deliver then, waits in epoll_wait until a producer publishes,
// a request comes or the timeout passes.
func (m *merger) sleep(timeout time.Duration) {
	for i, r := range m.rings {
		if !r.cons.Sleep() {
			for _, q := range m.rings[:i] {
				q.cons.Awake()
			}
			return
		}
	}
	var evs [16]unix.EpollEvent
	unix.EpollWait(m.epfd, evs[:], int(max(timeout/time.Millisecond, 1)))
	for _, r := range m.rings {
		r.cons.Awake()
	}
}

// newKickedEpoll is an epoll set for a goroutine that waits on others'
// eventfds (the merger, the drainers' waker), holding an eventfd of its
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
