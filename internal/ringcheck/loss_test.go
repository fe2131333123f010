package ringcheck

import (
	"math"
	"testing"
	"time"
)

// TestLossBudget: a claim is cut to one record per nanosecond on each
// possible CPU since the ring was shared, less what was claimed before,
// and a budget taken over goes on with what was claimed.
func TestLossBudget(t *testing.T) {
	b := NewLossBudget(time.Now().Add(-time.Second), 0)
	if n, capped := b.Cut(1000); n != 1000 || capped {
		t.Fatalf("an honest claim: %d, capped %v", n, capped)
	}
	n, capped := b.Cut(math.MaxUint64)
	if !capped || n > uint64(2*time.Second)*uint64(PossibleCPUs) {
		t.Fatalf("a huge claim: %d, capped %v", n, capped)
	}
	// Taken over: the new reader's budget has nothing left either.
	c := NewLossBudget(b.Since(), b.Claimed())
	if n, capped := c.Cut(uint64(time.Second) * uint64(PossibleCPUs)); !capped || n > uint64(time.Second)*uint64(PossibleCPUs) {
		t.Errorf("after a take-over: %d, capped %v", n, capped)
	}
	c.Charge(math.MaxUint64)
	if c.Claimed() != math.MaxUint64 {
		t.Errorf("Charge wrapped: %d", c.Claimed())
	}
}

// TestCPU: a CPU that cannot exist is taken modulo the possible CPUs.
func TestCPU(t *testing.T) {
	if got := CPU(0); got != 0 {
		t.Errorf("CPU(0) = %d", got)
	}
	if got := CPU(uint32(PossibleCPUs) + 1); got != 1%PossibleCPUs {
		t.Errorf("CPU(possible+1) = %d", got)
	}
	if got := CPU(math.MaxUint32); got < 0 || got >= PossibleCPUs {
		t.Errorf("CPU(max) = %d", got)
	}
}
