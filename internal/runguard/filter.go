package runguard

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls the filter hands to the supervisor, by index in arch.nrs.
const (
	callPerfEventOpen = iota
	callMount
	callFsopen
	callSendfile
	callSendfile64 // i386's; the other ABIs have one sendfile and repeat it here
	callSplice
	callExecve
	callExecveat
	callMmap // notified only for a shared mapping of a file (mmapFlags); compared first
	nCalls
)

// mmapFlags: an mmap is notified only when its flags' MAP_TYPE and
// MAP_ANONYMOUS bits say a shared mapping of a file (MAP_SHARED or
// MAP_SHARED_VALIDATE): the only mapping of a perf event's ring. Private and
// anonymous mappings — nearly all of a program's — stay the kernel's
// alone, decided in the filter.
const (
	mmapFlagsMask = 0x0f | unix.MAP_ANONYMOUS
	offMmapFlags  = 16 + 3*8 // seccomp_data.args[3], its low word (little-endian)
)

// arch is one system call ABI the filter knows: its AUDIT_ARCH, the bits
// cleared from a call's number before it is compared (x32's
// __X32_SYSCALL_BIT), and the numbers of the calls, in call order.
type arch struct {
	audit uint32
	mask  uint32
	nrs   [nCalls]uint32
}

// callOf returns which call (arch, nr) is, or -1.
func callOf(audit uint32, nr int32) int {
	for _, a := range arches {
		if a.audit != audit {
			continue
		}
		for c, n := range a.nrs {
			if uint32(nr)&^a.mask == n {
				return c
			}
		}
	}
	return -1
}

// Classic BPF, as seccomp runs it.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJa     = unix.BPF_JMP | unix.BPF_JA
	bpfAndK   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K

	// offsets in struct seccomp_data
	offNr   = 0
	offArch = 4
)

// program is the filter: for each known ABI, its guarded calls go to the
// supervisor; every other call, and every call of an ABI it does not know,
// is allowed.
func program() []unix.SockFilter {
	var p []unix.SockFilter
	size := 0
	for _, a := range arches {
		size += blockLen(a)
	}
	allow, notify := size, size+1
	for _, a := range arches {
		start := len(p)
		p = append(p,
			unix.SockFilter{Code: bpfLdAbsW, K: offArch},
			unix.SockFilter{Code: bpfJeqK, K: a.audit, Jt: 0, Jf: uint8(blockLen(a) - 2)},
			unix.SockFilter{Code: bpfLdAbsW, K: offNr})
		if a.mask != 0 {
			p = append(p, unix.SockFilter{Code: bpfAndK, K: ^a.mask})
		}
		// mmap first, the call of these a program makes most: over the
		// other calls' compares and the allow to the flags check.
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: a.nrs[callMmap], Jt: uint8(nCalls - 1 + 1)})
		for c, nr := range a.nrs {
			if c == callMmap {
				continue
			}
			p = append(p, unix.SockFilter{Code: bpfJeqK, K: nr, Jt: uint8(notify - len(p) - 1)})
		}
		p = append(p, unix.SockFilter{Code: bpfJa, K: uint32(allow - len(p) - 1)})
		// mmap: notify a shared mapping of a file only.
		p = append(p,
			unix.SockFilter{Code: bpfLdAbsW, K: offMmapFlags},
			unix.SockFilter{Code: bpfAndK, K: mmapFlagsMask})
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: unix.MAP_SHARED, Jt: uint8(notify - len(p) - 1)})
		p = append(p, unix.SockFilter{Code: bpfJeqK, K: unix.MAP_SHARED_VALIDATE, Jt: uint8(notify - len(p) - 1)})
		p = append(p, unix.SockFilter{Code: bpfJa, K: uint32(allow - len(p) - 1)})
		if len(p)-start != blockLen(a) {
			panic("runguard: block length")
		}
	}
	return append(p,
		unix.SockFilter{Code: bpfRetK, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: bpfRetK, K: unix.SECCOMP_RET_USER_NOTIF})
}

func blockLen(a arch) int {
	n := 3 + nCalls + 1 + 5
	if a.mask != 0 {
		n++
	}
	return n
}

// Install puts the filter on the calling thread and returns its listener
// (close-on-exec), which the supervisor reads with [Guard.Serve]. The
// caller must hold its thread (runtime.LockOSThread) until it execs the
// command from it: a seccomp filter belongs to the thread that installs it
// and to the threads and programs it starts. Before Serve runs, a guarded
// call of that thread blocks.
func Install() (int, error) {
	if len(arches) == 0 {
		return -1, fmt.Errorf("runguard: no seccomp filter for %s: %w", runtime.GOARCH, unix.ENOSYS)
	}
	prog := program()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// SPEC_ALLOW: a filter otherwise turns on the speculative store bypass
	// mitigation for the command and all it starts, which slows its every
	// instruction, for a guard that is no security boundary.
	//
	// WAIT_KILLABLE_RECV (Linux 5.19): once the guard has received a call,
	// only a fatal signal ends the caller's wait. Without it, a signal
	// could end the wait of a splice whose pages the guard had just put
	// in the caller's pipe: the caller never hears how many, and they are
	// lost there (tracing.go). The guard ends the waits a splice does
	// itself when the caller has a signal to take (waitFor), as the
	// kernel's interruptible waits end; a kernel without the flag says
	// EINVAL, and the filter goes on without it.
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW)
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		flags|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, uintptr(unsafe.Pointer(&fprog)))
	if errno == unix.EINVAL {
		fd, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	}
	runtime.KeepAlive(prog)
	if errno != 0 {
		err := fmt.Errorf("runguard: installing the seccomp filter: %w", errno)
		if errors.Is(errno, unix.EINVAL) {
			err = fmt.Errorf("%w (the kernel has no seccomp user notification: Linux 5.0 or later, CONFIG_SECCOMP_FILTER)", err)
		}
		return -1, err
	}
	return int(fd), nil
}
