package stamp

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The CPU from rseq(2): a thread that registered a struct rseq has the
// kernel write the CPU it runs on into the struct's cpu_id before every
// return to user space that follows a migration or preemption, so one load
// reads what getcpu(2) would answer (see the package doc).

const (
	// rseqSize is the original struct rseq: cpu_id_start, cpu_id,
	// rseq_cs, flags, padded to its 32-byte alignment.
	rseqSize = 32
	// rseqSig is the signature the kernel checks before an abort handler;
	// this package registers no critical sections, so it is never used.
	// It is glibc's x86 value, for anyone reading the registration.
	rseqSig = 0x53053053
	// rseqThreads bounds the threads this package registers its own
	// struct rseq for; the threads beyond use LSL.
	rseqThreads = 1024
	// archGetFS is arch_prctl's ARCH_GET_FS: the thread pointer, from
	// which the C library's struct rseq lies at a fixed offset.
	archGetFS = 0x1003
	// probeWindow is how far from the thread pointer, either way, the
	// C library's struct rseq is looked for: glibc 2.35–2.39 keep it in
	// struct pthread, at the thread pointer (2336 bytes after it in
	// Debian's 2.36); later ones in the static TLS block, before it.
	probeWindow = 16 << 10

	// cpu_id values the kernel and glibc use before a registration
	// worked: RSEQ_CPU_ID_UNINITIALIZED, RSEQ_CPU_ID_REGISTRATION_FAILED.
	// Any value of 1<<31 or more is one of them.
	rseqCPUInvalid = 1 << 31
)

// How the CPU is read.
const (
	rseqNone = iota // LSL, or getcpu(2)
	rseqOwn         // a struct rseq this package registers per thread
	rseqLibc        // the one the C library registered per thread
)

// rseqLens are the lengths a C library may have registered its struct
// rseq with: 32, the original struct, and larger ones for the
// extensible ABI of Linux 6.3 and glibc 2.40.
var rseqLens = [...]uintptr{32, 64, 128, 256}

var (
	rseqMode int
	// rseqLibcOff is where the C library's struct rseq is from the thread
	// pointer, and rseqLibcLen the length it registered it with, in
	// rseqLibc mode.
	rseqLibcOff int
	rseqLibcLen uintptr
	// rseqTids and rseqAreas are the own mode's table: the struct rseq at
	// rseqAreas + i*rseqSize belongs to the thread whose id rseqTids[i]
	// holds. The areas are mmap'd, never unmapped: the kernel writes a
	// thread's for as long as the thread lives, and the GC never moves or
	// frees them. A slot, once claimed, stays with its thread id; a new
	// thread that reuses the id of one that exited registers the same
	// area, which the exited one no longer has.
	rseqTids  [rseqThreads]atomic.Int32
	rseqAreas unsafe.Pointer
)

func init() { rseqMode = rseqSetup() }

// rseqSetup chooses the mode, on this thread: this package's own struct
// rseq when the kernel takes its registration (no one registered one
// before: a Go program without cgo, or glibc told not to); else the C
// library's, when it can be found (rseqFindLibc); else none. Whichever it
// chooses is then checked against getcpu(2), as LSL is.
func rseqSetup() int {
	if !tidCache {
		return rseqNone
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, err := unix.MmapPtr(-1, 0, nil, rseqThreads*rseqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return rseqNone
	}
	rseqAreas = a
	tid := int32(unix.Gettid())
	mode := rseqOwn
	rseqMode = rseqOwn
	p := rseqCPU(tid)
	if p == nil && rseqFindLibc() {
		mode = rseqLibc
		rseqMode = rseqLibc
		p = rseqCPU(tid)
	}
	rseqMode = rseqNone
	if p == nil {
		return rseqNone
	}
	for range 100 {
		before := getcpuSyscall()
		c := atomic.LoadUint32(p)
		after := getcpuSyscall()
		if before == after {
			if c != before {
				return rseqNone
			}
			return mode
		}
	}
	return mode
}

// rseqFindLibc finds the struct rseq the C library registered for this
// thread, as an offset from the thread pointer, without asking the C
// library (that would take cgo): it reads the memory around the thread
// pointer (with process_vm_readv, which fails where a load would fault),
// takes each 32-byte-aligned place that looks like a struct rseq of this
// CPU — cpu_id_start and cpu_id both the CPU getcpu(2) says, no critical
// section — and asks the kernel whether it is the thread's registered
// one: rseq(2) with that address answers EBUSY (same signature) or EPERM
// (another one) for the registered area and length, EINVAL for anything
// else. So the answer is the kernel's, not a guess.
func rseqFindLibc() bool {
	tp := threadPointer()
	if tp == nil || tpSelf() != tp {
		// Not a thread of a C library that keeps its thread pointer at
		// FS:0, where the fast path reads it.
		return false
	}
	// Page by page: a page that cannot be read (a hole around the main
	// thread's TLS) leaves the others usable.
	const page = 4096
	lo := unsafe.Add(tp, -probeWindow)
	lo = unsafe.Add(lo, -int(uintptr(lo)%page))
	var buf [2*probeWindow + page]byte
	var readable [len(buf) / page]bool
	pid := unix.Getpid()
	for i := range readable {
		local := []unix.Iovec{{Base: &buf[i*page], Len: page}}
		// The remote range as an address: it is never dereferenced here.
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Add(lo, i*page)), Len: page}}
		n, err := unix.ProcessVMReadv(pid, local, remote, 0)
		readable[i] = err == nil && n == page
	}
	cpu := getcpuSyscall()
	// The original length first: a CPU 0 makes zeroed memory look like
	// candidates, each a system call to rule out.
	for _, l := range rseqLens {
		for o := 0; o+rseqSize <= len(buf); o += 32 {
			if !readable[o/page] {
				continue
			}
			w := buf[o:]
			cpuStart := *(*uint32)(unsafe.Pointer(&w[0]))
			cpuID := *(*uint32)(unsafe.Pointer(&w[4]))
			cs := *(*uint64)(unsafe.Pointer(&w[8]))
			if cpuStart != cpu || cpuID != cpu || cs != 0 {
				continue
			}
			off := o - int(uintptr(tp)-uintptr(lo))
			if registered(unsafe.Add(tp, off), l) {
				rseqLibcOff, rseqLibcLen = off, l
				return true
			}
		}
	}
	return false
}

