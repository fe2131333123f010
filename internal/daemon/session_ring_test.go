package daemon

import (
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// ringRead takes every record now in r.
func ringRead(t *testing.T, r *client.SessionRing) []client.RingRecord {
	t.Helper()
	var out []client.RingRecord
	for {
		rec, err := r.Next()
		if errors.Is(err, client.ErrRingEmpty) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Raw = append([]byte(nil), rec.Raw...)
		out = append(out, rec)
	}
}

// TestSessionRingOverSocket: a session shares its ring with the reading
// client; the records the producer writes (over the socket, and through its
// own ring) arrive there with who wrote them — the task's name first — and
// Read of the session says to read the ring.
func TestSessionRingOverSocket(t *testing.T) {
	wtid := liveThread(t)
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	prod := a.dial(t, s.sock)
	idx, _, err := prod.Register(reg(a.addr(0), 0), "sring_ev u32 n; u64 v", false)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ss, err := cons.NewSession(client.SessionOptions{Comm: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ss.ShareRing(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := ss.Attach("sring_*", true); err != nil {
		t.Fatal(err)
	}
	if a.word(0)&1 == 0 {
		t.Fatal("attaching a ring session did not set the enable bit")
	}
	for i := range 3 {
		rec := wire.LE.AppendUint32(nil, idx)
		rec = wire.LE.AppendUint32(rec, uint32(i))
		rec = wire.LE.AppendUint64(rec, uint64(1000+i))
		if _, err := prod.Writev(wtid, 1, rec); err != nil {
			t.Fatal(err)
		}
	}
	// A write through the producer's ring is in the session's ring once
	// Sync returns.
	pr := newRing(t, 1<<16)
	if err := prod.ShareRing(pr); err != nil {
		t.Fatal(err)
	}
	ts := stamp.Now()
	// The ring's thread is checked: this process's own.
	tid := int32(unix.Gettid())
	if !pr.Write(shmring.Meta{Time: ts, WriteIndex: idx, TID: uint32(tid), CPU: 0}, wire.LE.AppendUint64(wire.LE.AppendUint32(nil, 3), 1003)) {
		t.Fatal("producer ring full")
	}
	if lost, big, err := r.Sync(); err != nil || lost != 0 || big != 0 {
		t.Fatalf("sync: %d, %d, %v", lost, big, err)
	}
	got := ringRead(t, r)
	if len(got) != 6 {
		t.Fatalf("%d records, want a name and 3 samples, a name and a sample: %+v", len(got), got)
	}
	for i, want := range []struct {
		kind uint32
		tid  int32
		v    uint32
	}{{wire.RingComm, wtid, 0}, {wire.RingSample, wtid, 0}, {wire.RingSample, wtid, 1}, {wire.RingSample, wtid, 2},
		{wire.RingComm, tid, 0}, {wire.RingSample, tid, 3}} {
		rec := got[i]
		if rec.Kind != want.kind || rec.TID != want.tid || rec.PID != int32(os.Getpid()) {
			t.Errorf("record %d: %+v, want kind %d by %d", i, rec, want.kind, want.tid)
			continue
		}
		switch {
		case rec.Kind == wire.RingComm && (rec.ID != 0 || len(rec.Raw) == 0):
			t.Errorf("record %d: %+v, want the writer's name", i, rec)
		case rec.Kind == wire.RingSample && (len(rec.Raw) != 8+12 || wire.LE.Uint32(rec.Raw[8:]) != want.v || wire.LE.Uint64(rec.Raw[12:]) != uint64(1000+want.v)):
			t.Errorf("record %d: %+v, want n=%d", i, rec, want.v)
		}
	}
	if got[5].TS != ts || got[4].TS != ts {
		t.Errorf("the ring record's time %d, want %d", got[5].TS, ts)
	}
	if _, _, _, err := ss.Poll(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Poll of a ring session: %v, want EINVAL", err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if a.word(0)&1 != 0 {
		t.Error("closing the ring session left the event enabled")
	}
	healthy(t, s)
}

// TestSessionRingRefused: a ring comes before the session is attached,
// once, of a size the daemon takes, for a session this connection holds;
// a refused ring leaves the session as it was, read over the socket.
func TestSessionRingRefused(t *testing.T) {
	s := serve(t, Config{})
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ss, err := c.NewSession(client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ShareRing(wire.MaxSessionRing + 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a ring over the limit: %v, want EINVAL", err)
	}
	if _, err := ss.Attach("*", true); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ShareRing(4096); !errors.Is(err, unix.EBUSY) {
		t.Errorf("a ring after attach: %v, want EBUSY", err)
	}
	if _, _, _, err := ss.Poll(nil); err != nil {
		t.Errorf("the refused session is not read over the socket: %v", err)
	}
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	if _, _, err := wire.ParseResult(exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionRing, 0, 999), 4096))); !errors.Is(err, unix.EBADF) {
		t.Errorf("a ring for no session: %v, want EBADF", err)
	}
	reply := exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 4096))
	if _, _, err := wire.ParseResult(reply); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "a ring size over the limit", exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionRing, 0, 1), wire.MaxSessionRing+1)), unix.EINVAL)
	wantErrno(t, "a ring size of 2 bytes", exchange(t, fd, append(wire.AppendHeader(nil, wire.OpSessionRing, 0, 1), 0, 0)), unix.EINVAL)
	wantErrno(t, "sync with a body", exchange(t, fd, append(wire.AppendHeader(nil, wire.OpSessionSync, 0, 1), 0)), unix.EBADF)
	wantErrno(t, "sync of no session", exchange(t, fd, wire.AppendHeader(nil, wire.OpSessionSync, 0, 7)), unix.EBADF)
	healthy(t, s)
}

