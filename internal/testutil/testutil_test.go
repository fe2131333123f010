package testutil

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestEventually(t *testing.T) {
	var n atomic.Int32
	if !Eventually(func() bool { return n.Add(1) == 5 }) {
		t.Fatal("a condition that holds at the fifth poll: not met")
	}
	if n.Load() != 5 {
		t.Errorf("polled %d times, want 5: it must stop once the condition holds", n.Load())
	}
	Wait(t, "a condition that holds at once", func() bool { return true })
}

func TestBuildC(t *testing.T) {
	src := filepath.Join(t.TempDir(), "ok.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := BuildC(t, "", src, "-O1", "-Wall")
	if filepath.Base(bin) != "ok" {
		t.Errorf("built %s, want it named ok", bin)
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v, %v", bin, st, err)
	}
}

// TestCPUTime: work on this process's threads shows in CPUTime, and it
// never goes back.
func TestCPUTime(t *testing.T) {
	c0 := CPUTime()
	if c0 <= 0 {
		t.Fatalf("CPUTime = %v at the start of a test: a process that ran Go's start-up has used some", c0)
	}
	last, x := c0, uint64(1)
	Wait(t, "CPUTime to grow while the test computes", func() bool {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		c := CPUTime()
		if c < last {
			t.Fatalf("CPUTime went back from %v to %v", last, c)
		}
		last = c
		return c > c0+time.Millisecond
	})
	_ = x
}
