//go:build cgo && amd64

package stamp

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	// The C library in the test binary, as in any cgo program that uses
	// net or os/user: glibc 2.35+ then registers a struct rseq for every
	// thread, and the CPU must come from it.
	_ "runtime/cgo"
)

// When something else registered a struct rseq for the threads (glibc),
// the package finds it — the kernel confirms the address — and reads the
// CPU there.
func TestRseqLibcFound(t *testing.T) {
	if os.Getenv(wantRseqEnv) != "" || !rseqAvailable() {
		t.Skip("the C library's registration is off here, or the kernel has no rseq")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// A registration of a fresh area fails with EINVAL when the thread has
	// another one already.
	a, err := unix.MmapPtr(-1, 0, nil, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	_, _, e := unix.RawSyscall6(unix.SYS_RSEQ, uintptr(a), rseqSize, 0, rseqSig, 0, 0)
	if e == 0 {
		// No one had registered: undo ours (the area is then left mapped).
		unix.RawSyscall6(unix.SYS_RSEQ, uintptr(a), rseqSize, 1, rseqSig, 0, 0) // RSEQ_FLAG_UNREGISTER
		t.Skip("the C library registered no struct rseq (not glibc 2.35+)")
	}
	if e != unix.EINVAL {
		t.Fatalf("rseq(2) of a fresh area: %v", e)
	}
	if rseqInUse() != "libc" {
		t.Fatalf("the thread has a struct rseq registered by someone else, and the CPU is read from %q", rseqInUse())
	}
	p := rseqCPU(int32(unix.Gettid()))
	if p == nil {
		t.Fatal("no struct rseq found for this thread")
	}
	t.Logf("the C library's struct rseq is %d bytes from the thread pointer (length %d); this thread's at %p", rseqLibcOff, rseqLibcLen, unsafe.Add(unsafe.Pointer(p), -4))
}
