package subsys

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// stallingMem is memory whose writes, once stall is set, block until
// release is closed, as another process's memory does whose page faults a
// FUSE server or userfaultfd never serves; entered hears of blocked
// writes.
type stallingMem struct {
	*fakeMem
	stall   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (m *stallingMem) SetBit(addr uint64, bit uint, on bool) error {
	if m.stall.Load() {
		select {
		case m.entered <- struct{}{}:
		default:
		}
		<-m.release
	}
	return m.fakeMem.SetBit(addr, bit, on)
}

// failIfStuck fails the test if done is not closed while the stalled
// writes still block: what it waits for must not wait for them. (The
// limit only bounds how long a broken build hangs; a passing one never
// waits for it.)
func failIfStuck(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s waited for memory whose writes block", what)
	}
}

// TestEnableDoesNotWaitForStalledMemory: 20 processes registered an event
// and their memory now blocks every write. An enable of the event writes
// their bits outside the subsystem's lock, so while it waits for those
// writes, a disable of the event by another caller completes — writing a
// well-behaved process's bit before it returns, and queueing the stalled
// ones' for their writers — and so do registrations and reads of status.
// Once the memory answers, every bit ends as the last state. (Each write
// was made with the lock held: 20 stalled callers held every enable,
// registration and status read for 20 StallLimits.)
func TestEnableDoesNotWaitForStalledMemory(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	t.Cleanup(func() { f.Close() })
	if _, err := e.reg(f, "stall_ev u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	const nStalled = 20
	release, entered := make(chan struct{}), make(chan struct{}, nStalled)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before f.Close, should the test fail with the writes blocked
	var stalled []*stallingMem
	for range nStalled {
		m := &stallingMem{fakeMem: newMem(), entered: entered, release: release}
		if _, err := f.Register(e.s.NewProcess(m), root, regArgs("stall_ev u32 a", check, 0, 4, 0)); err != nil {
			t.Fatal(err)
		}
		m.stall.Store(true)
		stalled = append(stalled, m)
	}
	enabled := make(chan struct{})
	go func() {
		defer close(enabled)
		e.enable("stall_ev", true)
	}()
	// The enable found every process idle, so it writes them all, in
	// parallel: wait until it is blocked in each stalled one's memory. (A
	// caller that finds a process idle becomes its writer and waits for
	// it; had the disable below come before the enable owned them all, it
	// would have found some idle and waited for them, as it should.)
	for range nStalled {
		select {
		case <-entered:
		case <-enabled:
			t.Fatal("the enable returned without writing the stalled processes' bits")
		}
	}
	// And the well-behaved process's bit is set and its writer gone (the
	// enable wrote it in parallel), so that the disable finds it idle and
	// writes it itself.
	testutil.Wait(t, "the well-behaved process's bit to be written", func() bool {
		e.p.wmu.Lock()
		defer e.p.wmu.Unlock()
		return !e.p.writing && e.mem.u32(check) != 0
	})
	others := make(chan struct{})
	go func() {
		defer close(others)
		e.enable("stall_ev", false)
		if e.mem.u32(check) != 0 {
			t.Error("the disable returned before clearing the well-behaved process's bit")
		}
		p := e.s.NewProcess(newMem())
		if _, err := f.Register(p, root, regArgs("other_ev u32 a", check, 0, 4, 0)); err != nil {
			t.Error(err)
		}
		e.read("user_events_status")
	}()
	failIfStuck(t, "a disable, a registration and a status read", others)
	select {
	case <-enabled:
		t.Fatal("the enable returned while the writes it made were blocked")
	default:
	}
	unblock()
	failIfStuck(t, "the enable, once the memory answered,", enabled)
	// The disable queued the stalled processes' bits for their writers:
	// they end cleared.
	for i, m := range stalled {
		testutil.Wait(t, fmt.Sprintf("stalled process %d's bit to be cleared", i), func() bool { return m.u32(check) == 0 })
	}
}
