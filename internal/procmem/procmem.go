// Package procmem reads and writes another process's memory as the kernel's
// user_events reaches a task's memory: process_vm_readv and process_vm_writev
// (so a read-only mapping refuses a write, as it does the kernel's
// set_bit on the enable word), strndup_user's string rules, and single-bit
// updates of an enable word.
//
// A Mem is one process — one address space — pinned against pid reuse: it
// holds a pidfd (pidfd_open), which reports the process's exit whatever
// happens to its pid afterwards, and the 16 AT_RANDOM bytes the kernel put
// in the process's memory at exec, which a new program (exec, or another
// process under a recycled pid) does not have. Every access checks the pidfd
// after the system call, so a result that could have come from another
// process under the same pid is an ESRCH instead; SetBit also checks the
// AT_RANDOM bytes in the same read as the byte it changes, so it does not
// write into a program the process exec'd. A process whose main thread
// exited while others live on (its zombie has no memory) is reached through
// another of its threads.
//
// It does not ptrace, stop, or map anything of the process, and it does not
// follow forks or execs: package procevents tells of those.
//
// # Privilege
//
// process_vm_readv and process_vm_writev need ptrace access to the process
// (PTRACE_MODE_ATTACH_REALCREDS): root or CAP_SYS_PTRACE, or the same user
// where Yama's kernel.yama.ptrace_scope is 0. Without it every access is
// EPERM, and the error says so.
//
// # Differences from the kernel's access to a task's memory
//
//   - SetBit is a read-modify-write of the one byte holding the bit, with two
//     system calls: it is NOT atomic against the process's own concurrent
//     writes to that byte. The kernel's set_bit is a locked instruction, so a
//     process may update other bits of its enable word with atomic operations
//     while the kernel sets its bit; here such an update made between the
//     read and the write is lost (or the bit is). Updates from this package
//     (one Mem) are serialized among themselves. Enable words whose other bits
//     the process does not write are unaffected.
//   - The kernel faults a page in (and retries from a worker) where
//     process_vm_writev just fails: a page that is not present and cannot be
//     faulted in by the remote access is an error here.
//   - process_vm_readv and process_vm_writev wait for a page fault to be
//     served: memory the process mapped from a FUSE file whose server does
//     not answer, or registered with userfaultfd, blocks the access for as
//     long as that takes, where the kernel's enable-bit writer does not wait
//     (it faults the page in from a worker). So every access is bounded:
//     one that has not returned within StallLimit is given up as
//     ErrStalled (an EFAULT), its system call left to finish on a thread of
//     its own (on private buffers, so nothing the caller owns is written
//     late), and until that call returns, and for StallCooldown after, every
//     access to that process fails at once with ErrStalled: a hostile
//     process costs whoever waits for it (the caller whose enable or
//     registration writes its bits; package subsys writes them outside its
//     lock) at most StallLimit per StallCooldown, and one blocked thread.
//     A write that was given up may still land when the fault is served.
//   - Between the pidfd check before a write and the write itself a pid could
//     in theory be recycled (the pid space must wrap in that instant): the
//     check after the write then reports ESRCH, but the write has happened.
//     Likewise an exec in the instant between SetBit's read and its write.
package procmem

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AT_RANDOM is the auxv entry of the 16 random bytes the kernel puts on a
// new program's stack (include/uapi/linux/auxvec.h).
const atRandom = 25

const pageSize = 4096

// kcmpVM is KCMP_VM (include/uapi/linux/kcmp.h).
const kcmpVM = 1

var (
	// ErrExited is the error of a Mem whose process has exited: its pidfd
	// says so, so its pid may already be another process's.
	ErrExited = fmt.Errorf("the process has exited: %w", unix.ESRCH)
	// ErrReplaced is the error of a Mem whose process runs another program
	// now (it exec'd): its AT_RANDOM bytes changed, so its address space is
	// not the one this Mem was opened on.
	ErrReplaced = fmt.Errorf("the process exec'd another program (its AT_RANDOM bytes changed): %w", unix.ESRCH)
	// ErrNoNUL is ReadString's error when no NUL byte ends the string within
	// the bytes it may read: strndup_user's EINVAL.
	ErrNoNUL = fmt.Errorf("no NUL byte ends the string: %w", unix.EINVAL)
	// ErrClosed is the error of a closed Mem.
	ErrClosed = fmt.Errorf("procmem: closed: %w", unix.EBADF)
)

