package fusefs

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// maxThreads bounds the calling threads whose /proc files stay open: three
// descriptors each. Past it, threads that have exited are closed first.
const maxThreads = 512

// threads is what a write needs to know of its calling thread, kept between
// writes: a FUSE write of user_events_data reads the caller's
// /proc/<tid>/syscall (which call, its arguments) and /proc/<tid>/comm (the
// name the record carries), /proc/<tid>/stat for its CPU at most every
// cpuAge, and its process id once, from /proc/<tid>/status. Opening,
// reading and closing files per write cost more than the write itself, so
// each thread's files stay open and are read again with pread(2) at offset
// 0 (a /proc seq file makes its text anew at each read from 0), with raw
// system calls (rawPread).
//
// Why a kept thread is still the same thread: an open /proc/<tid> file
// belongs to the thread it was opened for (the kernel's struct pid, not the
// number), and reading it fails with ESRCH once that thread has exited, even
// if the number is reused by then. Each write reads syscall and comm:
// success says the thread, and so its process id, is the one kept — a thread
// never changes process; one that execs from a non-leader thread takes the
// leader's number, and its old number's files fail. Failure drops the entry
// and the write opens the files anew. A leader that execs stays the thread
// it was, and its comm read says its new name. Permission is not cached: the
// kernel checks the right to read syscall (ptrace access) at each read; and
// a thread the tree's user could not ptrace (Options.For) has its syscall
// never read. Threads are kept by the id FUSE gives them, in the mounter's
// pid namespace, and found in this process's /proc once (FS.resolve).
type threads struct {
	mu       sync.Mutex
	m        map[int]*thread
	closed   bool
	sweeping bool // a sweeper runs: while m has entries
	// running counts the reads of a syscall file that found its thread
	// running, and were made again (thread.readCall).
	running atomic.Uint64
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
	comm    int // /proc/<tid>/comm, or -1 once closed
	stat    int // /proc/<tid>/stat, for the CPU
	syscall int // /proc/<tid>/syscall, or -1 (no right to read it, say)
	// noSyscall: the user the tree is served for may not ptrace the
	// thread (caps.User), so its syscall file is not read.
	noSyscall bool
	name      string        // the command name last read
	cpu       int           // the CPU stat last said
	statRead  time.Duration // when stat was last read (the CPU), since epoch; 0: never
	read1     bool          // read has been called
	buf       [1024]byte
}

func (t *thread) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, fd := range []*int{&t.comm, &t.stat, &t.syscall} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
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
	first  bool // the thread's first write (since it was kept)
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
		if c, ok := t.read(&ts.running); ok {
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
	t := &thread{id: id, tid: r.tid, tgid: r.tgid, comm: openProc(r.tid, "comm"), stat: openProc(r.tid, "stat"), syscall: -1, noSyscall: !r.mayTrace}
	if t.comm < 0 || t.stat < 0 {
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
		_, err := unix.Pread(t.comm, buf[:], 0)
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

// cpuAge is how old the CPU a write's record carries may be: a thread's
// /proc/<tid>/stat is read at its first write, and again at a write that
// comes later than cpuAge after the last read.
const cpuAge = time.Millisecond

// epoch is what statRead counts from: time.Since reads the monotonic clock
// only, half of time.Now.
var epoch = time.Now()

// read reads what a write needs of the thread: its system call, command
// name and CPU. Every read of a kept file says the thread is still the one
// kept: they fail with ESRCH once it has exited, whatever has its number
// by then.
func (t *thread) read(running *atomic.Uint64) (caller, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.comm < 0 {
		return caller{}, false
	}
	c := caller{tid: t.tid, tgid: t.tgid, first: !t.read1}
	t.read1 = true
	if t.syscall < 0 && !t.noSyscall {
		t.syscall = openProc(t.tid, "syscall")
	}
	if t.syscall >= 0 {
		call, err := t.readCall(running)
		switch {
		case err == nil:
			c.call, c.callOK = call, true
		case errors.Is(err, unix.ESRCH):
			return caller{}, false
		}
	}
	// comm, not stat, at every write: the name a record carries changes
	// with prctl(PR_SET_NAME), a write to /proc/<tid>/comm or exec, and
	// comm is made by one task_lock'd copy where stat formats 52 fields
	// (0.7 against 3.5 µs here).
	n, err := rawPread(t.comm, t.buf[:])
	if err != nil || n == 0 {
		return caller{}, false
	}
	if name := procfs.CommBytes(t.buf[:n]); string(name) != t.name { // no allocation when unchanged
		t.name = string(name)
	}
	c.comm = t.name
	// The CPU: stat's field 39, task_cpu — where the thread, asleep in
	// this request, last ran, so where it wrote — is exact but costs a
	// FUSE write what the system call costs. It is read again only after
	// cpuAge: a thread that writes more often, and moves to another CPU
	// meanwhile, has records on its previous CPU for up to cpuAge (see the
	// package doc's differences from Linux).
	if now := time.Since(epoch) + 1; t.statRead == 0 || now-t.statRead >= cpuAge {
		n, err := rawPread(t.stat, t.buf[:])
		if err != nil || n == 0 {
			return caller{}, false
		}
		if _, cpu, ok := procfs.ParseStat(t.buf[:n]); ok {
			t.cpu = cpu
		}
		t.statRead = now
	}
	c.cpu = t.cpu
	return c, true
}

// runningWait bounds how long readCall reads a caller's system call again
// while /proc says it is running.
const runningWait = time.Second

// readCall reads the thread's system call from its kept syscall file. The
// thread is a FUSE caller whose request this server holds: it is in that
// call, blocked or about to be — it queued the request and woke the server
// before it sleeps in request_wait_answer, and until it does (TASK_RUNNING)
// the kernel's task_current_syscall answers "running" without looking. So
// "running" is read again, yielding this CPU (to the caller, when it waits
// for one), until the caller sleeps: taken as no call, the write would be a
// plain write(2) whatever it was, its pwrite offset and its faulted buffer
// unchecked. Only after runningWait is the call given up as unknown. Each
// read that finds the thread running counts in running.
func (t *thread) readCall(running *atomic.Uint64) (procfs.Syscall, error) {
	var start time.Time
	for i := 0; ; i++ {
		n, err := rawPread(t.syscall, t.buf[:])
		if err != nil {
			return procfs.Syscall{}, err
		}
		call, err := procfs.ParseSyscall(t.buf[:n])
		if !errors.Is(err, procfs.ErrRunning) {
			return call, err
		}
		running.Add(1)
		switch {
		case i == 0:
			start = time.Now()
		case i%64 == 0 && time.Since(start) > runningWait:
			return call, err
		}
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// rawPread reads a /proc file of a thread from offset 0 into buf: all of it
// when it fits (a seq file's first read returns at most a page, and these are
// shorter than buf). It is a raw system call, which the Go runtime does not
// hear of — no handing the P over, no waking sysmon, worth a few µs at
// each FUSE write — because it does not block: comm and stat take the
// thread's locks, syscall waits at most for a caller that is going to sleep
// to be off its CPU (wait_task_inactive).
func rawPread(fd int, buf []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)), 0, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}
