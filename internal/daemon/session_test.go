package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// TestSessionOverSocket is a perf-like consumer in another connection:
// attaching enables the event, records arrive with their values and
// who wrote them, closing the session disables it.
func TestSessionOverSocket(t *testing.T) {
	wtid := liveThread(t)
	wtid2 := liveThread(t)
	s := serve(t, Config{})
	a, prod, idx := producer(t, s, "sess_ev u32 n; u64 v")
	ss := newSession(t, s, client.SessionOptions{})
	names, err := ss.Attach("sess_*", true)
	if err != nil || len(names) != 1 || names[0] != "user_events:sess_ev" {
		t.Fatalf("attach: %v, %v", names, err)
	}
	if a.word(0)&1 == 0 {
		t.Fatal("attaching a session did not set the enable bit")
	}
	if st := readFile(t, prod, "user_events_status"); !strings.Contains(st, "sess_ev # Used by perf") {
		t.Errorf("status:\n%s", st)
	}
	for i := range 3 {
		rec := wire.LE.AppendUint32(nil, idx)
		rec = wire.LE.AppendUint32(rec, uint32(i))
		rec = wire.LE.AppendUint64(rec, uint64(1000+i))
		if _, err := prod.Writev(wtid, 1, rec); err != nil {
			t.Fatal(err)
		}
	}
	// A pattern with follow picks up events created later.
	idx2, _, err := prod.Register(reg(a.addr(8), 0), "sess_late u32 n", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prod.Writev(wtid2, 0, wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx2), 9)); err != nil {
		t.Fatalf("write to the followed event: %v", err)
	}
	var recs []client.Record
	for len(recs) < 4 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		recs, _, _, err = ss.Read(ctx, recs)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range recs[:3] {
		if r.TID != wtid || r.CPU != 1 || r.PID != int32(os.Getpid()) || len(r.Raw) != 8+12 ||
			wire.LE.Uint32(r.Raw[8:]) != uint32(i) || wire.LE.Uint64(r.Raw[12:]) != uint64(1000+i) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if r := recs[3]; r.TID != wtid2 || wire.LE.Uint32(r.Raw[8:]) != 9 {
		t.Errorf("followed event's record: %+v", r)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if a.word(0)&1 != 0 {
		t.Error("closing the session left the enable bit set")
	}
}

// TestBlockedReadEndsWithConnection: a trace_pipe read waiting in the
// daemon ends when its client goes away, and the pipe can be opened again.
func TestBlockedReadEndsWithConnection(t *testing.T) {
	s := serve(t, Config{})
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Open("trace_pipe", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.Read(make([]byte, 100))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("read returned no error after close")
		}
	case <-time.After(waitLimit):
		t.Fatal("read still blocked after the client closed")
	}
	c2, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	var f2 *client.File
	deadline := time.Now().Add(waitLimit)
	for {
		f2, err = c2.Open("trace_pipe", os.O_RDONLY)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err != nil {
		t.Fatalf("trace_pipe after its reader left: %v", err)
	}
	f2.Close()
}

// TestConnectionsShareEnablers: the connections of one process are one
// user_event_mm, as the threads of a process are in Linux: an address
// registered through one is EADDRINUSE through another, and can be
// unregistered through it.
func TestConnectionsShareEnablers(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c1, c2 := a.dial(t, s.sock), a.dial(t, s.sock)
	if _, _, err := c1.Register(reg(a.addr(16), 0), "shared_ev u32 a", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Register(reg(a.addr(16), 0), "shared_ev u32 a", false); !errors.Is(err, unix.EADDRINUSE) {
		t.Errorf("same address through a second connection: %v, want EADDRINUSE", err)
	}
	un := make([]byte, 16)
	wire.LE.PutUint32(un, 16)
	wire.LE.PutUint64(un[8:], a.addr(16))
	if err := c2.Unregister(un); err != nil {
		t.Errorf("unregister through the second connection: %v", err)
	}
	if err := c1.Unregister(un); !errors.Is(err, unix.ENOENT) {
		t.Errorf("unregister again: %v, want ENOENT", err)
	}
}

// producerAndSession serves a daemon where a producer has registered
// command (its write index idx) with its enable bit at the start of arena
// a, and a session of another connection is attached to it.
func producerAndSession(t *testing.T, command string) (a *testArena, prod *client.Conn, idx uint32, ss *client.Session) {
	t.Helper()
	s := serve(t, Config{})
	a, prod, idx = producer(t, s, command)
	name, _, _ := strings.Cut(command, " ")
	return a, prod, idx, sessionOn(t, s, name, client.SessionOptions{})
}

// sessionOn is a session with opts, of a connection of its own, attached
// to the event name.
func sessionOn(t *testing.T, s *testServer, name string, opts client.SessionOptions) *client.Session {
	t.Helper()
	ss := newSession(t, s, opts)
	if _, err := ss.Attach(name, false); err != nil {
		t.Fatal(err)
	}
	return ss
}

// TestSessionPoll reads without waiting: nothing waiting is an empty answer
// at once, and the connection stays usable (a cancelled Read's does not).
func TestSessionPoll(t *testing.T) {
	a, prod, idx, ss := producerAndSession(t, "poll_ev u32 n")
	if recs, _, _, err := ss.Poll(nil); err != nil || len(recs) != 0 {
		t.Fatalf("Poll with nothing waiting = %v, %v", recs, err)
	}
	if _, err := prod.Writev(1, 0, wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), 7)); err != nil {
		t.Fatal(err)
	}
	recs, _, _, err := ss.Poll(nil)
	if err != nil || len(recs) != 1 || wire.LE.Uint32(recs[0].Raw[8:]) != 7 {
		t.Fatalf("Poll after a write = %+v, %v", recs, err)
	}
	if err := ss.Close(); err != nil {
		t.Fatalf("Close after Poll: %v", err)
	}
	if a.word(0)&1 != 0 {
		t.Error("closing the session left the enable bit set")
	}
}

