package stamp

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

//go:linkname nanotime runtime.nanotime
func nanotime() int64

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// Stamp is who wrote a record, where and when.
type Stamp struct {
	Time uint64 // CLOCK_MONOTONIC, nanoseconds
	PID  int32  // the process (the kernel's TGID)
	TID  int32  // the thread (the kernel's PID)
	CPU  uint32
}

// Take returns the caller's Stamp: [Now], [Pid], [Tid] and [CPU] read
// together, the thread and the CPU under one pin of the caller's P.
func Take() Stamp {
	t := Now()
	tid, cpu := TidCPU()
	return Stamp{Time: t, PID: pid, TID: tid, CPU: cpu}
}

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() uint64 { return uint64(nanotime()) }

var pid = int32(os.Getpid())

// Pid returns the process id, read once at start-up (see the package doc
// for why it does not change).
func Pid() int32 { return pid }

// CPU returns the CPU the calling thread runs on.
func CPU() uint32 {
	if !tidCache {
		return cpu()
	}
	_, c := TidCPU()
	return c
}

// Tid returns the id of the thread running the caller.
func Tid() int32 {
	if !tidCache {
		return int32(unix.Gettid())
	}
	p := procPin()
	tid, _, ok := pinnedTid(p)
	procUnpin()
	if !ok {
		return slowTid(p)
	}
	return tid
}

// refreshEvery bounds how long a slot answers without asking the kernel:
// after this many answers from the cache, the next lookup makes gettid(2)
// again, even for the same M (see the package doc for when an M changes
// threads). It costs 1.1 µs / 4096, a quarter of a nanosecond a lookup.
const refreshEvery = 1 << 12

// slot is one P's cache: the M it last saw, that M's thread id, how
// many answers it has given since it asked the kernel, and where the
// struct rseq this package registered for that thread holds its CPU (nil:
// read the CPU otherwise, cpuNoSlot). Only the goroutine
// that has the P pinned touches its slot, so there is never a concurrent
// access, and the scheduler's own synchronisation orders the goroutines
// that have the P one after another. The race detector cannot see that
// ordering, hence pinnedTid's go:norace; atomics would not do: a Store is
// an XCHG, a locked instruction, on every lookup. The padding keeps each
// P's slot on its own cache line.
type slot struct {
	m    uintptr
	tid  int32
	uses uint32
	cpu  *uint32 // in memory the kernel writes and nothing unmaps, never the Go heap's
	_    [64 - 24]byte
}

var (
	slots    atomic.Pointer[[]slot]
	growMu   sync.Mutex
	tidCache = curm() != 0 // the architecture can read the current M
)

func init() {
	s := make([]slot, max(runtime.GOMAXPROCS(0), runtime.NumCPU()))
	slots.Store(&s)
}

// TidCPU returns the calling thread's id and CPU, read together: the P is
// pinned, so the thread cannot change in between (the CPU can, as the
// package doc says).
func TidCPU() (int32, uint32) {
	if !tidCache {
		return int32(unix.Gettid()), cpu()
	}
	p := procPin()
	tid, rs, ok := pinnedTid(p)
	var c uint32
	if rs != nil {
		c = atomic.LoadUint32(rs)
	} else {
		c = cpuNoSlot()
	}
	procUnpin()
	if !ok {
		return slowTid(p), cpuNoSlot()
	}
	return tid, c
}

// pinnedTid looks the thread id, and where its CPU is to be read, up in P
// p's slot, p pinned; false if the cache has no slot for p.
//
//go:norace
func pinnedTid(p int) (int32, *uint32, bool) {
	s := *slots.Load()
	if p >= len(s) {
		return 0, nil, false
	}
	m := curm()
	e := &s[p]
	if e.m == m && e.uses < refreshEvery {
		e.uses++
		return e.tid, e.cpu, true
	}
	// Raw system calls: the goroutine holds its P pinned, and the
	// scheduler must not be told it is in a system call.
	t, _, _ := unix.RawSyscall(unix.SYS_GETTID, 0, 0, 0)
	e.m, e.tid, e.uses, e.cpu = m, int32(t), 0, nil
	if rseqMode == rseqOwn {
		e.cpu = rseqCPU(int32(t))
	}
	return int32(t), e.cpu, true
}

// slowTid answers for a P the cache has no slot for (GOMAXPROCS grew after
// start-up) with the system call, and makes room for that P.
func slowTid(p int) int32 {
	grow(p + 1)
	return int32(unix.Gettid())
}

func grow(n int) {
	growMu.Lock()
	defer growMu.Unlock()
	if len(*slots.Load()) >= n {
		return
	}
	s := make([]slot, n)
	slots.Store(&s)
}

// getcpuSyscall is the getcpu(2) system call.
func getcpuSyscall() uint32 {
	var c uint32
	_, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0)
	if e != 0 {
		// getcpu cannot fail with a valid pointer; CPU 0 is what a caller
		// would have to assume anyway.
		return 0
	}
	return c
}
