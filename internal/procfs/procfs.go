// Package procfs reads what uetrace needs of /proc and /sys, as
// prometheus/procfs does: one parser per file, each with fixtures in
// testdata and a fuzz target —
//
//   - /proc/<pid>/status (status.go): Tgid, PPid, Uid, Gid, CapEff, NSpid;
//     and the NSpid line of a pidfd's fdinfo (fdinfo.go);
//   - /proc/<pid>/comm (comm.go) and /proc/<tid>/stat (stat.go): a task's
//     command name, and the CPU it last ran on;
//   - /proc/<tid>/syscall (syscall.go): the system call a blocked thread is
//     in and its arguments;
//   - /proc/self/mountinfo (mountinfo.go);
//   - the CPU lists of /sys/devices/system/cpu (cpulist.go), each meaning
//     under its own name: the CPUs online now, possible and present; and
//     the CPUs this process may run on, its affinity.
//
// It reads and parses; what the numbers mean to uetrace — which process to
// trust, when to read again, a pidfd pinning what was read — is its
// callers'.
package procfs

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadFile reads a whole file with read(2) until end of file: files of
// /proc and /sys say size 0, so their length is known only at the end.
//
// It uses no os.File: an os.File's Stat links fs.FileInfo's ModTime and
// with it time's formatting and time zones into every program that reads
// one — a producer linking package userevents too — for nothing.
func ReadFile(path string) ([]byte, error) {
	return ReadFileAt(unix.AT_FDCWD, path)
}

// ReadFileAt is ReadFile of name below the directory open at dir
// (openat(2)): a /proc/<pid> directory held open pins the process it was
// opened for — once that process has gone, reads below it fail with ESRCH
// even if its pid is another's by then.
func ReadFileAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &pathError{"open", name, err}
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &pathError{"read", name, err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// pathError is fs.PathError's wording, without package os.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// pidPath is /proc/<pid>/<name>.
func pidPath(pid int, name string) string {
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}
