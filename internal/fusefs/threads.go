package fusefs

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// maxThreads bounds the calling threads whose /proc files stay open: two
// descriptors each. Past it, threads that have exited are closed first.
const maxThreads = 512

// threads is what a write needs to know of its calling thread, kept between
// writes: a FUSE write of user_events_data reads the caller's
// /proc/<tid>/syscall and /proc/<tid>/stat, and its process id from
// /proc/<tid>/status. Opening, reading and closing three files per write
// cost more than the write itself (~40 µs of a ~90 µs round trip), so each
// thread's syscall and stat files stay open and are read again with
// pread(2) at offset 0 (a /proc seq file makes its text anew at each read
// from 0), and its process id is read once.
//
// Why a kept thread is still the same thread: an open /proc/<tid> file
// belongs to the thread it was opened for (the kernel's struct pid, not the
// number), and reading it fails with ESRCH once that thread has exited, even
// if the number is reused by then. Each write reads stat first: success
// says the thread, and so its process id, is the one kept — a thread never
// changes process; one that execs from a non-leader thread takes the
// leader's number, and its old number's files fail. Failure drops the entry
// and the write opens the files anew. Permission is not cached: the kernel
// checks the right to read syscall (ptrace access) at each read; and a
// thread the tree's user could not ptrace (Options.For) has its syscall
// never read. Threads are kept by the id FUSE gives them, in the mounter's
// pid namespace, and found in this process's /proc once (FS.resolve).
type threads struct {
	mu       sync.Mutex
	m        map[int]*thread
	closed   bool
	sweeping bool // a sweeper runs: while m has entries
}

// sweepEvery is how often the kept files of exited threads are closed: a
// daemon keeps nothing long for a caller that has gone.
const sweepEvery = time.Second

// thread is one calling thread's open /proc files. Its lock is held while
// they are read, so that they are never closed under a reader (the number of
// a closed descriptor can be another file's at once).
type thread struct {
	mu      sync.Mutex
	id      int // the thread's id in the mounter's pid namespace: its key
	tid     int // and in this process's /proc
	tgid    int
	stat    int // /proc/<tid>/stat, or -1
	syscall int // /proc/<tid>/syscall, or -1 (no right to read it, say)
	// noSyscall: the user the tree is served for may not ptrace the
	// thread (caps.User), so its syscall file is not read.
	noSyscall bool
	comm      string
	buf       [1024]byte
}

func (t *thread) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stat >= 0 {
		unix.Close(t.stat)
		t.stat = -1
	}
	if t.syscall >= 0 {
		unix.Close(t.syscall)
		t.syscall = -1
	}
}

