// Package caps answers the privilege questions asked of a caller. The one
// user_events asks — perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN — it
// answers the way Linux does: capable(), which counts a capability only in the user
// namespace it is asked about (Linux: the initial one; here: this process's,
// which is the initial one for a daemon started normally) or in an ancestor
// of it. A process in a user namespace of its own (`unshare -Ur`) has a full
// CapEff there and none here, as in Linux, where such a process is refused
// PERSIST events.
//
// It reads the caller's effective capabilities, effective uid and user
// namespace from procfs, pinned by a pidfd so that a pid reused after its
// process exits is never mistaken for it. It sets no capabilities.
//
// It also answers whether a user may reach a process as ptrace would
// (User.Check, ptrace.go): the check a server that reaches its callers'
// memory with privileges of its own makes for the user it serves them for.
package caps

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// Capability bits (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// PerfmonCapable reports whether process pid (0: this process) is
// perfmon_capable() in this process's user namespace. A process that cannot
// be read, or that exits while it is read, is not.
func PerfmonCapable(pid int) bool {
	if pid == 0 || pid == os.Getpid() {
		st, err := procfs.ReadFile("/proc/self/status")
		if err != nil {
			return false
		}
		c, ok := parseStatus(st)
		return ok && c.perfmon()
	}
	return byPid(-1, pid)
}

// PerfmonCapableIn is PerfmonCapable with the user namespace userNS (an
// open /proc/<pid>/ns/user) in place of this process's: for a subsystem
// made for the processes of one user namespace — uetrace run --private's,
// whose command is root of a namespace of its own and owns its
// subsystem — its root is capable there.
func PerfmonCapableIn(userNS, pid int) bool { return byPid(userNS, pid) }

// byPid decides for process pid, pinned by a pidfd opened now, in user
// namespace userNS (-1: this process's).
func byPid(userNS, pid int) bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	return perfmonCapable(userNS, pidfd, pid)
}

// PerfmonCapablePidfd is PerfmonCapable of the process pidfd refers to —
// from SO_PEERPIDFD, which names the connecting process however long ago it
// connected — whose id in this process's pid namespace is pid.
func PerfmonCapablePidfd(pidfd, pid int) bool {
	return perfmonCapable(-1, pidfd, pid)
}

// perfmonCapable decides for the process pidfd, pid in user namespace
// userNS (-1: this process's).
func perfmonCapable(userNS, pidfd, pid int) bool {
	dir, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dir)
	// The directory is the pidfd's process's if that process still exists
	// once the directory is open: a pid is not reused while its process,
	// even a zombie, holds it. A /proc directory of a process that has
	// gone answers no more reads. Signal 0 tells: ESRCH once the process
	// has exited; EPERM (a process this one may not signal) still exists.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil && err != unix.EPERM {
		return false
	}
	st, err := procfs.ReadFileAt(dir, "status")
	if err != nil {
		return false
	}
	c, ok := parseStatus(st)
	if !ok {
		return false
	}
	return capable(userNS, dir, c)
}

// creds is what capable() looks at in a task's credentials.
type creds struct {
	euid   uint32
	capEff uint64
}

func (c creds) perfmon() bool { return c.capEff&(1<<capPerfmon|1<<capSysAdmin) != 0 }

// parseStatus takes the effective uid and CapEff of /proc/<pid>/status.
// Uids there are shown in the reader's user namespace, as NS_GET_OWNER_UID
// gives owners.
func parseStatus(status []byte) (creds, bool) {
	st := procfs.ParseStatus(status)
	return creds{euid: st.Uid[1], capEff: st.CapEff}, st.Has(procfs.StatusUid | procfs.StatusCapEff)
}

// nsID names a namespace: its nsfs inode.
type nsID struct{ dev, ino uint64 }

func nsOf(fd int) (nsID, bool) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nsID{}, false
	}
	return nsID{st.Dev, st.Ino}, true
}

// capable is cap_capable() (security/commoncap.c, read in Linux 6.12's
// source; perfmon_capable() is capable(CAP_PERFMON) ||
// capable(CAP_SYS_ADMIN), include/linux/capability.h) for a perfmon
// capability in user namespace userNS (-1: this process's), of the task whose /proc
// directory is dir and whose credentials are c. From the namespace asked
// about up through its ancestors:
//   - the task's own namespace: its effective capabilities decide;
//   - a namespace whose parent is the task's and whose owner is the task's
//     euid: the task has every capability in it;
//   - past the top — the initial namespace, or the highest this process
//     can see — the task is not capable.
func capable(userNS, dir int, c creds) bool {
	taskNS, ok := taskUserNS(dir)
	if !ok {
		return false
	}
	var fd int
	var err error
	if userNS < 0 {
		fd, err = unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	} else {
		fd, err = unix.FcntlInt(uintptr(userNS), unix.F_DUPFD_CLOEXEC, 0)
	}
	if err != nil {
		return false
	}
	for {
		ns, ok := nsOf(fd)
		if !ok {
			unix.Close(fd)
			return false
		}
		if ns == taskNS {
			unix.Close(fd)
			return c.perfmon()
		}
		owner, oerr := nsOwner(fd)
		parent, perr := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		unix.Close(fd)
		if perr != nil || oerr != nil {
			// EPERM: the parent is outside what this process can see, or
			// this is the initial namespace.
			return false
		}
		fd = parent
		if pns, ok := nsOf(fd); ok && pns == taskNS && owner == c.euid {
			unix.Close(fd)
			return true
		}
	}
}

// nsOwner is NS_GET_OWNER_UID: the uid, in this process's namespace, of
// the user namespace's creator.
func nsOwner(fd int) (uint32, error) {
	return unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID)
}

// taskUserNS is the user namespace of the task whose /proc directory is
// dir. Opening ns/user needs ptrace read access (ptrace_may_access), which
// a daemon not running as root lacks for a client with capabilities it
// does not have. Then the task's uid_map, which anyone may read, stands
// in: a task whose map is this process's own is taken to be in this
// process's namespace. A different namespace with the same map can only be
// made by a process with CAP_SETUID here, that is one already privileged
// here.
func taskUserNS(dir int) (nsID, bool) {
	fd, err := unix.Openat(dir, "ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(fd)
		return nsOf(fd)
	}
	theirs, err := procfs.ReadFileAt(dir, "uid_map")
	if err != nil {
		return nsID{}, false
	}
	ours, err := procfs.ReadFile("/proc/self/uid_map")
	if err != nil || !bytes.Equal(theirs, ours) {
		return nsID{}, false
	}
	self, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nsID{}, false
	}
	defer unix.Close(self)
	return nsOf(self)
}
