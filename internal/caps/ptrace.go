package caps

// This file answers the other question a server asks of a process: may a
// user reach it — its memory read and written, its /proc files read — by
// the rules of Linux's ptrace_may_access(PTRACE_MODE_ATTACH_REALCREDS)
// (kernel/ptrace.c, __ptrace_may_access, read in 6.12's source), the check
// process_vm_readv and process_vm_writev make of their caller:
//
//   - the user's uid is the task's real, effective and saved uid, and its gid
//     the task's real, effective and saved gid, and the task is dumpable
//     (its /proc/<pid>/status is the task's euid's, as proc makes it:
//     task_dump_owner gives the files of a task that is not dumpable to
//     root); or
//   - the user has CAP_SYS_PTRACE over the task's user namespace: root of
//     this process's user namespace over every task, and any user over a
//     user namespace it created (owner, NS_GET_OWNER_UID) below this one.
//
// A server that reaches a caller's memory with privileges of its own (a root
// daemon) checks with it, for the user it serves the caller for, that the
// caller is one that user could reach itself: a pid taken from the wrong
// pid namespace, or reused, then fails here (EPERM) rather than reach
// another user's process.
//
// It is a check made from procfs, not the kernel's own: between it and the
// access the task may change credentials (setuid(2) without exec: the
// kernel checks at each access; an exec changes the process, which package
// procmem notices), and Yama's ptrace_scope and LSMs are not asked (they are
// the kernel's check of this process's own access).

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// capSysPtrace is CAP_SYS_PTRACE (include/uapi/linux/capability.h).
const capSysPtrace = 19

// User is whom processes are reached for.
type User struct {
	UID, GID uint32
	// Privileged: CAP_SYS_PTRACE in this process's user namespace, which
	// reaches every process.
	Privileged bool
}

// Self is this process's user: its real uid and gid (REALCREDS), and
// whether it has CAP_SYS_PTRACE.
func Self() User {
	u := User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if st, err := procfs.ReadStatus(os.Getpid()); err == nil {
		u.Privileged = st.Has(procfs.StatusCapEff) && st.CapEff&(1<<capSysPtrace) != 0
	}
	return u
}

// String says who the user is.
func (u User) String() string {
	if u.Privileged {
		return fmt.Sprintf("uid %d (with CAP_SYS_PTRACE)", u.UID)
	}
	return fmt.Sprintf("uid %d gid %d", u.UID, u.GID)
}

// Check says whether u may reach process (or thread) pid of /proc: nil if
// so, an EPERM that says why if not, ESRCH if it has gone.
func (u User) Check(pid int) error {
	if u.Privileged {
		return nil
	}
	dir := "/proc/" + strconv.Itoa(pid)
	st, err := procfs.ReadFile(dir + "/status")
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d has exited: %w", pid, unix.ESRCH)
		}
		return fmt.Errorf("process %d: %w", pid, err)
	}
	uids, gids, ok := ids(st)
	if !ok {
		return fmt.Errorf("process %d: no Uid and Gid in its status (it is exiting?): %w", pid, unix.ESRCH)
	}
	same := uids[0] == u.UID && uids[1] == u.UID && uids[2] == u.UID &&
		gids[0] == u.GID && gids[1] == u.GID && gids[2] == u.GID
	if same {
		var fi unix.Stat_t
		// proc makes the files of a task that is not dumpable root's
		// (task_dump_owner; not the directory itself, which stays the
		// task's euid's for ps).
		if err := unix.Stat(dir+"/status", &fi); err == nil && fi.Uid == u.UID {
			return nil
		}
	}
	if u.ownsNamespaceOf(dir) {
		return nil
	}
	if same {
		return fmt.Errorf("process %d is not dumpable (it changed credentials, or set PR_SET_DUMPABLE 0): %s may not reach it, as ptrace could not: %w", pid, u, unix.EPERM)
	}
	return fmt.Errorf("process %d runs as uid %d gid %d: %s may not reach it, as ptrace could not (a caller's pid in the wrong pid namespace, or reused, names another user's process): %w", pid, uids[1], gids[1], u, unix.EPERM)
}

// ownsNamespaceOf reports whether u created the user namespace of the task
// whose /proc directory is dir, or one of its ancestors below this
// process's: then u has every capability over it.
func (u User) ownsNamespaceOf(dir string) bool {
	self, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	selfID, ok := nsOf(self)
	unix.Close(self)
	if !ok {
		return false
	}
	fd, err := unix.Open(dir+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	owned := false
	for {
		id, ok := nsOf(fd)
		if !ok {
			unix.Close(fd)
			return false
		}
		if id == selfID {
			// Below this process's namespace: an owner on the way has
			// every capability here.
			unix.Close(fd)
			return owned
		}
		if owner, err := nsOwner(fd); err == nil && owner == u.UID {
			owned = true
		}
		parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		unix.Close(fd)
		if err != nil {
			// Past the top: not below this process's namespace.
			return false
		}
		fd = parent
	}
}

// ids reads the real, effective and saved uids and gids of a status file.
func ids(status []byte) (uids, gids [3]uint32, ok bool) {
	st := procfs.ParseStatus(status)
	if !st.Has(procfs.StatusUid | procfs.StatusGid) {
		return uids, gids, false
	}
	return [3]uint32(st.Uid[:3]), [3]uint32(st.Gid[:3]), true
}
