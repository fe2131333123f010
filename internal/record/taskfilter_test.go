package record

import (
	"os"
	"strconv"
	"testing"
)

// TestTaskFilterForkedThenExeced: a forked process's samples are not
// given its parent's name while its exec's COMM record may still be in
// another CPU's ring: gone from /proc and named by no record, the task is
// undecided until the drain's end (the kernel path's pending samples), and
// only then takes the name it inherited. (`record --comm ueprodx` on the
// kernel left out a sample of a ueprodx just forked from the test, as the
// test's.)
func TestTaskFilterForkedThenExeced(t *testing.T) {
	// Task ids no process of this machine has: /proc cannot name them.
	const parent, child = 1<<22 - 3, 1<<22 - 2
	for _, tid := range []int{parent, child} {
		if _, err := os.Stat("/proc/" + strconv.Itoa(tid)); err == nil {
			t.Skipf("task %d exists here", tid)
		}
	}
	f := newTaskFilter(nil, []string{"ueprodx"})
	f.rename(parent, "record.test")
	f.fork(child, parent)
	if _, decided := f.match(child, child, false); decided {
		t.Fatal("a forked task, gone and named by no record, was decided before the drain's end")
	}
	f.rename(child, "ueprodx") // its exec's COMM, from another ring
	if keep, decided := f.match(child, child, true); !keep || !decided {
		t.Errorf("after its exec's COMM: keep %v decided %v, want kept", keep, decided)
	}
	// Never renamed: at the drain's end it takes its parent's name.
	g := newTaskFilter(nil, []string{"record.test"})
	g.rename(parent, "record.test")
	g.fork(child, parent)
	if keep, decided := g.match(child, child, true); !keep || !decided {
		t.Errorf("a forked task named by no record: keep %v decided %v, want its parent's name", keep, decided)
	}
}
