package subsys

import (
	"math"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// lostSetup is an enabled event __lost, registered through f (closed at
// the test's end), with a session attached, and the writer whose losses
// the tests report.
func lostSetup(t *testing.T) (e *tenv, f *File, idx uint32, ss *Session, w Writer) {
	now := uint64(5_000_000_000)
	e = newTraceEnv(t, &now)
	f = e.s.Open()
	t.Cleanup(func() { f.Close() })
	idx, err := e.reg(f, "__lost u32 a", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.enable("__lost", true)
	ss = e.s.NewSession(SessionOptions{})
	t.Cleanup(func() { ss.Close() })
	if _, err := ss.AttachMatching("user_events:__lost", false); err != nil {
		t.Fatal(err)
	}
	return e, f, idx, ss, Writer{PID: 77, TGID: 70, Comm: "ringer", CPU: 1}
}

// TestWriteLost: records a producer dropped before they reached the
// subsystem count as written and dropped for their event, show as "LOST"
// in the trace text before the next record on their CPU and in the CPU's
// "dropped events" (per_cpu/cpuN/stats in the kernel), and add to every attached session's lost count. An
// index the file does not have changes nothing.
func TestWriteLost(t *testing.T) {
	e, f, idx, ss, w := lostSetup(t)

	other := e.s.Open()
	defer other.Close()
	wantErrno(t, "another file's index", other.WriteLost(w, 1, idx, 5), unix.ENOENT)
	wantErrno(t, "negative index", f.WriteLost(w, 1, 1<<31, 5), unix.EINVAL)
	if got := ss.Lost(); got != 0 {
		t.Fatalf("session lost %d after refused losses", got)
	}

	if err := f.WriteLost(w, 1_000_000_000, idx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteStamped(w, 1_000_000_100, idx, le32(9)); err != nil {
		t.Fatal(err)
	}
	tr := e.read("trace")
	if !strings.Contains(tr, "CPU:1 [LOST 5 EVENTS]\n") || !strings.Contains(tr, "__lost: a=0x9") ||
		strings.Index(tr, "LOST 5") > strings.Index(tr, "__lost: a=0x9") {
		t.Errorf("trace has no LOST line before the record:\n%s", tr)
	}
	if got := e.s.trace.ring.Stats(1).DroppedEvents; got != 5 {
		t.Errorf("CPU 1's dropped events %d, want 5", got)
	}
	if got := ss.Lost(); got != 5 {
		t.Errorf("session lost %d, want 5", got)
	}
	ev := e.s.Lookup("user_events", "__lost")
	if written, dropped := ev.Counts(); written != 6 || dropped != 5 {
		t.Errorf("event counts written %d dropped %d, want 6 and 5", written, dropped)
	}
}

// TestWriteLostSaturates: the counts a writer's loss claim feeds saturate
// rather than wrap, so that a claim of 2^64−1 cannot make another writer's
// 5 lost records read as 4 — in the session's lost count, the event's
// written and dropped, and the CPU's dropped events. (They wrapped.)
func TestWriteLostSaturates(t *testing.T) {
	e, f, idx, ss, w := lostSetup(t)
	for _, n := range []uint64{5, math.MaxUint64, 5} {
		if err := f.WriteLost(w, 1_000_000_000, idx, n); err != nil {
			t.Fatal(err)
		}
	}
	if got := ss.Lost(); got != math.MaxUint64 {
		t.Errorf("session lost %d, want it saturated", got)
	}
	if written, dropped := e.s.Lookup("user_events", "__lost").Counts(); written != math.MaxUint64 || dropped != math.MaxUint64 {
		t.Errorf("event counts written %d dropped %d, want them saturated", written, dropped)
	}
	if got := e.s.trace.ring.Stats(1).DroppedEvents; got != math.MaxUint64 {
		t.Errorf("CPU 1's dropped events %d, want them saturated", got)
	}
}
