package daemon

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

func subsysSessionOptions(bytes int) subsys.SessionOptions {
	return subsys.SessionOptions{BufferBytes: bytes}
}

// readSession reads n records from ss, waiting for them up to a minute.
func readSession(t *testing.T, ss *subsys.Session, n int) []subsys.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []subsys.Record
	for len(out) < n {
		recs, err := ss.Read(ctx, make([]byte, 1<<20), nil)
		if err != nil {
			t.Fatalf("after %d of %d records: %v", len(out), n, err)
		}
		out = append(out, recs...)
	}
	if len(out) != n {
		t.Fatalf("%d records, want %d", len(out), n)
	}
	return out
}

// ringClient is a connection with an enabled event and a shared ring (of
// ringVersion). Its records say they were written on CPU cpu: the ring of
// a set they go into, and so the drainer, is always the same.
type ringClient struct {
	c    *client.Conn
	idx  uint32
	ring *testRing
	cpu  uint32
}

func newRingClient(t *testing.T, s *testServer, name string, size int) *ringClient {
	t.Helper()
	_, c, idx := producer(t, s, name+" u32 v")
	if err := writeFile(c, "events/user_events/"+name+"/enable", "1"); err != nil {
		t.Fatal(err)
	}
	return &ringClient{c: c, idx: idx, ring: shareTestRing(t, c, size)}
}

// publish writes v as a producer does: reserve, stamp, fill, commit.
func (rc *ringClient) publish(idx uint32, payload []byte) bool {
	return rc.publishSlowly(idx, payload, 0)
}

// publishSlowly is publish taking at least delay between its stamp and
// its commit, as a producer preempted there does.
func (rc *ringClient) publishSlowly(idx uint32, payload []byte, delay time.Duration) bool {
	v, ok := rc.ring.Reserve(shmring.Meta{WriteIndex: idx, CPU: rc.cpu}, len(payload))
	if !ok {
		return false
	}
	st := stamp.Take()
	v.Stamp(st.Time, uint32(st.TID), rc.cpu)
	copy(v.Payload(), payload)
	if delay > 0 {
		time.Sleep(delay)
	}
	v.Commit()
	return true
}

// TestMergeOrderAcrossRings: producers in two connections publish at the
// same time, some of their records taking 50 µs between stamp and commit
// (a preempted producer); the drainers, with no flush to force them, deliver
// their records to a session in time order across the rings, as ftrace
// merges its per-CPU buffers.
func TestMergeOrderAcrossRings(t *testing.T) {
	// A producer preempted between reserving and committing holds the
	// merge as long as it takes: the order is then exact on any machine.
	holdMax = time.Hour
	t.Cleanup(func() { holdMax = holdMaxDefault }) // after the server's cleanup: its drainers read it
	s := serve(t, Config{})
	ss := s.Subsystem().NewSession(subsysSessionOptions(16 << 20))
	defer ss.Close()
	a := newRingClient(t, s, "merge_a", 1<<20)
	b := newRingClient(t, s, "merge_b", 1<<20)
	if _, err := ss.AttachMatching("user_events:merge_*", false); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	var wg sync.WaitGroup
	for _, rc := range []*ringClient{a, b} {
		wg.Go(func() {
			for i := range n {
				delay := time.Duration(0)
				if i%97 == 0 {
					delay = 50 * time.Microsecond
				}
				for !rc.publishSlowly(rc.idx, u32rec(uint32(i)), delay) {
					time.Sleep(10 * time.Microsecond) // full: let the daemon drain
				}
			}
		})
	}
	wg.Wait()
	// No Flush: the drainers deliver on their own.
	testutil.Wait(t, "every record delivered", func() bool { return s.RingStats().Delivered == 2*n })
	recs := readSession(t, ss, 2*n)
	for i := 1; i < len(recs); i++ {
		if recs[i].TS < recs[i-1].TS {
			t.Fatalf("record %d (%s, t=%d) after record %d (%s, t=%d): not in time order",
				i, recs[i].Event.Name(), recs[i].TS, i-1, recs[i-1].Event.Name(), recs[i-1].TS)
		}
	}
	if st := s.RingStats(); st.OutOfOrder != 0 || st.Held != 0 {
		t.Errorf("ring stats %+v; want nothing out of order or held", st)
	}
}