// Mem is one process's memory. Its methods are safe for concurrent use.
type Mem struct {
	pid        int
	randomAddr uint64
	random     [16]byte

	// via is the thread whose id process_vm_readv and writev are given:
	// the pid, until the main thread exits while others live on (its
	// zombie has no memory), then another thread of the process.
	via atomic.Int64

	mu    sync.RWMutex // Close takes it for writing: the pidfd stays open while in use
	pidfd int          // -1 once closed
	bitMu sync.Mutex   // serializes SetBit's read-modify-writes

	watchOnce sync.Once
	done      chan struct{} // closed when the process exits or m is closed
	watch     *os.File      // a dup of the pidfd in the runtime's poller; under mu
}

// Open opens process pid's memory. pid is a process ID (a thread group
// leader's id, the TGID), not another thread's.
func Open(pid int) (*Mem, error) { return OpenAllowed(pid, nil) }

// OpenAllowed is Open with a check of who the process is before anything
// of its memory is read (caps.User): allow is called with pid once
// the process is pinned by its pidfd, and its error is Open's; the process
// is then checked to be still alive, so that what allow looked at under pid
// was this process and not one that took its pid since. nil allows all.
func OpenAllowed(pid int, allow func(pid int) error) (*Mem, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("procmem: pid %d: %w", pid, unix.EINVAL)
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil, fmt.Errorf("procmem: process %d does not exist: %w", pid, err)
	case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
		// ENOENT since Linux 6.9, EINVAL before.
		return nil, fmt.Errorf("procmem: %d is not a process id (a thread of another process's? give its TGID): %w", pid, unix.EINVAL)
	case err != nil:
		return nil, fmt.Errorf("procmem: pidfd_open(%d): %w", pid, err)
	}
	m := &Mem{pid: pid, pidfd: fd}
	m.via.Store(int64(pid))
	if allow != nil {
		if err := allow(pid); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("procmem: %w", err)
		}
		if m.exitedNow() {
			unix.Close(fd)
			return nil, fmt.Errorf("procmem: process %d: %w", pid, ErrExited)
		}
	}
	addr, rnd, err := m.readRandom()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	m.randomAddr, m.random = addr, rnd
	return m, nil
}

// readRandom reads the AT_RANDOM address from /proc/pid/auxv and the bytes
// there, and checks that the process was alive throughout.
func (m *Mem) readRandom() (uint64, [16]byte, error) {
	var rnd [16]byte
	auxv, err := os.ReadFile("/proc/" + strconv.Itoa(m.pid) + "/auxv")
	gone := errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH)
	// A zombie leader's /proc/<pid> files belong to root (proc makes the
	// files of a task without memory root's), so to its own user the
	// leader's auxv is EACCES.
	refused := errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
	if (gone || refused || err == nil && len(auxv) == 0) && !m.exitedNow() {
		// The main thread exited (its auxv is empty, gone or root's)
		// while others live on: read another's.
		for _, tid := range m.threads() {
			if b, terr := os.ReadFile("/proc/" + strconv.Itoa(m.pid) + "/task/" + strconv.Itoa(tid) + "/auxv"); terr == nil && len(b) > 0 {
				auxv, err = b, nil
				break
			}
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return 0, rnd, fmt.Errorf("procmem: process %d: %w", m.pid, ErrExited)
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return 0, rnd, m.permError("read /proc/"+strconv.Itoa(m.pid)+"/auxv", err)
		}
		return 0, rnd, fmt.Errorf("procmem: process %d: %w", m.pid, err)
	}
	addr, ok := AuxvValue(auxv, atRandom)
	if !ok || addr == 0 {
		// A kernel thread, or a zombie whose auxv is empty.
		if m.exitedNow() {
			return 0, rnd, fmt.Errorf("procmem: process %d: %w", m.pid, ErrExited)
		}
		return 0, rnd, fmt.Errorf("procmem: process %d has no AT_RANDOM in its auxv (a kernel thread?): %w", m.pid, unix.ESRCH)
	}
	if _, err := m.rw(false, rnd[:], addr); err != nil {
		return 0, rnd, err
	}
	return addr, rnd, nil
}

