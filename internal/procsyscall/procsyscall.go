// Package procsyscall reads which system call a blocked thread is in, and its
// arguments, from /proc/<tid>/syscall.
//
// A FUSE server sees a write as offset and bytes. Two things user_events_data
// answers depend on are not in the request: whether the caller used write(2)
// or pwrite(2) — the FUSE kernel moves f_pos after each write(2), so a
// non-zero offset is normal for write(2) and EFAULT only for pwrite — and how
// many bytes the caller asked for when a fault cut its buffer short. The
// caller is blocked in that very system call while the server answers, so
// its arguments can be read. Reading them needs the ptrace access check
// (PTRACE_MODE_ATTACH_FSCREDS): root, or the caller's own uid with Yama's
// ptrace_scope at 0.
//
// It does not decode arguments beyond the six raw words.
package procsyscall

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Call is a system call a thread is blocked in.
type Call struct {
	Nr   int       // the system call number (unix.SYS_WRITE, ...)
	Args [6]uint64 // its six argument registers
}

// ErrNotInSyscall says the thread was running or blocked outside a system
// call (a page fault, a stop, a kernel worker such as io_uring's): /proc
// shows "running" or an Nr of -1.
var ErrNotInSyscall = errors.New("procsyscall: thread is not in a system call")

// ErrRunning is ErrNotInSyscall for "running": the thread was on its way
// (TASK_RUNNING), which the kernel's task_current_syscall answers without
// looking (-EAGAIN). A thread known to be in a blocking call — a FUSE caller
// whose request the server holds, which may have queued it and woken the
// server but not yet gone to sleep — is worth reading again.
var ErrRunning = fmt.Errorf("procsyscall: thread is running: %w", ErrNotInSyscall)

// Read returns the system call thread tid is in.
func Read(tid int) (Call, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return Call{}, fmt.Errorf("procsyscall: reading thread %d's system call needs the right to ptrace it (root, or its uid with kernel.yama.ptrace_scope=0): %w", tid, err)
		}
		return Call{}, fmt.Errorf("procsyscall: %w", err)
	}
	return Parse(b)
}

// Parse reads the text of /proc/<tid>/syscall: "running", "-1 sp pc",
// or "nr a0 a1 a2 a3 a4 a5 sp pc" with the arguments in hexadecimal
// (proc_pid_syscall: one space between fields, a newline at the end). It
// allocates nothing but its errors: a FUSE server parses it at every write.
func Parse(text []byte) (Call, error) {
	if n := len(text); n > 0 && text[n-1] == '\n' {
		text = text[:n-1]
	}
	if string(text) == "running" {
		return Call{}, ErrRunning
	}
	var fields [9][]byte
	nf := 0
	for rest := text; len(rest) > 0; {
		i := 0
		for i < len(rest) && rest[i] != ' ' {
			i++
		}
		if i == 0 || nf == len(fields) {
			return Call{}, fmt.Errorf("procsyscall: %q: want a number, six arguments, sp and pc, one space apart: %w", text, unix.EINVAL)
		}
		fields[nf], nf = rest[:i], nf+1
		rest = rest[i:]
		if len(rest) > 0 {
			rest = rest[1:]
			if len(rest) == 0 {
				return Call{}, fmt.Errorf("procsyscall: %q: a space at the end: %w", text, unix.EINVAL)
			}
		}
	}
	if nf == 0 {
		return Call{}, fmt.Errorf("procsyscall: empty syscall file: %w", unix.EINVAL)
	}
	nr, err := strconv.Atoi(string(fields[0])) // no allocation: the conversion does not escape
	if err != nil {
		return Call{}, fmt.Errorf("procsyscall: bad system call number %q: %w", fields[0], unix.EINVAL)
	}
	if nr < 0 {
		if nf != 3 {
			return Call{}, fmt.Errorf("procsyscall: %q: want \"-1 sp pc\": %w", text, unix.EINVAL)
		}
		return Call{}, ErrNotInSyscall
	}
	if nf != 9 {
		return Call{}, fmt.Errorf("procsyscall: %q: want a number, six arguments, sp and pc: %w", text, unix.EINVAL)
	}
	c := Call{Nr: nr}
	for i := range c.Args {
		v, ok := bytes.CutPrefix(fields[1+i], []byte("0x"))
		if !ok {
			return Call{}, fmt.Errorf("procsyscall: argument %q is not 0x-hexadecimal: %w", fields[1+i], unix.EINVAL)
		}
		if c.Args[i], ok = parseHex(v); !ok {
			return Call{}, fmt.Errorf("procsyscall: argument %q: %w", fields[1+i], unix.EINVAL)
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
