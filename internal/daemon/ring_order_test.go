package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
)

// ringClientOf is newRingClient with an 8 MiB ring, as its parts.
func ringClientOf(t *testing.T, s *testServer, name string) (*client.Conn, uint32, *testRing) {
	t.Helper()
	rc := newRingClient(t, s, name, 1<<23)
	return rc.c, rc.idx, rc.ring
}

// TestRingTruncateClearsPublished: truncating trace (an O_TRUNC open)
// clears the records a client published into its ring before it, as it
// clears writes that returned before it — not only those the drainer
// happened to have delivered. (Without the flush, many of a burst of
// records published just before were still in the ring, and reached the
// emptied trace afterwards.)
func TestRingTruncateClearsPublished(t *testing.T) {
	s := serve(t, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1, BufferKB: 8192})})
	c, idx, ring := ringClientOf(t, s, "trunc_ev")
	const n = 100000
	for i := range n {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	f, err := c.Open("trace", os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(n)) {
		t.Fatal("ring full")
	}
	tr := readFile(t, c, "trace")
	if got := strings.Count(tr, "trunc_ev: v="); got != 1 || !strings.Contains(tr, "trunc_ev: v=0x186a0 (100000)") {
		t.Errorf("after the truncation the trace has %d records, want only the one written after it", got)
	}
}

// TestRingSocketWriteKeepsOrder: a write a ring client sends over the
// socket — one it could not check itself — reaches the trace and sessions
// after the records it published into its ring before, not before those
// the drainers have yet to deliver.
func TestRingSocketWriteKeepsOrder(t *testing.T) {
	s := serve(t, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1, BufferKB: 8192})})
	c, idx, ring := ringClientOf(t, s, "order_ev")
	ss := sessionOn(t, s, "order_ev", client.SessionOptions{BufferBytes: 16 << 20})
	const n = 100000
	for i := range n {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	if _, err := c.Writev(7, 0, append(wire.LE.AppendUint32(nil, idx), u32rec(n)...)); err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for {
		recs, lost, _, err := ss.Poll(nil)
		if err != nil {
			t.Fatal(err)
		}
		if lost != 0 {
			t.Fatalf("the session lost %d records", lost)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			got = append(got, wire.LE.Uint32(r.Raw[8:]))
		}
	}
	if len(got) != n+1 {
		t.Fatalf("the session has %d records, want %d", len(got), n+1)
	}
	for i, v := range got {
		if v != uint32(i) {
			t.Fatalf("record %d carries %d: the socket write (%d) came out of order", i, v, n)
		}
	}
	tr := readFile(t, c, "trace")
	if i := strings.LastIndex(tr, "order_ev: v="); i < 0 || !strings.HasPrefix(tr[i:], "order_ev: v=0x186a0 (100000)") {
		t.Errorf("the trace does not end with the socket write")
	}
}

// TestRingTracePipe: trace_pipe gives the records a client published into
// its ring before the read at once, and a reader waiting on the empty pipe
// wakes for a record published while it waits — the drainers deliver it
// without a read asking for a flush.
func TestRingTracePipe(t *testing.T) {
	s := serve(t, Config{})
	_, idx, ring := ringClientOf(t, s, "pipe_ev")
	reader, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	pipe, err := reader.Open("trace_pipe", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	buf := make([]byte, 1<<16)
	n, err := pipe.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(buf[:n]); strings.Count(got, "pipe_ev: v=") != 3 || !strings.Contains(got, "pipe_ev: v=0x2 (2)") {
		t.Fatalf("the first trace_pipe read after three records were published:\n%s", got)
	}
	read := make(chan string, 1)
	go func() {
		n, err := pipe.Read(buf)
		if err != nil {
			read <- err.Error()
			return
		}
		read <- string(buf[:n])
	}()
	// The daemon's reader waits in the pipe before the record comes.
	waitBlockedIn(t, "subsys.(*Handle).ReadContext")
	if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(3)) {
		t.Fatal("ring full")
	}
	select {
	case got := <-read:
		if strings.Count(got, "pipe_ev: v=") != 1 || !strings.Contains(got, "pipe_ev: v=0x3 (3)") {
			t.Fatalf("the waiting trace_pipe read returned:\n%s", got)
		}
	case <-time.After(waitLimit):
		t.Fatalf("a trace_pipe reader still waits %v after a record was published", waitLimit)
	}
}

// waitBlockedIn waits until a goroutine of this process — the daemon is
// in it — is blocked with fn on its stack.
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(waitLimit)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			head, _, _ := strings.Cut(g, "\n")
			if strings.Contains(g, fn) && !strings.Contains(head, "[running]") && !strings.Contains(head, "[runnable]") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked in %s after %v", fn, waitLimit)
		}
		time.Sleep(time.Millisecond)
	}
}