func openProc(tid int, name string) int {
	fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// caller is what a write learnt of its calling thread.
type caller struct {
	tid    int // in this process's /proc; 0 if it could not be found
	tgid   int
	comm   string
	cpu    int
	call   procfs.Syscall
	callOK bool // call was read
}

// look reads the system call, command name and CPU of the thread whose id
// in the mounter's pid namespace is id, and tells its thread and process
// ids in this process's; resolve finds those when the thread is new (and
// says whether its syscall may be read). ok is false when its stat cannot
// be read (the thread is gone): then nothing is known of it but what
// resolve says.
func (ts *threads) look(id int, resolve func(id int) (resolved, error)) (c caller, ok bool) {
	for attempt := 0; attempt < 2; attempt++ {
		t := ts.get(id, resolve)
		if t == nil {
			break
		}
		if c, ok := t.read(); ok {
			return c, true
		}
		ts.drop(t)
	}
	r, err := resolve(id)
	if err != nil {
		return caller{}, false
	}
	return caller{tid: r.tid, tgid: r.tgid}, false
}

// resolved is a calling thread found in this process's /proc.
type resolved struct {
	tid, tgid int
	// mayTrace: the user the tree is served for may ptrace it.
	mayTrace bool
}

// get returns the kept thread id, or opens its files and keeps it. A kept
// thread is the one its id names for as long as its stat can be read: a
// thread's id does not change, nor is it another's while it lives.
func (ts *threads) get(id int, resolve func(id int) (resolved, error)) *thread {
	ts.mu.Lock()
	if t := ts.m[id]; t != nil || ts.closed {
		ts.mu.Unlock()
		return t
	}
	ts.mu.Unlock()
	r, err := resolve(id)
	if err != nil {
		return nil
	}
	t := &thread{id: id, tid: r.tid, tgid: r.tgid, stat: openProc(r.tid, "stat"), syscall: -1, noSyscall: !r.mayTrace}
	if t.stat < 0 {
		t.close()
		return nil
	}
	if r.mayTrace {
		t.syscall = openProc(r.tid, "syscall")
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if old := ts.m[id]; old != nil || ts.closed {
		// Another request of the same thread got there first (or the
		// tree is closing): keep one.
		t.close()
		return old
	}
	if ts.m == nil {
		ts.m = make(map[int]*thread)
	}
	if len(ts.m) >= maxThreads {
		ts.sweep()
	}
	ts.m[id] = t
	if !ts.sweeping {
		ts.sweeping = true
		go ts.sweeper()
	}
	return t
}

// sweeper closes the files of exited threads every sweepEvery, and ends
// when none are kept (get starts it again).
func (ts *threads) sweeper() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for range tick.C {
		ts.mu.Lock()
		if !ts.closed {
			ts.sweepDead()
		}
		if ts.closed || len(ts.m) == 0 {
			ts.sweeping = false
			ts.mu.Unlock()
			return
		}
		ts.mu.Unlock()
	}
}

// sweep closes the threads that have exited, and, if that freed nothing,
// an eighth of the table, arbitrary threads (so that a table full of live
// threads is not swept again at every new one). Called with ts.mu held.
func (ts *threads) sweep() {
	if ts.sweepDead() {
		return
	}
	n := maxThreads / 8
	for id, t := range ts.m {
		if n == 0 {
			return
		}
		delete(ts.m, id)
		t.close()
		n--
	}
}

// sweepDead closes the threads that have exited, and reports whether there
// were any. Called with ts.mu held.
func (ts *threads) sweepDead() bool {
	var buf [1]byte
	freed := false
	for id, t := range ts.m {
		t.mu.Lock()
		_, err := unix.Pread(t.stat, buf[:], 0)
		t.mu.Unlock()
		if err != nil {
			delete(ts.m, id)
			t.close()
			freed = true
		}
	}
	return freed
}

func (ts *threads) drop(t *thread) {
	ts.mu.Lock()
	if ts.m[t.id] == t {
		delete(ts.m, t.id)
	}
	ts.mu.Unlock()
	t.close()
}

// Close closes every kept thread's files.
func (ts *threads) Close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.closed = true
	for tid, t := range ts.m {
		delete(ts.m, tid)
		t.close()
	}
}

// read reads the thread's stat (which says it is still the thread kept) and
// its system call.
func (t *thread) read() (caller, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stat < 0 {
		return caller{}, false
	}
	n, err := preadAll(t.stat, t.buf[:])
	if err != nil || n == 0 {
		return caller{}, false
	}
	c := caller{tid: t.tid, tgid: t.tgid}
	comm, cpu, ok := procfs.ParseStat(t.buf[:n])
	if ok {
		if string(comm) != t.comm { // no allocation when unchanged
			t.comm = string(comm)
		}
		c.comm, c.cpu = t.comm, cpu
	}
	if t.syscall < 0 && !t.noSyscall {
		t.syscall = openProc(t.tid, "syscall")
	}
	if t.syscall >= 0 {
		if n, err := preadAll(t.syscall, t.buf[:]); err == nil {
			if call, err := procfs.ParseSyscall(string(t.buf[:n])); err == nil {
				c.call, c.callOK = call, true
			}
		}
	}
	return c, true
}

// preadAll reads a /proc file from offset 0 into buf: all of it when it
// fits (a seq file's first read returns at most a page, and these are
// shorter than buf).
func preadAll(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}
