package runguard

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guarded runs f on a thread of its own with the guard's filter installed
// and served by g; the thread ends with f, taking its filter with it. The
// guard has stopped when it returns, so its Log may be read.
func guarded(t *testing.T, g *Guard, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		// The thread is not given back: it ends with the goroutine.
		runtime.LockOSThread()
		// Without CAP_SYS_ADMIN a filter needs no_new_privs, which is
		// this thread's alone.
		if os.Geteuid() != 0 {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				errc <- err
				return
			}
		}
		listener, err := Install()
		if err != nil {
			errc <- err
			return
		}
		stop := g.Serve(listener)
		f()
		stop()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			t.Skipf("no seccomp user notification here: %v", err)
		}
		t.Fatal(err)
	}
}

func perfOpen(typ uint32, config uint64) error {
	attr := unix.PerfEventAttr{Type: typ, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Config: config}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestGuardPerfEventOpen: a tracepoint of the tree, where there is no tree
// to make its event (TreeDirs), is refused with EOPNOTSUPP and a message
// naming it and uetrace record, once however often it is opened; any other
// perf_event_open reaches the kernel. (With a tree, cmd/uetrace's
// TestRunPerfEvents.)
func TestGuardPerfEventOpen(t *testing.T) {
	var log bytes.Buffer
	g := &Guard{Log: &log, Tracepoint: func(pid int, id uint64) (string, bool) {
		if pid != unix.Gettid() && pid <= 0 {
			t.Errorf("Tracepoint got pid %d", pid)
		}
		return "user_events:my_ev", id == 65535
	}}
	var ours, ours2, other, sw, shared error
	f, err := os.CreateTemp(t.TempDir(), "mapped")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(4096)
	guarded(t, g, func() {
		// A shared mapping of a file that is not the tree's is the
		// kernel's.
		var m []byte
		if m, shared = unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); shared == nil {
			unix.Munmap(m)
		}
		ours = perfOpen(unix.PERF_TYPE_TRACEPOINT, 65535)
		ours2 = perfOpen(unix.PERF_TYPE_TRACEPOINT, 65535)
		other = perfOpen(unix.PERF_TYPE_TRACEPOINT, 65534)
		sw = perfOpen(unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_DUMMY)
	})
	if !errors.Is(ours, unix.EOPNOTSUPP) || !errors.Is(ours2, unix.EOPNOTSUPP) {
		t.Errorf("perf_event_open of the tree's id: %v, %v; want EOPNOTSUPP", ours, ours2)
	}
	// The kernel's answers: no tracepoint has the id (EINVAL), or perf
	// events are not allowed here at all.
	if errors.Is(other, unix.EOPNOTSUPP) || other == nil {
		t.Errorf("perf_event_open of an id not the tree's: %v, want the kernel's error", other)
	}
	if shared != nil {
		t.Errorf("mmap MAP_SHARED of a file: %v", shared)
	}
	if errors.Is(sw, unix.EOPNOTSUPP) {
		t.Errorf("perf_event_open of a software event: %v, want the kernel's answer", sw)
	}
	want := "uetrace run: perf_event_open of user_events:my_ev (tracepoint id 65535) refused (EOPNOTSUPP): the tree answers no perf events here (no tree to ask: no such file or directory); record them with uetrace record\n"
	if got := log.String(); got != want {
		t.Errorf("log:\n%q\nwant\n%q", got, want)
	}
}

// TestGuardMount: mounting tracefs or debugfs, by mount(2) or fsopen(2),
// is refused with EPERM and a message; other file systems reach the
// kernel.
func TestGuardMount(t *testing.T) {
	var log bytes.Buffer
	g := &Guard{Log: &log}
	dir := t.TempDir()
	var tracefs, debugfs, fsopen, tmpfs error
	guarded(t, g, func() {
		tracefs = unix.Mount("nodev", dir, "tracefs", 0, "")
		debugfs = unix.Mount("nodev", dir, "debugfs", 0, "")
		var fd int
		if fd, fsopen = unix.Fsopen("tracefs", unix.FSOPEN_CLOEXEC); fsopen == nil {
			unix.Close(fd)
		}
		// No such file system: the kernel's ENODEV, not the guard's.
		tmpfs = unix.Mount("nodev", dir, "uetrace-no-such-fs", 0, "")
	})
	if !errors.Is(tracefs, unix.EPERM) || !errors.Is(debugfs, unix.EPERM) || !errors.Is(fsopen, unix.EPERM) {
		t.Errorf("mount tracefs: %v, debugfs: %v, fsopen tracefs: %v; want EPERM", tracefs, debugfs, fsopen)
	}
	if errors.Is(tmpfs, unix.EPERM) && os.Geteuid() == 0 {
		t.Errorf("mount of another type: %v, want the kernel's answer", tmpfs)
	}
	got := log.String()
	for _, want := range []string{
		"uetrace run: mount of tracefs on " + dir + " refused (EPERM): it would hide uetrace's tracefs tree",
		"uetrace run: mount of debugfs on " + dir + " refused (EPERM)",
		"uetrace run: fsopen of tracefs refused (EPERM)",
		"record them with perf or uetrace record",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log has no %q:\n%s", want, got)
		}
	}
}

