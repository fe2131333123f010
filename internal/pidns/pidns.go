// Package pidns maps the thread ids one pid namespace gives to the thread
// ids of the /proc this process reads. FUSE reports a caller's thread id in
// the pid namespace of whoever mounted the tree (the kernel's fuse_conn keeps
// the mounter's pid_ns and writes pid_nr_ns(task_pid(current), fc->pid_ns)
// into each request's header: 0 for a caller that namespace cannot see), not
// in the server's; a server that took it as one of its own would read,
// write and judge another task — another user's.
//
// A Map is one pid namespace, named by its nsfs inode and its depth below
// /proc's namespace. A thread id of it is found among /proc's tasks by the
// NSpid line of their status (the task's id in every namespace from /proc's
// down to its own: the entry at the namespace's depth is its id there), and
// each answer is checked to be that namespace's — the task's namespace at
// that depth, reached from its own with NS_GET_PARENT, is the Map's — every
// time it is given, so a kept answer whose thread has gone, or whose number
// another namespace's thread now has, is never returned. Where the namespace
// is /proc's own, ids are the same and nothing is read.
//
// It does not decide whether a task may be reached (caps.User does)
// and it cannot see a namespace above /proc's: such a Map is refused.
package pidns

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// ErrNotVisible is Map.TID's error for a thread id that names no task of the
// namespace /proc shows: 0 (FUSE's id for a caller its mounter's namespace
// cannot see), or a thread that has exited.
var ErrNotVisible = errors.New("pidns: no such thread in the pid namespace")

// maxCached bounds the answers kept: past it they are all forgotten (each is
// found again by one scan of /proc).
const maxCached = 4096

// nsID names a namespace: its nsfs inode.
type nsID struct{ dev, ino uint64 }

// Map translates the thread ids of one pid namespace into /proc's.
type Map struct {
	ns    nsID
	level int // the namespace's depth below /proc's: its index in NSpid

	mu    sync.Mutex
	cache map[int]int // its thread id → /proc's
}

// Same reports whether the Map's namespace is /proc's own: its ids are
// /proc's.
func (m *Map) Same() bool { return m.level == 0 }

// Level is the namespace's depth below /proc's (0: /proc's own).
func (m *Map) Level() int { return m.level }

// String names the namespace as /proc/PID/ns/pid does.
func (m *Map) String() string {
	return fmt.Sprintf("pid:[%d] (depth %d below /proc's)", m.ns.ino, m.level)
}

// Self is the Map of this process's pid namespace.
func Self() (*Map, error) {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return nil, fmt.Errorf("pidns: pidfd_open of this process: %w", err)
	}
	defer unix.Close(pidfd)
	return OfPidfd(pidfd)
}

// OfPidfd is the Map of the pid namespace of the process pidfd refers to
// (from pidfd_open or SO_PEERPIDFD). The process must be one /proc shows: a
// process in a namespace above /proc's is refused with ESRCH.
func OfPidfd(pidfd int) (*Map, error) {
	// The pidfd's fdinfo has the process's ids from /proc's namespace
	// down to its own (NSpid), or -1 where /proc's cannot see it.
	ids, err := procfs.PidfdNSpid(pidfd)
	if err != nil {
		return nil, fmt.Errorf("pidns: reading the pidfd's fdinfo: %w", err)
	}
	if len(ids) == 0 || ids[0] <= 0 {
		return nil, fmt.Errorf("pidns: the process is in a pid namespace this process's /proc cannot see (or has exited): %w", unix.ESRCH)
	}
	pid := ids[0]
	ns, err := nsOf(pid)
	if err != nil {
		return nil, err
	}
	// The /proc directory read was the pidfd's process's if that process
	// still exists now: its pid is not reused while it does.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil && err != unix.EPERM {
		return nil, fmt.Errorf("pidns: process %d exited while its namespace was read: %w", pid, unix.ESRCH)
	}
	return &Map{ns: ns, level: len(ids) - 1}, nil
}

// nsOf is the active pid namespace of task tid.
func nsOf(tid int) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(tid)+"/ns/pid", &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nsID{}, fmt.Errorf("pidns: task %d has exited: %w", tid, unix.ESRCH)
		}
		return nsID{}, fmt.Errorf("pidns: the pid namespace of task %d: %w", tid, err)
	}
	return nsID{st.Dev, st.Ino}, nil
}

