package stamp

import (
	"runtime"
	"unsafe"
)

// lsl returns the limit of the vDSO's per-CPU segment and whether the
// segment exists (LSL set ZF).
func lsl() (limit uint32, ok bool)

// curm returns the current goroutine's M (g.m), as a key only: it is
// never dereferenced.
func curm() uintptr

// tpSelf returns the word at FS:0, which in a thread of glibc is the
// thread pointer itself; tpLoad32 loads the 32-bit word off bytes from it.
// Only for rseqLibc mode, which checks tpSelf against arch_prctl first.
func tpSelf() unsafe.Pointer
func tpLoad32(off int) uint32

// cpunodeMask is VDSO_CPUNODE_MASK: the CPU's bits of the segment limit.
const cpunodeMask = 0xfff

var useLSL = lslWorks()

func cpu() uint32 {
	if useLSL {
		l, _ := lsl()
		return l & cpunodeMask
	}
	return getcpuSyscall()
}

// lslWorks checks LSL against getcpu(2) on one thread: a sample counts
// when getcpu gave the same CPU before and after LSL (no migration in
// between); one disagreeing sample is enough to give LSL up.
func lslWorks() bool {
	if runtime.NumCPU() > cpunodeMask+1 {
		return false
	}
	if _, ok := lsl(); !ok {
		return false
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range 100 {
		before := getcpuSyscall()
		l, ok := lsl()
		after := getcpuSyscall()
		if !ok {
			return false
		}
		if before == after {
			return l&cpunodeMask == before
		}
	}
	// The thread never sat still: keep what the kernel's own vDSO does.
	return true
}

func lslInUse() bool { return useLSL }
