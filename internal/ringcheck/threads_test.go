package ringcheck

import (
	"testing"
	"time"
)

// TestThreadCheckRation: the ration refills at CheckRate a second up to
// CheckBurst.
func TestThreadCheckRation(t *testing.T) {
	var tc Threads
	tc.Init(1)
	now := tc.refilled
	for i := range CheckBurst {
		if !tc.spend(now) {
			t.Fatalf("check %d of the burst refused", i)
		}
	}
	if tc.spend(now) {
		t.Fatal("a check past the burst at once")
	}
	now += int64(time.Second)
	for i := range CheckRate {
		if !tc.spend(now) {
			t.Fatalf("check %d of a second's refill refused", i)
		}
	}
	if tc.spend(now) {
		t.Error("more than a second's refill")
	}
	now += int64(time.Second) / CheckRate / 2
	if tc.spend(now) {
		t.Error("a check after half a refill's interval")
	}
	now += int64(time.Second) / CheckRate / 2
	if !tc.spend(now) || tc.spend(now) {
		t.Error("want one check after a refill's interval")
	}
	now += 100 * int64(time.Second)
	if tc.spend(now); tc.checks != CheckBurst-1 {
		t.Errorf("after 100 s, %d checks left, want the burst less one", tc.checks)
	}
}
