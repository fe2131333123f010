package subsys

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestCounts checks FileCounts: writes are counted once accepted, a
// disabled event's rejected writes are not, and a session's drops are
// counted per event.
func TestCounts(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	idxA, err := e.reg(f, "cnt_a u32 x", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	idxB, err := e.reg(f, "cnt_b u64 y", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := func(text string) {
		t.Helper()
		// user_events_status order: compare as a set of lines.
		got := e.read(FileCounts)
		if !sameLines(got, text) {
			t.Errorf("%s:\n%s\nwant:\n%s", FileCounts, got, text)
		}
	}
	want("cnt_a 0 0\ncnt_b 0 0\n")

	// Disabled: EBADF, not counted.
	if _, err := f.Writev(w0, le32(idxA), le32(1)); err == nil {
		t.Fatal("write to a disabled event succeeded")
	}
	want("cnt_a 0 0\ncnt_b 0 0\n")

	e.enable("cnt_a", true)
	for range 3 {
		if _, err := f.Writev(w0, le32(idxA), le32(1)); err != nil {
			t.Fatal(err)
		}
	}
	// A payload too short for the fields is EINVAL and not counted.
	if _, err := f.Writev(w0, le32(idxA), []byte{1}); err == nil {
		t.Fatal("short payload accepted")
	}
	want("cnt_a 3 0\ncnt_b 0 0\n")

	// A session with room for one record drops the rest, per event.
	ss := e.s.NewSession(SessionOptions{BufferBytes: 24})
	defer ss.Close()
	if err := ss.Attach(e.s.Lookup("user_events", "cnt_b")); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := f.Writev(w0, le32(idxB), make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	if ss.Lost() == 0 {
		t.Fatalf("the session lost nothing: the test's buffer is too big")
	}
	want("cnt_a 3 0\ncnt_b 4 " + strconv.FormatUint(ss.Lost(), 10) + "\n")
}

func sameLines(a, b string) bool {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	slices.Sort(la)
	slices.Sort(lb)
	return slices.Equal(la, lb)
}

// Writers on many CPUs at once are all counted: the shards add up.
func TestCountsShards(t *testing.T) {
	s := New(Options{NumCPU: 6})
	p := s.NewProcess(newMem())
	f := s.Open()
	defer f.Close()
	idx, err := f.Register(p, root, regArgs("shard u32 x", check, 0, 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	ev := s.Lookup("user_events", "shard")
	if err := s.SetFtrace(ev, true); err != nil {
		t.Fatal(err)
	}
	if len(ev.counts) != 8 {
		t.Errorf("%d shards for 6 CPUs, want 8", len(ev.counts))
	}
	var wg sync.WaitGroup
	for cpu := range 20 { // more writers than shards, and CPUs past NumCPU
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := Writer{PID: int32(100 + cpu), TGID: 100, Comm: "w", CPU: cpu}
			for range 1000 {
				if _, err := f.Writev(w, le32(idx), le32(7)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if w, d := ev.Counts(); w != 20*1000 || d != 0 {
		t.Errorf("counts %d written, %d dropped; want 20000, 0", w, d)
	}
}
