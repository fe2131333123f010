package daemon

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/subsys"
)

// ringClient is a connection with an event enabled in the trace and a
// ring shared: what a userevents File with the ring transport is.
func ringClient(t *testing.T, s *testServer, name string) (*Client, uint32, *shmring.Producer) {
	t.Helper()
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	idx, _, err := c.Register(reg(a.addr(0), 0), name+" u32 v", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(c, "events/user_events/"+name+"/enable", "1"); err != nil {
		t.Fatal(err)
	}
	ring := newRing(t, 1<<23)
	if err := c.ShareRing(ring.Fd()); err != nil {
		t.Fatal(err)
	}
	return c, idx, ring
}

// TestRingTruncateClearsPublished: truncating trace (an O_TRUNC open)
// clears the records a client published into its ring before it, as it
// clears writes that returned before it — not only those the drainer
// happened to have delivered. (Without the flush, many of a burst of
// records published just before were still in the ring, and reached the
// emptied trace afterwards.)
func TestRingTruncateClearsPublished(t *testing.T) {
	s := serve(t, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1, BufferKB: 8192})})
	c, idx, ring := ringClient(t, s, "trunc_ev")
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
// the drainer has yet to deliver.
func TestRingSocketWriteKeepsOrder(t *testing.T) {
	s := serve(t, Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1, BufferKB: 8192})})
	c, idx, ring := ringClient(t, s, "order_ev")
	cons, err := Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ss, err := cons.NewSession(SessionOptions{BufferBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Attach("order_ev", false); err != nil {
		t.Fatal(err)
	}
	const n = 100000
	for i := range n {
		if !ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: 7}, u32rec(uint32(i))) {
			t.Fatal("ring full")
		}
	}
	if _, err := c.Writev(7, 0, append(le.AppendUint32(nil, idx), u32rec(n)...)); err != nil {
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
			got = append(got, le.Uint32(r.Raw[8:]))
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