// AuxvValue returns the value of auxv entry typ in b, the contents of
// /proc/pid/auxv: pairs of native words (type, value) ending with AT_NULL.
func AuxvValue(b []byte, typ uint64) (uint64, bool) {
	const w = int(unsafe.Sizeof(uintptr(0)))
	ne := binary.NativeEndian
	for i := 0; i+2*w <= len(b); i += 2 * w {
		var t, v uint64
		if w == 8 {
			t, v = ne.Uint64(b[i:]), ne.Uint64(b[i+w:])
		} else {
			t, v = uint64(ne.Uint32(b[i:])), uint64(ne.Uint32(b[i+w:]))
		}
		if t == 0 {
			break
		}
		if t == typ {
			return v, true
		}
	}
	return 0, false
}

// Pid is the process's id.
func (m *Mem) Pid() int { return m.pid }

// Random returns the AT_RANDOM address and bytes the Mem was opened with:
// what identifies the program the process runs.
func (m *Mem) Random() (uint64, [16]byte) { return m.randomAddr, m.random }

// exitedNow polls the pidfd: readable means the process has exited (it is
// a zombie or gone, so its pid may be reused once reaped). Called with mu
// held (either way).
func (m *Mem) exitedNow() bool {
	return m.pidfd < 0 || pollNow(m.pidfd)
}

// Exited reports whether the process has exited (or m is closed).
func (m *Mem) Exited() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.exitedNow()
}

// Check reports whether m still reaches the process and the program it was
// opened on: ErrExited if the process has exited, ErrReplaced if it exec'd
// (or its pid is now another process's), a permission error if it can no
// longer be read (it exec'd a setuid program, for example).
//
// It is one process_vm_readv of the 16 AT_RANDOM bytes at the address they
// were at: a new program has new random bytes, somewhere else, and the
// chance that its memory holds the old 16 at the old address is 2^-128.
func (m *Mem) Check() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return ErrClosed
	}
	var rnd [16]byte
	_, err := m.rw(false, rnd[:], m.randomAddr)
	switch {
	case errors.Is(err, ErrStalled):
		return err
	case errors.Is(err, unix.EFAULT):
		return fmt.Errorf("procmem: process %d: %w", m.pid, ErrReplaced)
	case err != nil:
		return err
	case rnd != m.random:
		return fmt.Errorf("procmem: process %d: %w", m.pid, ErrReplaced)
	}
	return nil
}

// GetFD duplicates the process's descriptor fd into this one
// (pidfd_getfd(2), close-on-exec), for a server that takes what its caller
// shares by descriptor number — the interposer's ring and table memfds —
// from the caller itself, so that nothing the caller says about who it is
// counts. It needs the access ReadAt needs (PTRACE_MODE_ATTACH_REALCREDS),
// and Linux 5.6. The process is checked afterwards to run still the
// program m was opened on (Check): a descriptor of a program it exec'd
// since is refused (ErrReplaced), and so is one of an exited process
// (ErrExited). A number the process has no descriptor for is EBADF.
func (m *Mem) GetFD(fd int) (int, error) {
	m.mu.RLock()
	if m.pidfd < 0 {
		m.mu.RUnlock()
		return -1, ErrClosed
	}
	nfd, err := unix.PidfdGetfd(m.pidfd, fd, 0)
	m.mu.RUnlock()
	switch {
	case errors.Is(err, unix.EPERM):
		return -1, m.permError("take a descriptor", err)
	case errors.Is(err, unix.ESRCH):
		return -1, fmt.Errorf("procmem: process %d: %w", m.pid, ErrExited)
	case errors.Is(err, unix.EBADF):
		return -1, fmt.Errorf("procmem: process %d has no descriptor %d: %w", m.pid, fd, err)
	case errors.Is(err, unix.ENOSYS):
		return -1, fmt.Errorf("procmem: pidfd_getfd needs Linux 5.6: %w", err)
	case err != nil:
		return -1, fmt.Errorf("procmem: pidfd_getfd(%d, %d): %w", m.pid, fd, err)
	}
	if err := m.Check(); err != nil {
		unix.Close(nfd)
		return -1, err
	}
	return nfd, nil
}

