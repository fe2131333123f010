package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

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
// call (a page fault, a stop, a kernel worker such as io_uring's): /proc
// shows "running" or an Nr of -1.
var ErrNotInSyscall = errors.New("procfs: thread is not in a system call")

// ErrRunning is ErrNotInSyscall for "running": the thread was on its way
// (TASK_RUNNING), which the kernel's task_current_syscall answers without
// looking (-EAGAIN). A thread known to be in a blocking call — a FUSE caller
// whose request the server holds, which may have queued it and woken the
// server but not yet gone to sleep — is worth reading again.
var ErrRunning = fmt.Errorf("procfs: thread is running: %w", ErrNotInSyscall)

// ReadSyscall returns the system call thread tid is in.
func ReadSyscall(tid int) (Syscall, error) {
	b, err := ReadFile(pidPath(tid, "syscall"))
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return Syscall{}, fmt.Errorf("procfs: reading thread %d's system call needs the right to ptrace it (root, or its uid with kernel.yama.ptrace_scope=0): %w", tid, err)
		}
		return Syscall{}, fmt.Errorf("procfs: %w", err)
	}
	return ParseSyscall(b)
}

// ParseSyscall reads the text of /proc/<tid>/syscall: "running", "-1 sp pc",
// or "nr a0 a1 a2 a3 a4 a5 sp pc" with the arguments in hexadecimal
// (proc_pid_syscall, fs/proc/base.c: one space between fields, a newline at
// the end). It
// allocates nothing but its errors: a FUSE server parses it at every write.
func ParseSyscall(text []byte) (Syscall, error) {
	if n := len(text); n > 0 && text[n-1] == '\n' {
		text = text[:n-1]
	}
	if string(text) == "running" {
		return Syscall{}, ErrRunning
	}
	var fields [9][]byte
	nf := 0
	for rest := text; len(rest) > 0; {
		i := 0
		for i < len(rest) && rest[i] != ' ' {
			i++
		}
		if i == 0 || nf == len(fields) {
			return Syscall{}, fmt.Errorf("procfs: syscall %q: want a number, six arguments, sp and pc, one space apart: %w", text, unix.EINVAL)
		}
		fields[nf], nf = rest[:i], nf+1
		rest = rest[i:]
		if len(rest) > 0 {
			rest = rest[1:]
			if len(rest) == 0 {
				return Syscall{}, fmt.Errorf("procfs: syscall %q: a space at the end: %w", text, unix.EINVAL)
			}
		}
	}
	if nf == 0 {
		return Syscall{}, fmt.Errorf("procfs: syscall empty syscall file: %w", unix.EINVAL)
	}
	nr, err := strconv.Atoi(string(fields[0])) // no allocation: the conversion does not escape
	if err != nil {
		return Syscall{}, fmt.Errorf("procfs: syscall bad system call number %q: %w", fields[0], unix.EINVAL)
	}
	if nr < 0 {
		if nf != 3 {
			return Syscall{}, fmt.Errorf("procfs: syscall %q: want \"-1 sp pc\": %w", text, unix.EINVAL)
		}
		return Syscall{}, ErrNotInSyscall
	}
	if nf != 9 {
		return Syscall{}, fmt.Errorf("procfs: syscall %q: want a number, six arguments, sp and pc: %w", text, unix.EINVAL)
	}
	c := Syscall{Nr: nr}
	for i := range c.Args {
		v, ok := bytes.CutPrefix(fields[1+i], []byte("0x"))
		if !ok {
			return Syscall{}, fmt.Errorf("procfs: syscall argument %q is not 0x-hexadecimal: %w", fields[1+i], unix.EINVAL)
		}
		if c.Args[i], ok = parseHex(v); !ok {
			return Syscall{}, fmt.Errorf("procfs: syscall argument %q: %w", fields[1+i], unix.EINVAL)
		}
	}
	return c, nil
}

// parseHex reads 1 to 16 lower- or upper-case hexadecimal digits.
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}
