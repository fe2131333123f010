package daemon

import (
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// madeUpTID is the i-th of n thread ids no task has, as a hostile producer
// makes them up: the top of the pid space.
func madeUpTID(i, n int) uint32 { return uint32(ringcheck.PIDMax() - 1 - i%n) }

// TestMadeUpThreadIDsCostTheProducer: a producer whose records cycle
// through 8 000 made-up thread ids — ids no task has, each of which the
// daemon would believe (a thread that exited) after checking /proc — gets
// its ration of checks, ringcheck.CheckBurst and then ringcheck.CheckRate a second; its
// other records go under its process id, counted, and every record is
// delivered. (Each record cost the merger, the single goroutine that
// drained version-1 rings then, two system calls: ~200 000 records a
// second, for every producer behind it.)
func TestMadeUpThreadIDsCostTheProducer(t *testing.T) {
	s := serve(t, Config{})
	ss := s.Subsystem().NewSession(subsysSessionOptions(4 << 20))
	defer ss.Close()
	rc := newRingClient(t, s, "tid_made_up", 1<<20)
	if _, err := ss.AttachMatching("user_events:tid_made_up", false); err != nil {
		t.Fatal(err)
	}
	const n = 8000
	began := time.Now()
	for i := range 2 * n {
		for !rc.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: rc.idx, TID: madeUpTID(i, n)}, u32rec(uint32(i))) {
			s.Flush() // the ring is full: let the drainers catch up
		}
	}
	s.Flush()
	elapsed := time.Since(began)
	recs := readSession(t, ss, 2*n)
	pid := recs[0].PID
	tids := map[int32]bool{}
	underPID := 0
	for _, r := range recs {
		if madeUpTID(int(wire.LE.Uint32(r.Raw[8:])), n) == uint32(pid) {
			continue // made up as the process's own id: delivered as it
		}
		if r.TID == pid {
			underPID++
		} else {
			tids[r.TID] = true
		}
	}
	ration := ringcheck.CheckBurst + int(elapsed.Seconds()*ringcheck.CheckRate) + 1
	if len(tids) > ration {
		t.Errorf("%d made-up thread ids reached the session in %v; the ration is %d", len(tids), elapsed, ration)
	}
	st := s.RingStats()
	// A made-up id may be a live thread of another process: forged.
	if st.Delivered != 2*n || st.UncheckedTID+st.ForgedTID != uint64(underPID) || st.UncheckedTID == 0 {
		t.Errorf("ring stats %+v; want %d delivered, %d of them under the process id, counted unchecked or forged", st, 2*n, underPID)
	}
	if got := s.Stats().UncheckedTID; got != st.UncheckedTID {
		t.Errorf("Stats shows %d unchecked thread ids, RingStats %d", got, st.UncheckedTID)
	}
}