// ReadAt reads len(p) bytes at addr in the process. A read that stops at
// memory it cannot read returns the bytes read before it and an EFAULT
// error.
func (m *Mem) ReadAt(p []byte, addr uint64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return 0, ErrClosed
	}
	return m.rw(false, p, addr)
}

// WriteAt writes p at addr in the process. Memory the process cannot write
// (read-only or unmapped) stops the write with EFAULT; the bytes before it
// are written and counted.
func (m *Mem) WriteAt(p []byte, addr uint64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return 0, ErrClosed
	}
	if m.exitedNow() {
		return 0, fmt.Errorf("procmem: process %d: %w", m.pid, ErrExited)
	}
	return m.rw(true, p, addr)
}

// ReadV reads into p, in order, the process's memory at remote (an iovec
// array, at most 1024 long: UIO_MAXIOV), as ReadAt reads one range: a read
// that stops at memory it cannot read returns the bytes read before it and
// an EFAULT error.
func (m *Mem) ReadV(p []byte, remote []unix.RemoteIovec) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return 0, ErrClosed
	}
	return m.rwv(false, p, remote)
}

// rw is one process_vm_readv or process_vm_writev of p at addr, followed by
// the pidfd check that makes its result the process's. Called with mu held.
func (m *Mem) rw(write bool, p []byte, addr uint64) (int, error) {
	if addr+uint64(len(p)) < addr {
		return 0, fmt.Errorf("procmem: %s of %d bytes at %#x wraps around: %w", opName(write), len(p), addr, unix.EFAULT)
	}
	return m.rwv(write, p, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(p)}})
}

// rwv is rw of p at the remote iovecs (the first's address names the
// access in errors). Called with mu held.
func (m *Mem) rwv(write bool, p []byte, remote []unix.RemoteIovec) (int, error) {
	if len(p) == 0 || len(remote) == 0 {
		return 0, nil
	}
	op := opName(write)
	addr := uint64(remote[0].Base)
	n, err := m.vm(write, [][]byte{p}, remote)
	if m.exitedNow() {
		// The pid may have named another process during the call.
		return 0, fmt.Errorf("procmem: %s at %#x in process %d: %w", op, addr, m.pid, ErrExited)
	}
	switch {
	case err == nil && n == len(p):
		return n, nil
	case err == nil:
		return n, fmt.Errorf("procmem: %s of %d bytes at %#x in process %d stopped after %d: %w", op, len(p), addr, m.pid, n, unix.EFAULT)
	case errors.Is(err, ErrStalled):
		return 0, fmt.Errorf("procmem: %s of %d bytes at %#x in process %d: %w", op, len(p), addr, m.pid, err)
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return 0, m.permError(op+" memory", err)
	case errors.Is(err, unix.ESRCH):
		// The thread group leader is gone (it exited before its other
		// threads) or the process is exiting.
		return 0, fmt.Errorf("procmem: %s at %#x: process %d has no memory left (exiting, or its main thread exited): %w", op, addr, m.pid, err)
	case errors.Is(err, unix.EFAULT):
		what := "unmapped or not readable"
		if write {
			what = "unmapped or not writable"
		}
		return 0, fmt.Errorf("procmem: %s of %d bytes at %#x in process %d: the memory is %s: %w", op, len(p), addr, m.pid, what, err)
	default:
		return 0, fmt.Errorf("procmem: %s of %d bytes at %#x in process %d: %w", op, len(p), addr, m.pid, err)
	}
}

// opName names an access in errors.
func opName(write bool) string {
	if write {
		return "write"
	}
	return "read"
}