// TestSessionReplyFull: a session read fills its reply — each record costs
// its raw data and a record header, nothing more — and the records come
// whole and in order across replies.
func TestSessionReplyFull(t *testing.T) {
	_, prod, idx, ss := producerAndSession(t, "full_ev u32 n")
	const n = 3000
	for i := range n {
		if _, err := prod.Writev(1, 0, wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	// Raw data: the 8-byte common header and the u32 = 12 bytes.
	perReply := (wire.MaxMessage - wire.HeaderSize - 16) / (wire.RecordHeaderLen + 12)
	next := 0
	for polls := 0; next < n; polls++ {
		recs, lost, _, err := ss.Poll(nil)
		if err != nil || lost != 0 {
			t.Fatalf("poll %d: %v, lost %d", polls, err, lost)
		}
		if want := min(perReply, n-next); len(recs) != want {
			t.Fatalf("poll %d: %d records, want %d", polls, len(recs), want)
		}
		for _, r := range recs {
			if len(r.Raw) != 12 || wire.LE.Uint32(r.Raw[8:]) != uint32(next) {
				t.Fatalf("record %d: raw %x", next, r.Raw)
			}
			next++
		}
	}
}

// TestCloseReleases: once Close returns, the daemon has released what the
// connection held, as close(2) of user_events_data has: a PERSIST event
// whose enabler is unregistered is in use (EBUSY) while the file that
// registered it is open, and can be deleted from another connection as
// soon as Close returns.
func TestCloseReleases(t *testing.T) {
	s := serve(t, Config{Cred: privileged})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	admin := a.dial(t, s.sock)
	un := make([]byte, 16)
	wire.LE.PutUint32(un, 16)
	wire.LE.PutUint64(un[8:], a.addr(0))
	for i := range 200 {
		name := fmt.Sprintf("closed_%d", i)
		c := a.dial(t, s.sock)
		if _, _, err := c.Register(reg(a.addr(0), abi.RegPersist), name+" u32 a", false); err != nil {
			t.Fatal(err)
		}
		if err := c.Unregister(un); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(name); !errors.Is(err, unix.EBUSY) {
			t.Fatalf("delete %s while its file is open: %v, want EBUSY", name, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(name); err != nil {
			t.Fatalf("delete %s right after closing the connection that registered it: %v", name, err)
		}
	}
}

func TestSessionFilterOverSocket(t *testing.T) {
	wtid := liveThread(t)
	_, prod, idx, ss := producerAndSession(t, "filt_ev u32 n")
	if err := ss.SetFilter("user_events:filt_ev", "n =="); !errors.Is(err, unix.EINVAL) {
		t.Errorf("bad filter: %v, want EINVAL", err)
	}
	if err := ss.SetFilter("user_events:nope", "n == 1"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("no event: %v, want ENOENT", err)
	}
	if err := ss.SetFilter("user_events:filt_ev", "n & 1"); err != nil {
		t.Fatal(err)
	}
	if err := ss.SetFilter("user_events:filt_ev", "n & 1"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second filter: %v, want EEXIST", err)
	}
	for i := range 4 {
		if _, err := prod.Writev(wtid, 0, wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), uint32(i))); err != nil {
			t.Fatal(err)
		}
	}
	var recs []client.Record
	for len(recs) < 2 {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		var err error
		recs, _, _, err = ss.Read(ctx, recs)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	more, _, _, err := ss.Poll(nil)
	if err != nil || len(more) != 0 || wire.LE.Uint32(recs[0].Raw[8:]) != 1 || wire.LE.Uint32(recs[1].Raw[8:]) != 3 {
		t.Errorf("records %v, then %d more (%v)", recs, len(more), err)
	}
}
