package shmring

import (
	"testing"
	"time"
)

// TestInterruptEndsWait: Interrupt from another goroutine ends a Wait on
// an idle ring long before its hour's timeout (the test's own timeout
// fails it otherwise).
func TestInterruptEndsWait(t *testing.T) {
	_, c := pair(t, 1<<16)
	done := make(chan bool)
	go func() { done <- c.Wait(time.Hour) }()
	// The waiter may not have set its word yet: repeat until it returns.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		c.Interrupt()
		select {
		case ready := <-done:
			if ready {
				t.Error("Wait reported a record on an empty ring")
			}
			return
		case <-tick.C:
		}
	}
}