// vm is one process_vm_readv or process_vm_writev through the thread m.via
// names. When that thread has no memory (ESRCH: the main thread exited
// while others live on) and the process has not exited, it moves to
// another thread of the process. A thread's id is checked to be still the
// process's after the call, so that a thread that exited and whose id went
// to another process is not taken for it. Called with mu held.
func (m *Mem) vm(write bool, bufs [][]byte, remote []unix.RemoteIovec) (int, error) {
	call := func(tid int) (int, error) { return m.bounded(write, tid, bufs, remote) }
	tid := int(m.via.Load())
	n, err := call(tid)
	if tid != m.pid && !m.inProcess(tid) {
		n, err = 0, unix.ESRCH
	}
	if err != unix.ESRCH || m.exitedNow() {
		return n, err
	}
	for _, t := range m.threads() {
		if t == tid {
			continue
		}
		n, err = call(t)
		if t != m.pid && !m.inProcess(t) {
			continue
		}
		if err != unix.ESRCH {
			m.via.Store(int64(t))
			return n, err
		}
	}
	return n, err
}

// threads lists the process's threads (/proc/pid/task), the main thread
// last: it is the one whose exit brings a Mem here.
func (m *Mem) threads() []int {
	d, err := os.ReadDir("/proc/" + strconv.Itoa(m.pid) + "/task")
	if err != nil {
		return nil
	}
	var tids []int
	for _, e := range d {
		if t, err := strconv.Atoi(e.Name()); err == nil && t != m.pid {
			tids = append(tids, t)
		}
	}
	return append(tids, m.pid)
}

// inProcess reports whether thread tid is one of the process's now.
func (m *Mem) inProcess(tid int) bool {
	return unix.Access("/proc/"+strconv.Itoa(m.pid)+"/task/"+strconv.Itoa(tid), unix.F_OK) == nil
}

// permError explains a refused access.
func (m *Mem) permError(what string, err error) error {
	return fmt.Errorf("procmem: %s of process %d: not permitted: reading and writing another process's memory needs ptrace rights over it — run as root or with CAP_SYS_PTRACE, or as the process's own user with kernel.yama.ptrace_scope = 0 (sysctl), and the process must not be setuid or non-dumpable: %w", what, m.pid, err)
}

// ReadString reads the NUL-terminated string at addr as the kernel's
// strndup_user(addr, max) does, page by page, looking at no more than max
// bytes: memory unreadable before the NUL is EFAULT; no NUL within max bytes
// returns those max bytes and ErrNoNUL (EINVAL).
func (m *Mem) ReadString(addr uint64, max int) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return "", ErrClosed
	}
	var buf []byte
	for len(buf) < max {
		cur := addr + uint64(len(buf))
		chunk := min(int(pageSize-cur%pageSize), max-len(buf))
		start := len(buf)
		buf = append(buf, make([]byte, chunk)...)
		n, err := m.rw(false, buf[start:], cur)
		if i := bytes.IndexByte(buf[start:start+n], 0); i >= 0 {
			return string(buf[:start+i]), nil
		}
		if err != nil {
			return "", fmt.Errorf("procmem: string at %#x: %w", addr, err)
		}
	}
	return string(buf), fmt.Errorf("procmem: string at %#x: %d bytes: %w", addr, max, ErrNoNUL)
}

