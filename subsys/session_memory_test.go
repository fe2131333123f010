package subsys

import (
	"context"
	"testing"
)

// TestSessionMemoryBounded: a session holds at most twice its BufferBytes
// however small the records a writer floods it with — each record's
// metadata takes its share of the buffer, as a perf sample's header does
// of perf's ring — and every record is read or counted lost.
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
}