// TestSessionRingLost: a session ring too small for what is written
// counts every record it had no room for, and the reader learns of all of
// them — in the ring, where they happened, or handed over by Sync:
// written = read + lost, exactly.
func TestSessionRingLost(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	prod := a.dial(t, s.sock)
	idx, _, err := prod.Register(reg(a.addr(0), 0), "slost_ev u32 n; u64 v", false)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ss, err := cons.NewSession(client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ss.ShareRing(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := ss.Attach("slost_ev", false); err != nil {
		t.Fatal(err)
	}
	const n = 300
	var samples, lost uint64
	for round := range 3 {
		for i := range n {
			rec := wire.LE.AppendUint64(wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), uint32(i)), uint64(round))
			if _, err := prod.Writev(1, 0, rec); err != nil {
				t.Fatal(err)
			}
		}
		handed, _, err := r.Sync()
		if err != nil {
			t.Fatal(err)
		}
		lost += handed
		for _, rec := range ringRead(t, r) {
			switch rec.Kind {
			case wire.RingSample:
				samples++
			case wire.RingLost:
				lost += rec.Lost
				if rec.TooLarge || rec.CPU != 0 {
					t.Errorf("lost record %+v", rec)
				}
			}
		}
	}
	if samples+lost != 3*n || lost == 0 {
		t.Errorf("read %d, lost %d: want %d in all, some lost", samples, lost, 3*n)
	}
}

