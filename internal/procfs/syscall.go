package procfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Syscall is the system call a thread is blocked in, read from
// /proc/<tid>/syscall.
//
// A FUSE server sees a write as offset and bytes. Two things user_events_data
// answers depend on are not in the request: whether the caller used write(2)
// or pwrite(2) — the FUSE kernel moves f_pos after each write(2), so a
// non-zero offset is normal for write(2) and EFAULT only for pwrite — and how
// many bytes the caller asked for when a fault cut its buffer short. The
// caller is blocked in that very system call while the server answers, so
// its arguments can be read. Reading them needs the ptrace access check
// (PTRACE_MODE_ATTACH_FSCREDS): root, or the caller's own uid with Yama's
// ptrace_scope at 0. The arguments are not decoded beyond the six raw
// words.
type Syscall struct {
	Nr   int       // the system call number (unix.SYS_WRITE, ...)
	Args [6]uint64 // its six argument registers
}

// ErrNotInSyscall says the thread was running or blocked outside a system
// call (a page fault, a stop): /proc shows "running" or an Nr of -1.
var ErrNotInSyscall = errors.New("procfs: thread is not in a system call")

// ReadSyscall returns the system call thread tid is in.
func ReadSyscall(tid int) (Syscall, error) {
	b, err := ReadFile(pidPath(tid, "syscall"))
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return Syscall{}, fmt.Errorf("procfs: reading thread %d's system call needs the right to ptrace it (root, or its uid with kernel.yama.ptrace_scope=0): %w", tid, err)
		}
		return Syscall{}, fmt.Errorf("procfs: %w", err)
	}
	return ParseSyscall(string(b))
}

// ParseSyscall reads the text of /proc/<tid>/syscall: "running", "-1 sp pc",
// or "nr a0 a1 a2 a3 a4 a5 sp pc" with the arguments in hexadecimal
// (proc_pid_syscall, fs/proc/base.c).
func ParseSyscall(text string) (Syscall, error) {
	text = strings.TrimSuffix(text, "\n")
	if text == "running" {
		return Syscall{}, ErrNotInSyscall
	}
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return Syscall{}, fmt.Errorf("procfs: empty syscall file: %w", unix.EINVAL)
	}
	nr, err := strconv.Atoi(fields[0])
	if err != nil {
		return Syscall{}, fmt.Errorf("procfs: bad system call number %q: %w", fields[0], unix.EINVAL)
	}
	if nr < 0 {
		if len(fields) != 3 {
			return Syscall{}, fmt.Errorf("procfs: syscall %q: want \"-1 sp pc\": %w", text, unix.EINVAL)
		}
		return Syscall{}, ErrNotInSyscall
	}
	if len(fields) != 9 {
		return Syscall{}, fmt.Errorf("procfs: syscall %q: want a number, six arguments, sp and pc: %w", text, unix.EINVAL)
	}
	c := Syscall{Nr: nr}
	for i := range c.Args {
		v, ok := strings.CutPrefix(fields[1+i], "0x")
		if !ok {
			return Syscall{}, fmt.Errorf("procfs: syscall argument %q is not 0x-hexadecimal: %w", fields[1+i], unix.EINVAL)
		}
		if c.Args[i], err = strconv.ParseUint(v, 16, 64); err != nil {
			return Syscall{}, fmt.Errorf("procfs: syscall argument %q: %w", fields[1+i], unix.EINVAL)
		}
	}
	return c, nil
}
