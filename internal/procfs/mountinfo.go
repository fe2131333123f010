package procfs

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

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