// TestRingLossRecords: a loss record counts records its producer dropped
// for its own event: the trace says LOST before the next record, the
// session's lost count and the event's counts include them. A loss record
// that is malformed or names an event of another connection is rejected.
func TestRingLossRecords(t *testing.T) {
	s := serve(t, Config{})
	ss := s.Subsystem().NewSession(subsysSessionOptions(1 << 20))
	defer ss.Close()
	victim := newRingClient(t, s, "loss_victim", 1<<16)
	rc := newRingClient(t, s, "loss_ev", 1<<16)
	if _, err := ss.AttachMatching("user_events:loss_*", false); err != nil {
		t.Fatal(err)
	}
	loss := func(idx uint32, pad uint32, n uint64) []byte {
		return wire.LE.AppendUint64(wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), pad), n)
	}
	for _, bad := range [][]byte{
		loss(victim.idx+1, 0, 5)[:12], // short
		loss(rc.idx, 1, 5),            // padding not zero
		loss(rc.idx+1, 0, 5),          // an index this connection does not have
		loss(1<<31, 0, 5),             // negative
	} {
		if !rc.publish(wire.LostIndex, bad) {
			t.Fatal("ring full")
		}
	}
	if !rc.publish(wire.LostIndex, loss(rc.idx, 0, 7)) || !rc.publish(rc.idx, u32rec(1)) {
		t.Fatal("ring full")
	}
	s.Flush()
	st := s.RingStats()
	if st.Lost != 7 || st.LostRecords != 1 || st.Rejected != 4 || st.Delivered != 1 {
		t.Errorf("ring stats %+v; want 7 lost in 1 loss record, 4 rejected, 1 delivered", st)
	}
	if got := ss.Lost(); got != 7 {
		t.Errorf("session lost %d, want 7", got)
	}
	tr := readFile(t, rc.c, "trace")
	lost, rec := strings.Index(tr, "[LOST 7 EVENTS]"), strings.Index(tr, "loss_ev: v=0x1")
	if lost < 0 || rec < 0 || lost > rec || strings.Count(tr, "LOST") != 1 {
		t.Errorf("trace has no LOST 7 line before the record:\n%s", tr)
	}
	if w, d := s.Subsystem().Lookup("user_events", "loss_ev").Counts(); w != 8 || d != 7 {
		t.Errorf("loss_ev counts written %d dropped %d, want 8 and 7", w, d)
	}
	if w, d := s.Subsystem().Lookup("user_events", "loss_victim").Counts(); w != 0 || d != 0 {
		t.Errorf("the other connection's event counts written %d dropped %d, want none", w, d)
	}
}

// exitedThread returns the id of a thread of this process that has
// ended (or is ending): a goroutine locked to its thread exits without
// unlocking it, which ends the thread — unless the thread is the main
// one, which the runtime keeps (wedged) instead; a goroutine that lands
// there keeps it busy, unlocked once a thread has ended, so that the next
// try runs on another.
func exitedThread() uint32 {
	hold := make(chan struct{})
	defer close(hold)
	for {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread()
			id := unix.Gettid()
			tid <- id
			if id == os.Getpid() {
				<-hold
				runtime.UnlockOSThread()
			}
			// Otherwise the thread ends with the goroutine.
		}()
		if id := <-tid; id != os.Getpid() {
			return uint32(id)
		}
	}
}

// TestRingThreadIDs: a record is delivered under the thread it names when
// that is a thread of the connection's process, or no live task at all (a
// thread that exited before the daemon drained it); a live thread of
// another process is forged: the record goes under the process id, and is
// counted.
func TestRingThreadIDs(t *testing.T) {
	s := serve(t, Config{})
	ss := s.Subsystem().NewSession(subsysSessionOptions(1 << 20))
	defer ss.Close()
	rc := newRingClient(t, s, "tid_ev", 1<<16)
	if _, err := ss.AttachMatching("user_events:tid_ev", false); err != nil {
		t.Fatal(err)
	}
	gone := exitedThread()
	testutil.Wait(t, "the locked thread to exit", func() bool {
		return unix.Access(fmt.Sprintf("/proc/%d/task/%d", os.Getpid(), gone), unix.F_OK) != nil
	})
	me := uint32(unix.Gettid())
	pid := int32(os.Getpid())
	for _, tid := range []uint32{me, gone, 1} { // 1: init, another process's live thread
		if !rc.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: rc.idx, TID: tid}, u32rec(tid)) {
			t.Fatal("ring full")
		}
	}
	s.Flush()
	recs := readSession(t, ss, 3)
	want := []int32{int32(me), int32(gone), pid}
	for i, r := range recs {
		if r.TID != want[i] || r.PID != pid {
			t.Errorf("record %d (tid %d claimed): delivered as pid %d tid %d, want pid %d tid %d", i, wire.LE.Uint32(r.Raw[8:]), r.PID, r.TID, pid, want[i])
		}
	}
	if st := s.RingStats(); st.ForgedTID != 1 {
		t.Errorf("ring stats %+v; want 1 forged thread id", st)
	}
}
