package pidns

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/testutil"
)

func TestSelf(t *testing.T) {
	m, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Same() {
		t.Skipf("this test's /proc is not its own pid namespace's (%s)", m)
	}
	if tid, err := m.TID(unix.Gettid()); err != nil || tid != unix.Gettid() {
		t.Errorf("TID(own thread %d) = %d, %v", unix.Gettid(), tid, err)
	}
	// 0 is FUSE's id for a caller the mounter's namespace cannot see.
	if _, err := m.TID(0); !errors.Is(err, unix.ESRCH) || !errors.Is(err, ErrNotVisible) {
		t.Errorf("TID(0): %v, want ErrNotVisible and ESRCH", err)
	}
}

// startInPidns starts args as pid 1 of a new pid namespace (root), and
// returns it and the Map of its namespace.
func startInPidns(t *testing.T, args ...string) (*exec.Cmd, *Map) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Skipf("a new pid namespace: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, mapOf(t, cmd.Process.Pid)
}

func mapOf(t *testing.T, pid int) *Map {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m, err := OfPidfd(fd)
	if err != nil {
		t.Fatalf("OfPidfd(%d): %v", pid, err)
	}
	return m
}

func needRoot(t *testing.T) {
	t.Helper()
	testutil.NeedRoot(t, "pid namespaces")
	if m, err := Self(); err != nil || !m.Same() {
		t.Skip("this test's /proc is not its own pid namespace's")
	}
}

// Two sibling namespaces each have a thread 1: each Map finds its own.
func TestSiblings(t *testing.T) {
	needRoot(t)
	ca, ma := startInPidns(t, "sleep", "600")
	cb, mb := startInPidns(t, "sleep", "600")
	a, b := ca.Process.Pid, cb.Process.Pid
	if ma.Level() != 1 || mb.Level() != 1 {
		t.Fatalf("levels %d, %d; want 1", ma.Level(), mb.Level())
	}
	for range 2 { // the second time from the kept answers
		if tid, err := ma.TID(1); err != nil || tid != a {
			t.Errorf("namespace a's 1: %d, %v; want %d", tid, err, a)
		}
		if tid, err := mb.TID(1); err != nil || tid != b {
			t.Errorf("namespace b's 1: %d, %v; want %d", tid, err, b)
		}
	}
	if tid, err := ma.TID(2); !errors.Is(err, unix.ESRCH) {
		t.Errorf("namespace a's 2, which does not exist: %d, %v; want ESRCH", tid, err)
	}
	// A kept answer whose thread has gone is not given again.
	ca.Process.Kill()
	ca.Wait()
	if tid, err := ma.TID(1); !errors.Is(err, unix.ESRCH) {
		t.Errorf("namespace a's 1 after it exited: %d, %v; want ESRCH", tid, err)
	}
}

// A thread of a namespace nested in the Map's is found by its id in the
// Map's, through the namespaces' parents.
func TestNested(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare(1)")
	}
	c, m1 := startInPidns(t, "unshare", "--pid", "--fork", "sleep", "600")
	outer := c.Process.Pid
	// unshare's child, pid 1 of the inner namespace and 2 of the outer.
	var inner int
	deadline := time.Now().Add(time.Minute)
	for inner == 0 {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(outer) + "/task/" + strconv.Itoa(outer) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			inner, _ = strconv.Atoi(f[0])
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare did not start its child")
		}
		time.Sleep(5 * time.Millisecond)
	}
	m2 := mapOf(t, inner)
	if m2.Level() != 2 {
		t.Fatalf("the inner namespace's level: %d, want 2", m2.Level())
	}
	if tid, err := m2.TID(1); err != nil || tid != inner {
		t.Errorf("inner namespace's 1: %d, %v; want %d", tid, err, inner)
	}
	st, _ := procfs.ReadStatus(inner)
	if ids := st.NSpid; len(ids) != 3 {
		t.Fatalf("the inner process's NSpid: %v", ids)
	}
	mid := st.NSpid[1]
	if tid, err := m1.TID(mid); err != nil || tid != inner {
		t.Errorf("outer namespace's %d: %d, %v; want %d", mid, tid, err, inner)
	}
	if tid, err := m1.TID(1); err != nil || tid != outer {
		t.Errorf("outer namespace's 1: %d, %v; want %d", tid, err, outer)
	}
}

// TestThreads: a process in a pid namespace of its own calls its first
// thread 1; Threads maps that to /proc's id. In /proc's own namespace
// there is nothing to map.
func TestThreads(t *testing.T) {
	if ids, own, err := Threads(os.Getpid()); err != nil || own || ids != nil {
		if m, _ := Self(); m != nil && m.Same() {
			t.Errorf("Threads of this process: %v, own %v, %v; want /proc's namespace", ids, own, err)
		}
	}
	needRoot(t)
	cmd, _ := startInPidns(t, "sleep", "60")
	pid := cmd.Process.Pid
	var ids map[int]int
	var own bool
	var err error
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		// The child is in its namespace once it has exec'd sleep.
		if ids, own, err = Threads(pid); err == nil && len(ids) == 1 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("Threads(%d): %v, own %v, %v", pid, ids, own, err)
		}
	}
	if !own || ids[1] != pid {
		t.Errorf("Threads(%d) = %v, own %v; want 1 → %d", pid, ids, own, pid)
	}
	if _, _, err := Threads(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Threads of no process: %v", err)
	}
}
