package stamp

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/stamp/internal/libcrseq"
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

var (
	rseqMode int
	// rseqLibcOff is where the C library's struct rseq is from the thread
	// pointer (glibc's __rseq_offset), in rseqLibc mode.
	rseqLibcOff int
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

// rseqSetup chooses the mode: the C library's struct rseq when it says it
// registered one big enough to hold cpu_id; else this package's own, when
// the kernel takes the registration on this thread; else none. Whichever
// it chooses is then checked against getcpu(2), as LSL is.
func rseqSetup() int {
	if !tidCache {
		return rseqNone
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	mode := rseqNone
	if off, size, ok := libcrseq.Area(); ok && size >= 8 {
		mode, rseqLibcOff = rseqLibc, off
	} else {
		a, err := unix.MmapPtr(-1, 0, nil, rseqThreads*rseqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return rseqNone
		}
		rseqAreas, mode = a, rseqOwn
	}
	rseqMode = mode
	p := rseqCPU(int32(unix.Gettid()))
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

// rseqCPU returns the address of the calling thread's cpu_id, tid its id,
// registering the thread's struct rseq first in the own mode; nil when the
// thread has none the package can use. It makes raw system calls only: the
// caller may hold its P pinned.
func rseqCPU(tid int32) *uint32 {
	var p *uint32
	switch rseqMode {
	case rseqLibc:
		var tp unsafe.Pointer
		if _, _, e := unix.RawSyscall(unix.SYS_ARCH_PRCTL, archGetFS, uintptr(unsafe.Pointer(&tp)), 0); e != 0 || tp == nil {
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