// TID is the /proc thread id of the thread whose id in the Map's namespace
// is id. ErrNotVisible (ESRCH) if there is none.
func (m *Map) TID(id int) (int, error) {
	if id <= 0 {
		return 0, fmt.Errorf("%w %s: the caller's id is %d, which FUSE gives a caller its mounter's namespace cannot see: %w", ErrNotVisible, m, id, unix.ESRCH)
	}
	if m.level == 0 {
		return id, nil
	}
	m.mu.Lock()
	tid, ok := m.cache[id]
	m.mu.Unlock()
	if ok {
		if m.is(tid, id) {
			return tid, nil
		}
		m.mu.Lock()
		if m.cache[id] == tid {
			delete(m.cache, id)
		}
		m.mu.Unlock()
	}
	tid, ok = m.scan(id)
	if !ok {
		return 0, fmt.Errorf("%w %s: thread %d: %w", ErrNotVisible, m, id, unix.ESRCH)
	}
	m.mu.Lock()
	if m.cache == nil || len(m.cache) >= maxCached {
		m.cache = make(map[int]int)
	}
	m.cache[id] = tid
	m.mu.Unlock()
	return tid, nil
}

// scan looks through /proc's tasks for the one whose id at the Map's depth
// is id, and checks it is the Map's namespace's.
func (m *Map) scan(id int) (int, bool) {
	procs, err := readNames("/proc")
	if err != nil {
		return 0, false
	}
	for _, p := range procs {
		if p[0] < '0' || p[0] > '9' {
			continue
		}
		tasks, err := readNames("/proc/" + p + "/task")
		if err != nil {
			continue
		}
		for _, t := range tasks {
			ids, ok := nspid("/proc/" + p + "/task/" + t + "/status")
			if !ok || len(ids) <= m.level || ids[m.level] != id {
				continue
			}
			tid, err := strconv.Atoi(t)
			if err == nil && m.is(tid, id) {
				return tid, true
			}
		}
	}
	return 0, false
}

// is reports whether /proc's task tid has id in the Map's namespace.
func (m *Map) is(tid, id int) bool {
	ids, ok := nspid("/proc/" + strconv.Itoa(tid) + "/status")
	if !ok || len(ids) <= m.level || ids[m.level] != id {
		return false
	}
	// The id is one of the task's; the namespace at that depth must be
	// the Map's (a sibling namespace has its own threads with that id).
	fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	for up := len(ids) - 1 - m.level; up > 0; up-- {
		parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
		unix.Close(fd)
		if err != nil {
			return false
		}
		fd = parent
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil || (nsID{st.Dev, st.Ino}) != m.ns {
		return false
	}
	// The status read and the namespace opened were the same task's if
	// its id is still id there: a thread id is not reused while its
	// thread lives.
	ids, ok = nspid("/proc/" + strconv.Itoa(tid) + "/status")
	return ok && len(ids) > m.level && ids[m.level] == id
}

// nspid reads the NSpid line of a status file.
func nspid(path string) ([]int, bool) {
	b, err := procfs.ReadFile(path)
	if err != nil {
		return nil, false
	}
	st := procfs.ParseStatus(b)
	return st.NSpid, st.Has(procfs.StatusNSpid)
}

// readNames lists a directory.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Threads is what a process's own pid namespace calls its threads: for each
// thread of process tgid (a /proc id), its id in the namespace the process
// lives in — the last of its NSpid — mapped to /proc's. own is false when
// that namespace is /proc's: the ids are /proc's already, and ids is nil. A
// writer that stamps its records with gettid(2) stamps the first; records
// are shown under the second.
func Threads(tgid int) (ids map[int]int, own bool, err error) {
	main, ok := nspid("/proc/" + strconv.Itoa(tgid) + "/status")
	if !ok {
		return nil, false, fmt.Errorf("pidns: process %d: %w", tgid, unix.ESRCH)
	}
	if len(main) == 1 {
		return nil, false, nil
	}
	tasks, err := readNames("/proc/" + strconv.Itoa(tgid) + "/task")
	if err != nil {
		return nil, true, fmt.Errorf("pidns: the threads of process %d: %w", tgid, err)
	}
	ids = make(map[int]int, len(tasks))
	for _, t := range tasks {
		tid, err := strconv.Atoi(t)
		if err != nil {
			continue
		}
		if n, ok := nspid("/proc/" + strconv.Itoa(tgid) + "/task/" + t + "/status"); ok && len(n) == len(main) {
			ids[n[len(n)-1]] = tid
		}
	}
	return ids, true, nil
}
