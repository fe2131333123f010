package subsys

import (
	"context"
	"testing"
)

// TestSessionMemoryBounded: a session holds at most twice its BufferBytes
// however small the records a writer floods it with — each record's
// metadata takes its share of the buffer, as a perf sample's header does
// of perf's ring — and every record is read or counted lost, even after
// the session is closed; the buffer is unmapped once they have been.
func TestSessionMemoryBounded(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "tiny", 0, 0) // no fields: the smallest record perf can carry
	if err != nil {
		t.Fatal(err)
	}
	const bufBytes = 64 << 10
	ss := e.s.NewSession(SessionOptions{BufferBytes: bufBytes, Comm: true})
	defer ss.Close()
	if err := ss.Attach(e.s.Lookup("user_events", "tiny")); err != nil {
		t.Fatal(err)
	}
	const written = 20000
	for i := range written {
		w := Writer{PID: int32(100 + i%5000), TGID: 100, Comm: "w", CPU: 0} // a name record for many of them too
		if _, err := f.Writev(w, le32(idx)); err != nil {
			t.Fatal(err)
		}
	}
	ss.mu.Lock()
	held := len(ss.ring) + cap(ss.queue)*pendingCost
	charged := ss.used + ss.qlen*pendingCost
	ss.mu.Unlock()
	if held > 2*bufBytes || charged > bufBytes {
		t.Errorf("a session of %d bytes holds %d (ring %d, queue %d entries of %d); its records are charged %d", bufBytes, held, len(ss.ring), cap(ss.queue), pendingCost, charged)
	}
	if ss.Lost() == 0 {
		t.Fatal("nothing lost: the flood did not fill the buffer")
	}
	ss.Close()
	read := 0
	buf := make([]byte, 1<<20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // what is buffered, without waiting
	for {
		recs, err := ss.Read(ctx, buf, nil)
		if err != nil || len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if _, isComm := r.Comm(); !isComm {
				read++
			}
		}
	}
	if got := read + int(ss.Lost()); got != written {
		t.Errorf("read %d + lost %d = %d, want %d written", read, ss.Lost(), got, written)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.mem != nil || ss.ring != nil {
		t.Error("the closed session's buffer is still mapped after it was read")
	}
}

// TestSessionClosedEmptyUnmapped: closing a session with nothing buffered
// unmaps its buffer at once, and a record the write path still delivers
// to it after is not buffered (nor mapped again).
func TestSessionClosedEmptyUnmapped(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "cl u32 a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := e.s.Lookup("user_events", "cl")
	ss := e.s.NewSession(SessionOptions{BufferBytes: 4096})
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 1, TGID: 1, Comm: "w"}
	if _, err := f.Writev(w, le32(idx), le32(1)); err != nil {
		t.Fatal(err)
	}
	if recs, err := ss.Read(context.Background(), make([]byte, 4096), nil); err != nil || len(recs) != 1 {
		t.Fatalf("read %d records, %v; want 1", len(recs), err)
	}
	ss.Close()
	ss.deliver(ev, &w, 1, make([]byte, 12)) // as a writer that loaded the sessions before Close
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.mem != nil || ss.qlen != 0 {
		t.Errorf("closed and empty, the session holds a mapping (%v) or records (%d)", ss.mem != nil, ss.qlen)
	}
}

// TestSessionForgetsEventsOnceRead: once its buffer is read empty, a
// session refers to no event any more — a deleted one is not kept alive,
// and a long session's table of events does not grow.
func TestSessionForgetsEventsOnceRead(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "fg u32 a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ss := e.s.NewSession(SessionOptions{BufferBytes: 4096})
	defer ss.Close()
	if err := ss.Attach(e.s.Lookup("user_events", "fg")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Writev(Writer{PID: 1, TGID: 1, Comm: "w"}, le32(idx), le32(1)); err != nil {
		t.Fatal(err)
	}
	recs, err := ss.Read(context.Background(), make([]byte, 4096), nil)
	if err != nil || len(recs) != 1 || recs[0].Event == nil {
		t.Fatalf("read %v, %v; want one record of the event", recs, err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.evs) != 1 || len(ss.evIdx) != 0 {
		t.Errorf("read empty, the session still refers to %d events", len(ss.evs)-1)
	}
}