// SetBit sets (on) or clears bit of the 64-bit word at addr, leaving its
// other bits alone: subsys.Memory's contract as far as another process can
// keep it. It reads the byte holding the bit, together with the AT_RANDOM
// bytes (a process that exec'd is ErrReplaced and is not written), and
// writes the byte back changed if it needs changing. It is not atomic
// against the process's own writes to that byte (see the package doc).
// Memory the process cannot write — read-only, unmapped — is an error
// (subsys turns it into registration's ENOMEM).
func (m *Mem) SetBit(addr uint64, bit uint, on bool) error {
	if bit > 63 {
		return fmt.Errorf("procmem: bit %d of a 64-bit word: %w", bit, unix.EINVAL)
	}
	// The byte of a native-endian 64-bit word that holds bit.
	b := addr + uint64(bit/8)
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		b = addr + 7 - uint64(bit/8)
	}
	mask := byte(1) << (bit % 8)

	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.pidfd < 0 {
		return ErrClosed
	}
	m.bitMu.Lock()
	defer m.bitMu.Unlock()

	var rnd [16]byte
	var cur [1]byte
	remote := []unix.RemoteIovec{{Base: uintptr(m.randomAddr), Len: len(rnd)}, {Base: uintptr(b), Len: 1}}
	n, err := m.vm(false, [][]byte{rnd[:], cur[:]}, remote)
	if m.exitedNow() {
		return fmt.Errorf("procmem: set bit %d at %#x in process %d: %w", bit, addr, m.pid, ErrExited)
	}
	switch {
	case errors.Is(err, ErrStalled):
		return fmt.Errorf("procmem: set bit %d at %#x in process %d: %w", bit, addr, m.pid, err)
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return m.permError("set a bit in the memory", err)
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("procmem: set bit %d at %#x: process %d has no memory left (exiting, or its main thread exited): %w", bit, addr, m.pid, err)
	case err != nil && !errors.Is(err, unix.EFAULT):
		return fmt.Errorf("procmem: set bit %d at %#x in process %d: %w", bit, addr, m.pid, err)
	case n < len(rnd) || rnd != m.random:
		// The AT_RANDOM bytes are gone or changed: another program.
		return fmt.Errorf("procmem: set bit %d at %#x in process %d: %w", bit, addr, m.pid, ErrReplaced)
	case n < len(rnd)+1:
		return fmt.Errorf("procmem: set bit %d at %#x in process %d: the memory is unmapped or not readable: %w", bit, addr, m.pid, unix.EFAULT)
	}
	v := cur[0] &^ mask
	if on {
		v |= mask
	}
	// Written even when the bit already has its value: the kernel's
	// user_event_enabler_write always writes, so read-only memory fails
	// (ENOMEM at DIAG_IOCSREG, EFAULT at DIAG_IOCSUNREG) whatever the bit
	// was.
	cur[0] = v
	_, err = m.rw(true, cur[:], b)
	if err != nil {
		return fmt.Errorf("procmem: set bit %d at %#x: %w", bit, addr, err)
	}
	return nil
}

// SameVM reports whether m and other are the same address space (kcmp
// KCMP_VM): a child cloned with CLONE_VM shares its parent's. It needs ptrace
// rights over both (EPERM otherwise) and a kernel with kcmp (ENOSYS).
func (m *Mem) SameVM(other *Mem) (bool, error) {
	if m == other {
		return true, nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	other.mu.RLock()
	defer other.mu.RUnlock()
	if m.pidfd < 0 || other.pidfd < 0 {
		return false, ErrClosed
	}
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(m.via.Load()), uintptr(other.via.Load()), kcmpVM, 0, 0, 0)
	if m.exitedNow() || other.exitedNow() {
		return false, fmt.Errorf("procmem: kcmp(%d, %d): %w", m.pid, other.pid, ErrExited)
	}
	switch {
	case errno == unix.EPERM || errno == unix.EACCES:
		return false, m.permError("compare the address space", errno)
	case errno != 0:
		return false, fmt.Errorf("procmem: kcmp(%d, %d, KCMP_VM): %w", m.pid, other.pid, errno)
	}
	return r == 0, nil
}

// Done returns a channel that is closed when the process exits (all its
// threads) or m is closed. The first call starts a goroutine that waits in
// the runtime's poller on the pidfd, which the kernel wakes at the exit.
func (m *Mem) Done() <-chan struct{} {
	m.watchOnce.Do(m.startWatch)
	return m.done
}

