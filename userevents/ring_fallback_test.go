package userevents_test

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/userevents"
)

// helloOKBefore is the length of the Hello's reply from a daemon before
// ring sets: the header, then version, pid and flags (wire's HelloOK
// without R).
const helloOKBefore = wire.HeaderSize + 12

// refusingRelay stands between clients and a real daemon at upstream: it
// passes every message on, descriptors included, except the Ring request,
// which it answers itself with EINVAL, as a daemon that refuses a client's
// ring does. It counts the writes that go through. With old set, it passes
// Ring requests on and instead cuts the Hello's reply to what a daemon
// before ring sets sends — no ring count — as such a daemon.
type refusingRelay struct {
	ln     *net.UnixListener
	writes atomic.Int64
	old    bool
	wg     sync.WaitGroup
}

const refusal = "ring: this daemon takes no rings"

// startOldRelay is startRefusingRelay for a daemon before ring sets.
func startOldRelay(t *testing.T, upstream string) (string, *refusingRelay) {
	return startRelay(t, upstream, true)
}

func startRefusingRelay(t *testing.T, upstream string) (string, *refusingRelay) {
	return startRelay(t, upstream, false)
}

func startRelay(t *testing.T, upstream string, old bool) (string, *refusingRelay) {
	sock := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	r := &refusingRelay{ln: ln, old: old}
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	r.wg.Go(func() {
		for {
			c, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			u, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: upstream, Net: "unixpacket"})
			if err != nil {
				c.Close()
				continue
			}
			r.wg.Go(func() { r.pass(u, c, false); c.Close() })
			r.wg.Go(func() { r.pass(c, u, true); u.Close() })
		}
	})
	return sock, r
}

// pass copies messages from src to dst until either side goes. From the
// client, a Ring request is answered to src instead: the client waits for
// its answer before it sends anything else, so the answer cannot overtake
// the daemon's.
func (r *refusingRelay) pass(src, dst *net.UnixConn, fromClient bool) {
	buf := make([]byte, wire.MaxMessage+1)
	oob := make([]byte, 256)
	le := wire.LE
	for {
		n, oobn, _, _, err := src.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		if !fromClient && r.old && n > helloOKBefore && le.Uint16(buf) == wire.OpHelloOK {
			n = helloOKBefore
		}
		if fromClient && !r.old && n >= 2 && le.Uint16(buf) == wire.OpRing {
			closeRights(oob[:oobn])
			out := wire.AppendResult(nil, 0, fmt.Errorf("%s: %w", refusal, unix.EINVAL))
			if _, err := src.Write(out); err != nil {
				return
			}
			continue
		}
		if fromClient && n >= 2 && le.Uint16(buf) == wire.OpWrite {
			r.writes.Add(1)
		}
		_, _, err = dst.WriteMsgUnix(buf[:n], oob[:oobn], nil)
		closeRights(oob[:oobn]) // sent: the receiver has its own copies
		if err != nil {
			return
		}
	}
}

func closeRights(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
}

// TestRingRefusedWritesOverSocket: when a daemon refuses the ring a File
// asks for, the File says so — SocketTransport, and RingError with the
// daemon's errno and words — and its writes go over the socket and reach
// the trace and sessions as they would with the socket transport.
func TestRingRefusedWritesOverSocket(t *testing.T) {
	upstream := startDaemon(t, daemon.Config{})
	sock, relay := startRefusingRelay(t, upstream)
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport}
	f := open(t, o)
	if f.Transport() != userevents.SocketTransport {
		t.Fatalf("transport %v; want the socket, the daemon refused the ring", f.Transport())
	}
	if err := f.RingError(); !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), refusal) {
		t.Errorf("RingError() = %v; want EINVAL with the daemon's reason %q", err, refusal)
	}
	name := uniq("ring_refused")
	ev := register(t, f, name+" u32 v", 0)
	ss := attachedSession(t, upstream, name, 0)
	fs := openTracefs(t, o)
	setEnable(t, fs, "user_events", name, true)
	waitBit(t, ev, true)
	const n = 3
	for i := range n {
		if err := ev.Write(binary.NativeEndian.AppendUint32(nil, uint32(100+i))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	// A write the kernel refuses is refused over the socket as well.
	if err := ev.Write([]byte{1}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a 1-byte payload for a u32: %v; want EINVAL", err)
	}
	if got := relay.writes.Load(); got != n+1 {
		t.Errorf("%d writes went over the socket; want %d", got, n+1)
	}
	if ev.Dropped() != 0 {
		t.Errorf("Dropped() = %d", ev.Dropped())
	}
	recs, _, _, err := ss.Poll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("the session has %d records; want %d", len(recs), n)
	}
	for i, r := range recs {
		if v := binary.NativeEndian.Uint32(r.Raw[8:]); v != uint32(100+i) {
			t.Errorf("record %d carries %d; want %d", i, v, 100+i)
		}
	}
	tr, err := fs.ReadFile("trace")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if want := fmt.Sprintf("%s: v=0x%x (%d)", name, 100+i, 100+i); !strings.Contains(string(tr), want) {
			t.Errorf("trace lacks %q:\n%s", want, tr)
		}
	}
}

