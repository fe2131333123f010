package stamp

import "testing"

// The own mode's table gives each thread id one area, the same each time,
// and two ids two areas.
func TestRseqAreaPerThread(t *testing.T) {
	if rseqAreas == nil {
		t.Skip("the own mode's table is not mapped (the C library's struct rseq is in use)")
	}
	// Ids no live thread of a test has: above the kernel's pid_max limit.
	const a, b = 1<<22 + 1, 1<<22 + 2
	pa, pb := rseqArea(a), rseqArea(b)
	if pa == nil || pb == nil || pa == pb {
		t.Fatalf("areas %p and %p for two threads", pa, pb)
	}
	if again := rseqArea(a); again != pa {
		t.Fatalf("thread %d got %p, then %p", a, pa, again)
	}
}
