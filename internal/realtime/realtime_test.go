package realtime

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestSet: every thread of the process has SCHED_FIFO at the priority
// asked after Set, and so has a thread the runtime makes after it; a
// priority out of range is EINVAL. Without the privilege, Set says EPERM
// and what would grant it.
func TestSet(t *testing.T) {
	for _, p := range []int{0, MaxPriority + 1, -1} {
		if err := Set(p); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Set(%d): %v, want EINVAL", p, err)
		}
	}
	err := Set(1)
	if errors.Is(err, unix.EPERM) {
		if os.Geteuid() == 0 {
			t.Fatalf("as root: %v", err)
		}
		t.Skipf("no privilege here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		tids, err := threads()
		if err != nil {
			t.Fatal(err)
		}
		for _, tid := range tids {
			a, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				continue
			}
			if a.Policy != unix.SCHED_FIFO || a.Priority != 1 {
				t.Errorf("%s: thread %d has policy %d priority %d, want SCHED_FIFO 1", what, tid, a.Policy, a.Priority)
			}
		}
	}
	check("after Set")
	// Goroutines locked to threads of their own, more than the process
	// has, make the runtime start threads, from those Set changed.
	done := make(chan struct{})
	defer close(done)
	n0, _ := threads()
	for range len(n0) + 1 {
		go func() {
			runtime.LockOSThread()
			<-done
		}()
	}
	testutil.Wait(t, "threads made", func() bool {
		n, _ := threads()
		return len(n) > len(n0)
	})
	check("threads made after")

	// A command started from the real-time process: normal.
	c := exec.Command("sh", "-c", "cat /proc/self/sched | grep '^policy'")
	var out strings.Builder
	c.Stdout = &out
	if err := StartNormal(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(out.String()); len(f) != 3 || f[2] != "0" {
		t.Errorf("the command started: %q, want policy 0 (SCHED_OTHER)", out.String())
	}
	check("after StartNormal")
}
