// Package procfs reads what uetrace needs of /proc, as prometheus/procfs
// does: one parser per file, each with fixtures and a fuzz target. It reads
// and parses; what the numbers mean to uetrace is its callers'.
package procfs

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReadFile reads a whole file with read(2) until end of file: files of
// /proc and /sys say size 0, so their length is known only at the end.
//
// It uses no os.File: an os.File's Stat links fs.FileInfo's ModTime and
// with it time's formatting and time zones into every program that reads
// one — a producer linking package userevents too — for nothing.
func ReadFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &pathError{"open", path, err}
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
			return nil, &pathError{"read", path, err}
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// Comm is the command name of process pid (/proc/<pid>/comm), as the
// trace shows a writer's, or "<...>" — the trace's name for a task it does
// not know — when it cannot be read.
func Comm(pid int32) string {
	if pid <= 0 {
		return "<...>"
	}
	b, err := ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
	if err != nil {
		return "<...>"
	}
	return strings.TrimSuffix(string(b), "\n")
}

// pathError is fs.PathError's wording, without package os.
type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// Mount is one line of mountinfo (proc(5)): ID PARENT MAJ:MIN ROOT
// MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS.
type Mount struct {
	Dev        uint64 // MAJ:MIN as a dev_t (unix.Mkdev)
	MountPoint string
	FSType     string // "tracefs", "fuse.uetrace"
	Source     string
}

// Mounts are this process's mounts, /proc/self/mountinfo, in its order:
// the later of two on one mount point is the one on top.
func Mounts() ([]Mount, error) {
	b, err := ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return ParseMountinfo(b), nil
}

// ParseMountinfo parses mountinfo's lines; a line it cannot read is
// skipped.
func ParseMountinfo(b []byte) []Mount {
	var out []Mount
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 7 {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		maj, min, ok := strings.Cut(f[2], ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, Mount{
			Dev:        unix.Mkdev(uint32(ma), uint32(mi)),
			MountPoint: unescape(f[4]),
			FSType:     f[sep+1],
			Source:     unescape(f[sep+2]),
		})
	}
	return out
}

// unescape undoes the kernel's octal escapes of space, tab, newline and
// backslash in mountinfo's paths (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
