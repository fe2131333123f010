package subsys

import (
	"slices"
	"testing"
)

// recWatch records what a FileWatch is told.
type recWatch struct {
	calls []string
	state map[uint32]uint32 // index -> status, as told
}

func (w *recWatch) Index(idx uint32, ev *Event, status uint32) {
	w.calls = append(w.calls, "index "+ev.Tracepoint())
	if w.state == nil {
		w.state = map[uint32]uint32{}
	}
	if _, ok := w.state[idx]; ok {
		w.calls = append(w.calls, "index told twice")
	}
	w.state[idx] = status
}

func (w *recWatch) Status(idx uint32, status uint32) {
	if _, ok := w.state[idx]; !ok {
		w.calls = append(w.calls, "status before index")
	}
	w.state[idx] = status
}

// TestFileWatch: a watch learns the indices the file has, each one
// Register adds before it returns, and every status change of their events
// — and nothing once stopped, or once the file is closed.
func TestFileWatch(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	if _, err := e.reg(f, "first u32 a", 0, 0); err != nil {
		t.Fatal(err)
	}
	e.enable("first", true)
	var w recWatch
	stop := f.Watch(&w)
	if got := w.state[0]; got != StatusFtrace {
		t.Errorf("index 0 told with status %#x, want %#x (enabled before the watch)", got, StatusFtrace)
	}
	idx, err := e.reg(f, "second u32 a", 1, 0)
	if err != nil || idx != 1 {
		t.Fatalf("second: index %d, %v", idx, err)
	}
	if st, ok := w.state[1]; !ok || st != 0 {
		t.Fatalf("after Register returned, index 1 is %v (told %v), want told with status 0", st, ok)
	}
	// Another file's registration of the same event is not this file's.
	g := e.s.Open()
	defer g.Close()
	if _, err := g.Register(e.p, root, regArgs("second u32 a", check, 2, 4, 0)); err != nil {
		t.Fatal(err)
	}
	if len(w.state) != 2 {
		t.Errorf("another file's index reached the watch: %v", w.state)
	}
	e.enable("second", true)
	if w.state[1] != StatusFtrace {
		t.Errorf("enable: index 1 status %#x", w.state[1])
	}
	e.enable("first", false)
	if w.state[0] != 0 {
		t.Errorf("disable: index 0 status %#x", w.state[0])
	}
	if want := []string{"index first", "index second"}; !slices.Equal(w.calls, want) {
		t.Errorf("calls %q, want %q", w.calls, want)
	}
	// A synchronous consumer (a perf ring its reader maps) is told too.
	ss := e.s.NewSession(SessionOptions{Synchronous: true})
	evFirst := e.s.Lookup("user_events", "first")
	if err := ss.Attach(evFirst); err != nil {
		t.Fatal(err)
	}
	if w.state[0] != StatusPerf|WatchSync {
		t.Errorf("a synchronous session attached: index 0 status %#x, want %#x", w.state[0], StatusPerf|WatchSync)
	}
	ss.Close()
	if w.state[0] != 0 {
		t.Errorf("the synchronous session closed: index 0 status %#x", w.state[0])
	}
	stop()
	e.enable("first", true)
	if w.state[0] != 0 {
		t.Error("a stopped watch was told a status")
	}

	// A watch that is not stopped ends with the file.
	var w2 recWatch
	f.Watch(&w2)
	f.Close()
	e.enable("second", false)
	if w2.state[1] != StatusFtrace {
		t.Errorf("a watch of a closed file was told status %#x", w2.state[1])
	}
	var w3 recWatch
	f.Watch(&w3)
	if len(w3.calls) != 0 {
		t.Errorf("a closed file's watch was told %q", w3.calls)
	}
}