// TestSessionRingHostileReader: a reader that scribbles over the whole of
// the ring it was given — header and data — while records are delivered
// into it costs only itself: every write returns, the daemon goes on
// serving everyone, and its memory is its own.
func TestSessionRingHostileReader(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	prod := a.dial(t, s.sock)
	idx, _, err := prod.Register(reg(a.addr(0), 0), "shost_ev u32 n", false)
	if err != nil {
		t.Fatal(err)
	}
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	reply := exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 4096))
	handle, _, err := wire.ParseResult(reply)
	if err != nil {
		t.Fatal(err)
	}
	if err := sendRetry(fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionRing, 0, uint32(handle)), 8192), nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	oob := make([]byte, 64)
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wire.ParseResult(buf[:n]); err != nil {
		t.Fatal(err)
	}
	fds := wire.Rights(oob[:oobn])
	if len(fds) != 1 {
		t.Fatalf("%d descriptors", len(fds))
	}
	defer unix.Close(fds[0])
	var st unix.Stat_t
	if err := unix.Fstat(fds[0], &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fds[0], 4096); err == nil {
		t.Fatal("the reader could shrink the ring's memfd")
	}
	mem, err := unix.Mmap(fds[0], 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if reply := exchange(t, fd, append(wire.AppendHeader(nil, wire.OpAttach, 0, uint32(handle)), "shost_ev"...)); reply == nil {
		t.Fatal("attach: hung up")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	var scribbles atomic.Uint64
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		words := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), len(mem)/8)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for range 64 {
				atomic.StoreUint64(&words[rng.IntN(len(words))], rng.Uint64())
				atomic.StoreUint32((*uint32)(unsafe.Pointer(&mem[192])), 1) // "I sleep"
			}
			scribbles.Add(1)
		}
	}()
	deadline := time.Now().Add(waitLimit)
	for i := 0; i < 3000 || scribbles.Load() < 100; i++ {
		if _, err := prod.Writev(1, 0, wire.LE.AppendUint32(wire.LE.AppendUint32(nil, idx), uint32(i))); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the scribbler never ran")
		}
	}
	close(stop)
	<-done
	healthy(t, s)
	wantErrno(t, "sync of the scribbled session answers", exchange(t, fd, wire.AppendHeader(nil, wire.OpSessionSync, 0, 99)), unix.EBADF)
	if reply := exchange(t, fd, wire.AppendHeader(nil, wire.OpSessionSync, 0, uint32(handle))); len(reply) != wire.HeaderSize+8+16 {
		t.Errorf("sync reply %x", reply)
	}
}

// FuzzSessionRingRequest sends client.SessionRing and SessionSync requests with
// arbitrary arguments and bodies, after a session was made: the daemon
// answers (with a ring or an error) or drops the connection, and keeps
// serving others.
func FuzzSessionRingRequest(f *testing.F) {
	f.Add(true, uint32(1), wire.LE.AppendUint32(nil, 4096))
	f.Add(true, uint32(1), wire.LE.AppendUint32(nil, 1<<31))
	f.Add(true, uint32(2), []byte{1})
	f.Add(false, uint32(1), []byte{})
	f.Add(false, uint32(0), []byte{0, 0, 0, 0})
	sock := fuzzServer(f)
	probe, err := client.Dial(sock, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ring bool, arg uint32, body []byte) {
		c := rawConn(t, sock)
		exchange(t, c, helloMsg(0, 0))
		if _, _, err := wire.ParseResult(exchange(t, c, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 0))); err != nil {
			t.Fatal(err)
		}
		op := wire.OpSessionSync
		if ring {
			op = wire.OpSessionRing
		}
		err := sendRetry(c, append(wire.AppendHeader(nil, op, 0, arg), body...), nil)
		var fds []int
		var r []byte
		if err == nil {
			r, fds, err = recvRights(c)
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err == nil {
			if h, ok := wire.ParseHeader(r); !ok || h.Op != wire.OpResult {
				t.Fatalf("reply %x", r)
			}
			if _, _, err := wire.ParseResult(r); err == nil && ring != (len(fds) == 1) {
				t.Fatalf("success with %d descriptors", len(fds))
			}
		}
		if _, err := probe.ReadDir("events"); err != nil {
			t.Fatalf("the daemon no longer serves: %v", err)
		}
	})
}

// recvRights receives a reply that may carry descriptors.
func recvRights(fd int) ([]byte, []int, error) {
	buf := make([]byte, wire.MaxMessage)
	var oob [64]byte
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob[:], unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		return buf[:n], wire.Rights(oob[:oobn]), nil
	}
}
