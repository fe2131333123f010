package daemon

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// TestLossRecordsCannotWrap: a producer's loss record claiming 2^64−1
// records is cut to what its ring could have dropped since it was shared,
// and counted; the counts it feeds — the session's lost count, the event's
// written and dropped, the trace's LOST lines, the rings' — never wrap, so
// another producer's losses on the same event stay visible. (The audit: one
// such record made every session of the event report its real loss minus
// one, and status show DROPPED 18446744073709551615.)
func TestLossRecordsCannotWrap(t *testing.T) {
	s := serve(t, Config{})
	ss := s.Subsystem().NewSession(subsysSessionOptions(1 << 20))
	defer ss.Close()
	victim := newRingClient(t, s, "lossw_ev", 1<<16)
	attacker := newRingClient(t, s, "lossw_ev", 1<<16)
	if _, err := ss.AttachMatching("user_events:lossw_ev", false); err != nil {
		t.Fatal(err)
	}
	loss := func(idx uint32, n uint64) []byte {
		return wire.LE.AppendUint64(wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), 0), n)
	}
	for range 2 {
		if !attacker.publish(wire.LostIndex, loss(attacker.idx, math.MaxUint64)) || !attacker.publish(attacker.idx, u32rec(1)) {
			t.Fatal("ring full")
		}
	}
	if !victim.publish(wire.LostIndex, loss(victim.idx, 3)) || !victim.publish(victim.idx, u32rec(2)) {
		t.Fatal("ring full")
	}
	s.Flush()
	const huge = 1 << 62 // what no ring can have dropped since the test began
	st := s.RingStats()
	if st.LostCapped != 2 || st.LostRecords != 3 || st.Lost < 3 || st.Lost >= huge {
		t.Errorf("ring stats %+v; want 2 loss records capped of 3, lost at least the victim's 3 and below 2^62", st)
	}
	if got := ss.Lost(); got != st.Lost {
		t.Errorf("session lost %d, the rings %d: want the same, the victim's 3 among them", got, st.Lost)
	}
	w, d := s.Subsystem().Lookup("user_events", "lossw_ev").Counts()
	if d != st.Lost || w != d+3 {
		t.Errorf("lossw_ev counts written %d dropped %d; want dropped %d and written 3 more", w, d, st.Lost)
	}
	var lines uint64
	for _, m := range regexp.MustCompile(`\[LOST (\d+) EVENTS\]`).FindAllStringSubmatch(readFile(t, victim.c, "trace"), -1) {
		n, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil || n >= huge {
			t.Errorf("trace: LOST %s EVENTS", m[1])
		}
		lines += n
	}
	if lines != st.Lost {
		t.Errorf("trace's LOST lines add up to %d, the rings' lost to %d", lines, st.Lost)
	}
	if text := string(s.Subsystem().AppendCounts(nil)); strings.Contains(text, strconv.FormatUint(math.MaxUint64, 10)) {
		t.Errorf("counts show a wrapped or saturated number:\n%s", text)
	}
}