func (m *Mem) startWatch() {
	m.done = make(chan struct{})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pidfd < 0 {
		close(m.done)
		return
	}
	// The dup shares the file description, and so PIDFD_NONBLOCK, which
	// makes os.NewFile put it in the poller.
	fd, err := unix.FcntlInt(uintptr(m.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		// No descriptor to spare: fall back to polling with the pidfd
		// itself from a goroutine that holds no lock while it waits.
		go func() {
			defer close(m.done)
			for !m.Exited() {
				m.waitExit()
			}
		}()
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	m.watch = f
	go func() {
		defer close(m.done)
		rc, err := f.SyscallConn()
		if err == nil {
			err = rc.Read(func(fd uintptr) bool { return pollNow(int(fd)) })
		}
		if err != nil && !errors.Is(err, os.ErrClosed) {
			// Not pollable after all: wait in poll(2) on a thread.
			for !m.Exited() {
				m.waitExit()
			}
		}
	}()
}

// waitExit waits in poll(2) on the pidfd for up to a second (so that a
// Close is seen).
func (m *Mem) waitExit() {
	m.mu.RLock()
	fd := m.pidfd
	if fd < 0 {
		m.mu.RUnlock()
		return
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	m.mu.RUnlock()
	_, _ = unix.Poll(fds, 1000)
}

// pollNow reports whether pidfd fd is readable: the process has exited.
func pollNow(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0
	}
}

// Close closes the pidfd. Operations afterwards are ErrClosed; Done's
// channel is closed.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pidfd < 0 {
		return nil
	}
	if m.watch != nil {
		m.watch.Close()
	}
	err := unix.Close(m.pidfd)
	m.pidfd = -1
	return err
}

// StallLimit bounds how long one access to a process's memory waits for
// its page faults to be served; StallCooldown is how long, after such an
// access finally returned, the process's memory stays refused (see the
// package doc). Variables so that tests may shorten them.
var (
	StallLimit    = time.Second
	StallCooldown = 10 * time.Second
)

// ErrStalled is the error of an access given up after StallLimit, or
// refused because an earlier one was: the process's memory waits for a
// page fault nobody serves. It is an EFAULT, as the kernel's user_events
// answers memory it cannot fault in.
var ErrStalled = fmt.Errorf("procmem: the process's memory did not answer: a page fault there was not served within the limit (userfaultfd memory, or a file on a FUSE mount that does not answer): %w", unix.EFAULT)

// stalls are the processes (by pid) with an access given up: how many are
// still in their system call, and until when the process is refused.
var stalls = struct {
	mu sync.Mutex
	m  map[int]*stall
}{m: map[int]*stall{}}

type stall struct {
	pending int
	until   time.Time
}

// stalled reports whether accesses to pid are refused now.
func stalled(pid int) bool {
	stalls.mu.Lock()
	defer stalls.mu.Unlock()
	st := stalls.m[pid]
	if st == nil {
		return false
	}
	if st.pending == 0 && time.Now().After(st.until) {
		delete(stalls.m, pid)
		return false
	}
	return true
}

// bounded is one process_vm_readv or process_vm_writev of bufs at remote
// through thread tid, retried on EINTR, given up after StallLimit. The
// system call works on copies of bufs, copied back (a read) only if it
// returns in time.
func (m *Mem) bounded(write bool, tid int, bufs [][]byte, remote []unix.RemoteIovec) (int, error) {
	if stalled(m.pid) {
		return 0, ErrStalled
	}
	priv := make([][]byte, len(bufs))
	local := make([]unix.Iovec, 0, len(bufs))
	for i, b := range bufs {
		priv[i] = make([]byte, len(b))
		if write {
			copy(priv[i], b)
		}
		if len(b) > 0 {
			local = append(local, unix.Iovec{Base: &priv[i][0]})
			local[len(local)-1].SetLen(len(b))
		}
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		for {
			var n int
			var err error
			if write {
				n, err = unix.ProcessVMWritev(tid, local, remote, 0)
			} else {
				n, err = unix.ProcessVMReadv(tid, local, remote, 0)
			}
			if err != unix.EINTR {
				done <- result{n, err}
				return
			}
		}
	}()
	t := time.NewTimer(StallLimit)
	defer t.Stop()
	select {
	case r := <-done:
		if !write && r.n > 0 {
			left := r.n
			for i, b := range bufs {
				k := copy(b, priv[i][:min(left, len(b))])
				left -= k
				if left == 0 {
					break
				}
			}
		}
		return r.n, r.err
	case <-t.C:
	}
	stalls.mu.Lock()
	st := stalls.m[m.pid]
	if st == nil {
		st = &stall{}
		stalls.m[m.pid] = st
	}
	st.pending++
	stalls.mu.Unlock()
	go func() {
		<-done
		stalls.mu.Lock()
		st.pending--
		st.until = time.Now().Add(StallCooldown)
		stalls.mu.Unlock()
	}()
	return 0, ErrStalled
}