// TestRingSocketFallbackKeepsOrder: a File on the ring sends over the
// socket a record it cannot check itself (a __data_loc record over 512
// bytes); that write reaches sessions after (in time order) the records the File published
// into its ring before it, not ahead of those the daemon has yet to drain.
func TestRingSocketFallbackKeepsOrder(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport, RingKB: 4096}
	f := open(t, o)
	if f.Transport() != userevents.RingTransport {
		t.Fatalf("no ring: %v", f.RingError())
	}
	name := uniq("ring_order")
	ev := register(t, f, name+" u32 n; __data_loc char[] s", 0)
	ss := attachedSession(t, sock, name, 16<<20)
	waitBit(t, ev, true)
	record := func(n uint32, s string) []byte {
		p := binary.NativeEndian.AppendUint32(nil, n)
		p = binary.NativeEndian.AppendUint32(p, uint32(len(s)+1)<<16|16) // s: at record offset 16, NUL included
		return append(append(p, s...), 0)
	}
	const n = 20000
	for i := range n {
		if err := ev.Write(record(uint32(i), "a")); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Write(record(n, strings.Repeat("b", 600))); err != nil {
		t.Fatal(err)
	}
	if ev.Dropped() != 0 {
		t.Fatalf("the ring dropped %d records", ev.Dropped())
	}
	// The session holds each CPU's records in their order, the CPUs'
	// runs as the daemon's per-CPU drainers delivered them: a reader
	// merges them by time, as perf's ordered events merge its per-CPU
	// rings (the goroutine may have moved between CPUs while it wrote).
	type written struct{ ts, n uint64 }
	var got []written
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
		for _, r := range recs { // r.Raw is the reply buffer's, until the next Poll
			got = append(got, written{r.TS, uint64(binary.NativeEndian.Uint32(r.Raw[8:]))})
		}
	}
	if len(got) != n+1 {
		t.Fatalf("the session has %d records, want %d", len(got), n+1)
	}
	slices.SortStableFunc(got, func(a, b written) int { return cmp.Compare(a.ts, b.ts) })
	for i, w := range got {
		if w.n != uint64(i) {
			t.Fatalf("record %d is write %d: the large write (%d), sent over the socket, came out of order", i, w.n, n)
		}
	}
}

// TestRingSetOrSocket: a File on a daemon that takes ring sets publishes
// into a set of the daemon's ring count, its records reaching the session;
// on a daemon before ring sets (no ring count in its Hello reply), it
// writes over the socket, and says why (EPROTONOSUPPORT).
func TestRingSetOrSocket(t *testing.T) {
	upstream := startDaemon(t, daemon.Config{Rings: 2})
	oldSock, _ := startOldRelay(t, upstream)
	for _, c := range []struct {
		name      string
		sock      string
		transport userevents.Transport
		rings     int
	}{{"sets", upstream, userevents.RingTransport, 2}, {"before sets", oldSock, userevents.SocketTransport, 0}} {
		t.Run(c.name, func(t *testing.T) {
			o := &userevents.Options{Backend: userevents.Daemon, Socket: c.sock, Transport: userevents.RingTransport}
			f := open(t, o)
			if f.Transport() != c.transport || userevents.RingCount(f) != c.rings {
				t.Fatalf("transport %v with %d rings (ring error %v), want %v with %d", f.Transport(), userevents.RingCount(f), f.RingError(), c.transport, c.rings)
			}
			if c.rings == 0 && !errors.Is(f.RingError(), unix.EPROTONOSUPPORT) {
				t.Errorf("RingError() = %v, want EPROTONOSUPPORT", f.RingError())
			}
			name := uniq("ring_set")
			ev := register(t, f, name+" u32 v", 0)
			ss := attachedSession(t, upstream, name, 0)
			waitBit(t, ev, true)
			const n = 100
			for i := range n {
				if err := ev.Write(binary.NativeEndian.AppendUint32(nil, uint32(i))); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			recs, _, _, err := ss.Poll(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != n || ev.Dropped() != 0 {
				t.Fatalf("the session has %d records, %d dropped; want %d", len(recs), ev.Dropped(), n)
			}
		})
	}
}
