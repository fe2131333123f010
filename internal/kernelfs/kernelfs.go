// Package kernelfs finds the kernel's tracefs and its user_events files,
// with the errors a user reads when there are none: what userevents and
// tracefs open on Linux's own user_events.
package kernelfs

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/uerror"
)

// tracefsMagic is TRACEFS_MAGIC, the f_type statfs reports for tracefs.
const tracefsMagic = 0x74726163

// Find returns where tracefs is mounted: /sys/kernel/tracing when it
// is tracefs, else the first tracefs mount in /proc/self/mountinfo, else
// the "tracing" directory of the first debugfs mount.
func Find() (string, error) {
	var st unix.Statfs_t
	if unix.Statfs("/sys/kernel/tracing", &st) == nil && st.Type == tracefsMagic {
		return "/sys/kernel/tracing", nil
	}
	ms, err := procfs.Mounts()
	if err != nil {
		return "", fmt.Errorf("finding tracefs: %w", err)
	}
	var debugfs string
	for _, m := range ms {
		switch m.FSType {
		case "tracefs":
			return m.MountPoint, nil
		case "debugfs":
			if debugfs == "" {
				debugfs = filepath.Join(m.MountPoint, "tracing")
			}
		}
	}
	if debugfs != "" {
		var st unix.Stat_t
		if unix.Stat(debugfs, &st) == nil {
			return debugfs, nil
		}
	}
	return "", &uerror.Error{Op: "find", Path: "tracefs", Errno: unix.ENOENT, Reason: "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)"}
}

// File is the path of a user_events file of the tracefs at root
// ("": found), after checking it with check: an ENOENT means the kernel was
// built without user_events.
func File(root, name string, check func(path string) error) (string, error) {
	if root == "" {
		var err error
		if root, err = Find(); err != nil {
			return "", err
		}
	}
	path := filepath.Join(root, name)
	if err := check(path); err != nil {
		switch err {
		case unix.ENOENT:
			return "", &uerror.Error{Op: "open", Path: path, Errno: unix.ENOENT, Reason: noUserEvents}
		case unix.EACCES, unix.EPERM:
			return "", &uerror.Error{Op: "open", Path: path, Errno: err.(unix.Errno), Reason: denied(root, path)}
		}
		return "", uerror.Wrap("open", path, "", err)
	}
	return root, nil
}

const noUserEvents = "this kernel has no user_events (CONFIG_USER_EVENTS)"

// denied says why the user_events file at path, of the tracefs at root,
// could not be opened. Path lookup needs search permission on every
// directory, and Linux checks it before it looks the next name up
// (may_lookup in link_path_walk): an EACCES from a directory on the way
// says nothing of whether the file is there, and tracefs's root is 0700
// unless mounted with mode= or gid=. stat(2) walks the same path with the
// same credentials but needs no permission on the file itself: it finds
// the file, finds it absent, or is refused where open was. (Not
// faccessat(AT_EACCESS): x/sys emulates that flag, and the emulation
// alone is about 7 KB of a producer's binary, TestProducerBinarySize.)
func denied(root, path string) string {
	var st unix.Stat_t
	switch unix.Stat(path, &st) {
	case nil:
		return "this kernel has user_events; this user may not open them"
	case unix.ENOENT:
		return noUserEvents
	}
	return "this user may not enter " + root + ", so whether this kernel has user_events is not known"
}