// TestGuardSpliceFromTree: sendfile and splice from a file under TreeDirs
// fail with EINVAL, without a word; from any other file, and to one under
// TreeDirs, they reach the kernel.
func TestGuardSpliceFromTree(t *testing.T) {
	var log bytes.Buffer
	tree, other := t.TempDir(), t.TempDir()
	g := &Guard{Log: &log, TreeDirs: []string{tree}}
	for _, dir := range []string{tree, other} {
		if err := os.WriteFile(dir+"/f", []byte("Active: 0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	open := func(path string, flag int) int {
		fd, err := unix.Open(path, flag|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	treeFile, otherFile := open(tree+"/f", unix.O_RDONLY), open(other+"/f", unix.O_RDONLY)
	out := open(other+"/out", unix.O_WRONLY|unix.O_CREAT)
	treeOut := open(tree+"/out", unix.O_WRONLY|unix.O_CREAT)
	var sendTree, spliceTree, sendOther, spliceOther, sendToTree error
	var nOther int
	guarded(t, g, func() {
		_, sendTree = unix.Sendfile(out, treeFile, nil, 4096)
		_, spliceTree = unix.Splice(treeFile, nil, p[1], nil, 4096, 0)
		nOther, sendOther = unix.Sendfile(out, otherFile, nil, 4096)
		var off int64
		_, spliceOther = unix.Splice(otherFile, &off, p[1], nil, 4096, 0)
		_, sendToTree = unix.Sendfile(treeOut, otherFile, &off, 4096)
	})
	if !errors.Is(sendTree, unix.EINVAL) || !errors.Is(spliceTree, unix.EINVAL) {
		t.Errorf("from the tree: sendfile %v, splice %v; want EINVAL", sendTree, spliceTree)
	}
	if sendOther != nil || nOther != 10 || spliceOther != nil || sendToTree != nil {
		t.Errorf("from another file: sendfile %d, %v, splice %v; to the tree: sendfile %v; want the kernel's copies", nOther, sendOther, spliceOther, sendToTree)
	}
	if log.Len() != 0 {
		t.Errorf("the guard said %q; want nothing", log.String())
	}
}

// TestGuardTreeMount: a new tracefs on a directory of the tree, as
// libtracefs mounts one where /proc/mounts lists none, is answered as done
// — nothing is mounted, the directory stays the tree — without a word; on
// another directory, or as a remount, it is refused as before.
func TestGuardTreeMount(t *testing.T) {
	var log bytes.Buffer
	tree, other := t.TempDir(), t.TempDir()
	if err := os.WriteFile(tree+"/user_events_status", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g := &Guard{Log: &log, TreeDirs: []string{tree}}
	var onTree, unclean, onOther, remount error
	guarded(t, g, func() {
		onTree = unix.Mount("nodev", tree, "tracefs", 0, "")
		unclean = unix.Mount("nodev", tree+"//../"+filepath.Base(tree)+"/", "tracefs", 0, "")
		onOther = unix.Mount("nodev", other, "tracefs", 0, "")
		remount = unix.Mount("nodev", tree, "tracefs", unix.MS_REMOUNT, "gid=1")
	})
	if onTree != nil || unclean != nil {
		t.Errorf("tracefs on the tree's directory: %v, %v; want it answered as done", onTree, unclean)
	}
	if _, err := os.Stat(tree + "/user_events_status"); err != nil {
		t.Errorf("the tree's directory after the mount: %v", err)
	}
	if !errors.Is(onOther, unix.EPERM) || !errors.Is(remount, unix.EPERM) {
		t.Errorf("tracefs on another directory: %v, a remount on the tree's: %v; want EPERM", onOther, remount)
	}
	if got := log.String(); strings.Count(got, "\n") != 2 || !strings.Contains(got, "on "+other+" refused") {
		t.Errorf("log: want the two refusals only:\n%s", got)
	}
}

// TestCallerPidfd: a splice's caller is a thread, which need not lead its
// process; the guard takes its descriptors either way.
func TestCallerPidfd(t *testing.T) {
	tids := make(chan int)
	done := make(chan struct{})
	defer close(done)
	for range 4 {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- unix.Gettid()
			<-done
		}()
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	threads := 0
	for range 4 {
		tid := <-tids
		if tid == os.Getpid() {
			continue
		}
		threads++
		pidfd, err := callerPidfd(tid)
		if err != nil {
			t.Fatalf("thread %d of %d: %v", tid, os.Getpid(), err)
		}
		fd, err := unix.PidfdGetfd(pidfd, int(f.Fd()), 0)
		unix.Close(pidfd)
		if err != nil {
			t.Fatalf("pidfd_getfd through thread %d: %v", tid, err)
		}
		unix.Close(fd)
	}
	if threads == 0 {
		t.Fatal("no thread but the leader")
	}
}
