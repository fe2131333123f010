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
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Call is a system call a thread is blocked in.
type Call struct {
	Nr   int       // the system call number (unix.SYS_WRITE, ...)
	Args [6]uint64 // its six argument registers
}

// ErrNotInSyscall says the thread was running or blocked outside a system
// call (a page fault, a stop): /proc shows "running" or an Nr of -1.
var ErrNotInSyscall = errors.New("procsyscall: thread is not in a system call")

// Read returns the system call thread tid is in.
func Read(tid int) (Call, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/syscall")
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return Call{}, fmt.Errorf("procsyscall: reading thread %d's system call needs the right to ptrace it (root, or its uid with kernel.yama.ptrace_scope=0): %w", tid, err)
		}
		return Call{}, fmt.Errorf("procsyscall: %w", err)
	}
	return Parse(string(b))
}

// Parse reads the text of /proc/<tid>/syscall: "running", "-1 sp pc",
// or "nr a0 a1 a2 a3 a4 a5 sp pc" with the arguments in hexadecimal
// (proc_pid_syscall).
func Parse(text string) (Call, error) {
	text = strings.TrimSuffix(text, "\n")
	if text == "running" {
		return Call{}, ErrNotInSyscall
	}
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return Call{}, fmt.Errorf("procsyscall: empty syscall file: %w", unix.EINVAL)
	}
	nr, err := strconv.Atoi(fields[0])
	if err != nil {
		return Call{}, fmt.Errorf("procsyscall: bad system call number %q: %w", fields[0], unix.EINVAL)
	}
	if nr < 0 {
		if len(fields) != 3 {
			return Call{}, fmt.Errorf("procsyscall: %q: want \"-1 sp pc\": %w", text, unix.EINVAL)
		}
		return Call{}, ErrNotInSyscall
	}
	if len(fields) != 9 {
		return Call{}, fmt.Errorf("procsyscall: %q: want a number, six arguments, sp and pc: %w", text, unix.EINVAL)
	}
	c := Call{Nr: nr}
	for i := range c.Args {
		v, ok := strings.CutPrefix(fields[1+i], "0x")
		if !ok {
			return Call{}, fmt.Errorf("procsyscall: argument %q is not 0x-hexadecimal: %w", fields[1+i], unix.EINVAL)
		}
		if c.Args[i], err = strconv.ParseUint(v, 16, 64); err != nil {
			return Call{}, fmt.Errorf("procsyscall: argument %q: %w", fields[1+i], unix.EINVAL)
		}
	}
	return c, nil
}
