package fuse

import (
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// idleAfter is how long a reader waits for the next request in the kernel,
// on its thread, before it waits in the runtime's poller instead.
const idleAfter = 100 * time.Millisecond

// reader is a goroutine that reads the connection's requests (readLoop):
// one at a time reads, and it answers the WRITEs of InlineWriters itself
// (inline.go). While it does, nobody reads: a write that waits keeps the
// others waiting, until the watchdog retires it and starts another reader.
//
// How it waits for a request matters as much as how it answers one: a FUSE
// write round trip is two wakeups, the server's and the writer's, and on the
// machine BENCHMARKS.md was measured on each costs about what the server's
// whole answer does. So, as libfuse's threads sleep in read(2):
//
//   - After answering a write inline it yields its CPU once before it
//     reads the next request: the writer it answered is runnable, most
//     often on this CPU, and writes again (a producer writes in bursts), so
//     that the next request is there when the reader runs again, with no
//     sleep and no wakeup on the server's side. (A request already there
//     costs the yield for nothing; reading first, then yielding, cost more
//     over all.)
//   - Otherwise it sleeps in ppoll(2) on the device, a system call the
//     runtime is told of (its P goes to other goroutines), and the writer's
//     request wakes this very thread. The device is not in the runtime's
//     poller (newConn): there, every request would also wake the thread
//     that waits in epoll for the whole process, for nothing.
//   - After idleAfter without a request it gives its thread back and waits
//     in the poller, through a duplicate of the device registered for that
//     wait only (waitIdle): an idle connection holds no thread.
//
// A blocking read(2) of the device would be cheaper still, but the runtime
// could not stop the world while a thread sleeps in it uninterruptibly for
// a signal (/dev/fuse's read is restarted after Go's SA_RESTART handlers),
// and its P would wait as long.
type reader struct {
	c *Conn

	// busy is the sequence number of the request being answered inline,
	// 0 between requests, retired once retired: the reader ends its
	// request with a CompareAndSwap(seq, 0) that fails if the watchdog
	// retired it meanwhile, so that never two readers read at once.
	busy atomic.Uint64
	// claim says who answers the request (the claim constants), and
	// unique which request it is, for the watchdog.
	claim  atomic.Uint64
	unique atomic.Uint64
	seq    uint64  // the last sequence number used
	req    Request // the request answered inline
	// lastPid is the caller of the last request answered inline.
	lastPid uint32
	// yield: the last request was answered inline, and the next read
	// yields the CPU once first.
	yield bool

	// The watchdog's view, under c.mu: the request last seen busy, and
	// for how many ticks in a row.
	seen  uint64
	ticks int

	// Made once, so that reading and replying allocate nothing: a
	// closure made at each call would be.
	readFn  func(fd uintptr) bool
	rbuf    []byte
	rn      int
	rerr    error
	waited  bool
	got     readResult
	writeFn func(fd uintptr) bool
	out     [outHeaderSize + writeOutSize]byte
	outLen  int
	werr    error
}

// readResult is what readFn came back with.
type readResult int

const (
	readDone   readResult = iota // a request, or the read's error
	readClosed                   // the connection is closing (Unmount)
	readIdle                     // nothing for idleAfter: wait in the poller
)

// newReader makes a reader and lists it for the watchdog.
func (c *Conn) newReader() *reader {
	r := &reader{c: c}
	r.readFn = r.readDevice
	r.writeFn = func(fd uintptr) bool {
		for {
			// A raw system call: a reply to /dev/fuse never waits (it
			// copies from our buffer and wakes the caller), and the
			// runtime's entersyscall would wake sysmon at every write.
			_, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&r.out[0])), uintptr(r.outLen))
			if e != unix.EINTR {
				r.werr = nil
				if e != 0 {
					r.werr = e
				}
				return true
			}
		}
	}
	c.mu.Lock()
	c.readers = append(c.readers, r)
	c.mu.Unlock()
	return r
}

// dropReader unlists a reader that ended.
func (c *Conn) dropReader(r *reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.readers {
		if x == r {
			c.readers = append(c.readers[:i], c.readers[i+1:]...)
			return
		}
	}
}

// read reads one request into buf; waited says there was none queued (the
// read waited for it); closed says the connection is being closed
// (Unmount).
func (r *reader) read(buf []byte) (n int, waited bool, err error, closed bool) {
	r.rbuf, r.waited = buf, false
	defer func() { r.rbuf = nil }()
	for {
		if err := r.c.raw.Read(r.readFn); err != nil {
			return 0, false, err, true // the device is closed
		}
		switch r.got {
		case readDone:
			return r.rn, r.waited, r.rerr, false
		case readClosed:
			return 0, false, nil, true
		}
		if r.waitIdle() {
			return 0, false, nil, true
		}
	}
}

// readDevice is readFn: it reads a request, waiting for one as the reader's
// doc says, and says how it came back in r.got.
func (r *reader) readDevice(fd uintptr) bool {
	c := r.c
	if r.yield {
		// Before the read, which would find nothing yet: the writer
		// runs first, here most often.
		r.yield = false
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	for {
		// Raw system calls, as the reply's: the device is non-blocking,
		// and entersyscall would wake sysmon.
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(r.rbuf))), uintptr(len(r.rbuf)))
		if e != unix.EAGAIN {
			r.rn, r.rerr, r.got = int(n), nil, readDone
			if e != 0 {
				r.rn, r.rerr = 0, e
			}
			return true
		}
		r.waited = true
		if c.closing.Load() {
			r.got = readClosed
			return true
		}
		pfd := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(c.wake), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(idleAfter))
		// Not raw: it sleeps.
		n, _, e = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch {
		case e == unix.EINTR:
		case e != 0:
			r.rn, r.rerr, r.got = 0, e, readDone
			return true
		case n == 0:
			r.got = readIdle
			return true
		case pfd[1].Revents != 0:
			r.got = readClosed
			return true
		}
	}
}

// waitIdle waits in the runtime's poller until the device has a request,
// and reports whether the connection is closing instead. The device's
// duplicate is registered with the poller for this wait only.
func (r *reader) waitIdle() (closed bool) {
	c := r.c
	nfd, derr := -1, error(nil)
	if err := c.raw.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return true
	}
	if derr != nil {
		// No descriptor to spare: wait in the kernel again.
		c.debugf("fuse: waiting for requests in the poller: dup: %v", derr)
		return c.closing.Load()
	}
	f := os.NewFile(uintptr(nfd), "/dev/fuse") // non-blocking: in the poller
	c.mu.Lock()
	if c.closing.Load() {
		c.mu.Unlock()
		f.Close()
		return true
	}
	c.idle = f
	c.mu.Unlock()
	var err error
	if rc, serr := f.SyscallConn(); serr != nil {
		err = serr
	} else {
		err = rc.Read(func(fd uintptr) bool {
			pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			var zero unix.Timespec
			n, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			return n != 0
		})
	}
	c.mu.Lock()
	c.idle = nil
	c.mu.Unlock()
	f.Close()
	return err != nil || c.closing.Load()
}

// stopReading makes the readers end: a reader waiting in the kernel is woken
// through c.wake, one in the poller by closing its duplicate.
func (c *Conn) stopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing.Store(true)
	if c.idle != nil {
		c.idle.Close()
	}
	if c.wake >= 0 {
		var one [8]byte
		one[0] = 1
		unix.Write(c.wake, one[:])
	}
}