// registered says whether area, of length l, is the calling thread's
// registered struct rseq, by the kernel's answer to registering it again.
func registered(area unsafe.Pointer, l uintptr) bool {
	_, _, e := unix.RawSyscall6(unix.SYS_RSEQ, uintptr(area), l, 0, rseqSig, 0, 0)
	return e == unix.EBUSY || e == unix.EPERM
}

// threadPointer is the calling thread's FS base: arch_prctl(ARCH_GET_FS).
func threadPointer() unsafe.Pointer {
	var tp unsafe.Pointer
	if _, _, e := unix.RawSyscall(unix.SYS_ARCH_PRCTL, archGetFS, uintptr(unsafe.Pointer(&tp)), 0); e != 0 {
		return nil
	}
	return tp
}

// rseqCPU returns the address of the calling thread's cpu_id, tid its id,
// registering the thread's struct rseq first in the own mode; nil when the
// thread has none the package can use. It makes raw system calls only: the
// caller may hold its P pinned.
func rseqCPU(tid int32) *uint32 {
	var p *uint32
	switch rseqMode {
	case rseqLibc:
		// Read on every call at the calling thread's own thread pointer
		// (rseqLibcCPU): no address is kept, so none can outlive its
		// thread. Here only for the start-up check.
		tp := threadPointer()
		if tp == nil || !registered(unsafe.Add(tp, rseqLibcOff), rseqLibcLen) {
			return nil
		}
		p = (*uint32)(unsafe.Add(tp, rseqLibcOff+4))
	case rseqOwn:
		area := rseqArea(tid)
		if area == nil {
			return nil
		}
		// EBUSY: this very area is registered for this thread already
		// (the thread's M came back to a P). EINVAL: the thread has
		// another one, not ours to read.
		_, _, e := unix.RawSyscall6(unix.SYS_RSEQ, uintptr(area), rseqSize, 0, rseqSig, 0, 0)
		if e != 0 && e != unix.EBUSY {
			return nil
		}
		p = (*uint32)(unsafe.Add(area, 4))
	default:
		return nil
	}
	if atomic.LoadUint32(p) >= rseqCPUInvalid {
		return nil
	}
	return p
}

// cpuNoSlot is the CPU when the P's slot has no struct rseq to read:
// glibc's at the calling thread's thread pointer in rseqLibc mode, while
// its cpu_id says the registration holds; else LSL or getcpu(2).
func cpuNoSlot() uint32 {
	if rseqMode == rseqLibc {
		if c := tpLoad32(rseqLibcOff + 4); c < rseqCPUInvalid {
			return c
		}
	}
	return cpu()
}

// rseqArea finds the own mode's struct rseq for thread tid, claiming a
// free one if it has none; nil when all are taken.
func rseqArea(tid int32) unsafe.Pointer {
	start := uint32(tid) * 2654435761 % rseqThreads // Knuth's multiplicative hash
	for i := range uint32(rseqThreads) {
		j := (start + i) % rseqThreads
		s := &rseqTids[j]
		v := s.Load()
		if v == 0 && s.CompareAndSwap(0, tid) {
			v = tid
		}
		if v == tid {
			return unsafe.Add(rseqAreas, uintptr(j)*rseqSize)
		}
	}
	return nil
}

func rseqInUse() string {
	switch rseqMode {
	case rseqOwn:
		return "own"
	case rseqLibc:
		return "libc"
	}
	return "none"
}
