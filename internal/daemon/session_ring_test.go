package daemon

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
)

// ringRead takes every record now in r.
func ringRead(t *testing.T, r *SessionRing) []RingRecord {
	t.Helper()
	var out []RingRecord
	for {
		rec, err := r.Next()
		if errors.Is(err, ErrRingEmpty) {
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
	cons, err := Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ss, err := cons.NewSession(SessionOptions{Comm: true})
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
		rec := le.AppendUint32(nil, idx)
		rec = le.AppendUint32(rec, uint32(i))
		rec = le.AppendUint64(rec, uint64(1000+i))
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
	if !pr.Write(shmring.Meta{Time: ts, WriteIndex: idx, TID: uint32(tid), CPU: 0}, le.AppendUint64(le.AppendUint32(nil, 3), 1003)) {
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
	}{{subsys.RingComm, wtid, 0}, {subsys.RingSample, wtid, 0}, {subsys.RingSample, wtid, 1}, {subsys.RingSample, wtid, 2},
		{subsys.RingComm, tid, 0}, {subsys.RingSample, tid, 3}} {
		rec := got[i]
		if rec.Kind != want.kind || rec.TID != want.tid || rec.PID != int32(os.Getpid()) {
			t.Errorf("record %d: %+v, want kind %d by %d", i, rec, want.kind, want.tid)
			continue
		}
		switch {
		case rec.Kind == subsys.RingComm && (rec.ID != 0 || len(rec.Raw) == 0):
			t.Errorf("record %d: %+v, want the writer's name", i, rec)
		case rec.Kind == subsys.RingSample && (len(rec.Raw) != 8+12 || le.Uint32(rec.Raw[8:]) != want.v || le.Uint64(rec.Raw[12:]) != uint64(1000+want.v)):
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
	c, err := Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ss, err := c.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ShareRing(MaxSessionRing + 1); !errors.Is(err, unix.EINVAL) {
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
	bad := &Session{c: c, handle: 999}
	if _, err := bad.ShareRing(4096); !errors.Is(err, unix.EBADF) {
		t.Errorf("a ring for no session: %v, want EBADF", err)
	}
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	reply := exchange(t, fd, le.AppendUint32(appendHeader(nil, opSession, 0, 0), 4096))
	if _, _, err := parseResult(reply); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "a ring size over the limit", exchange(t, fd, le.AppendUint32(appendHeader(nil, opSessionRing, 0, 1), MaxSessionRing+1)), unix.EINVAL)
	wantErrno(t, "a ring size of 2 bytes", exchange(t, fd, append(appendHeader(nil, opSessionRing, 0, 1), 0, 0)), unix.EINVAL)
	wantErrno(t, "sync with a body", exchange(t, fd, append(appendHeader(nil, opSessionSync, 0, 1), 0)), unix.EBADF)
	wantErrno(t, "sync of no session", exchange(t, fd, appendHeader(nil, opSessionSync, 0, 7)), unix.EBADF)
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
	cons, err := Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ss, err := cons.NewSession(SessionOptions{})
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
			rec := le.AppendUint64(le.AppendUint32(le.AppendUint32(nil, idx), uint32(i)), uint64(round))
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
			case subsys.RingSample:
				samples++
			case subsys.RingLost:
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
	reply := exchange(t, fd, le.AppendUint32(appendHeader(nil, opSession, 0, 0), 4096))
	handle, _, err := parseResult(reply)
	if err != nil {
		t.Fatal(err)
	}
	if err := sendRetry(fd, le.AppendUint32(appendHeader(nil, opSessionRing, 0, uint32(handle)), 8192), nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	oob := make([]byte, 64)
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := parseResult(buf[:n]); err != nil {
		t.Fatal(err)
	}
	fds := rights(oob[:oobn])
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
	if reply := exchange(t, fd, append(appendHeader(nil, opAttach, 0, uint32(handle)), "shost_ev"...)); reply == nil {
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
		if _, err := prod.Writev(1, 0, le.AppendUint32(le.AppendUint32(nil, idx), uint32(i))); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the scribbler never ran")
		}
	}
	close(stop)
	<-done
	healthy(t, s)
	wantErrno(t, "sync of the scribbled session answers", exchange(t, fd, appendHeader(nil, opSessionSync, 0, 99)), unix.EBADF)
	if reply := exchange(t, fd, appendHeader(nil, opSessionSync, 0, uint32(handle))); len(reply) != headerSize+8+16 {
		t.Errorf("sync reply %x", reply)
	}
}

// FuzzSessionRingRecord feeds arbitrary records to the reader's decoder:
// it never panics, and what it accepts lies within the record.
func FuzzSessionRingRecord(f *testing.F) {
	ne := binary.NativeEndian
	sample := ne.AppendUint32(ne.AppendUint32(nil, 7), 1024)
	sample = append(sample, make([]byte, 12)...)
	f.Add(subsys.RingSample, sample)
	f.Add(subsys.RingComm, append(ne.AppendUint32(ne.AppendUint32(nil, 7), 0), "worker"...))
	f.Add(subsys.RingLost, ne.AppendUint32(ne.AppendUint32(ne.AppendUint64(nil, 5), 1024), subsys.RingLostTooLarge))
	f.Add(uint32(9), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, kind uint32, payload []byte) {
		rec, err := decodeRingRecord(shmring.Record{Meta: shmring.Meta{Time: 1, WriteIndex: kind, TID: 2, CPU: 3}, Payload: payload})
		if err != nil {
			return
		}
		if rec.Kind != kind || rec.TS != 1 || rec.CPU != 3 {
			t.Fatalf("decoded %+v from kind %d", rec, kind)
		}
		switch kind {
		case subsys.RingSample, subsys.RingComm:
			if len(rec.Raw) != len(payload)-8 || (kind == subsys.RingSample && len(rec.Raw) < 8) {
				t.Fatalf("raw of %d bytes from %d", len(rec.Raw), len(payload))
			}
		case subsys.RingLost:
			if len(payload) != 16 || rec.Lost != ne.Uint64(payload) {
				t.Fatalf("lost %d from % x", rec.Lost, payload)
			}
		default:
			t.Fatalf("kind %d accepted", kind)
		}
	})
}

// FuzzSessionRingRequest sends SessionRing and SessionSync requests with
// arbitrary arguments and bodies, after a session was made: the daemon
// answers (with a ring or an error) or drops the connection, and keeps
// serving others.
func FuzzSessionRingRequest(f *testing.F) {
	f.Add(true, uint32(1), le.AppendUint32(nil, 4096))
	f.Add(true, uint32(1), le.AppendUint32(nil, 1<<31))
	f.Add(true, uint32(2), []byte{1})
	f.Add(false, uint32(1), []byte{})
	f.Add(false, uint32(0), []byte{0, 0, 0, 0})
	sock := fuzzServer(f)
	probe, err := Dial(sock, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, ring bool, arg uint32, body []byte) {
		c, err := Dial(sock, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.NewSession(SessionOptions{}); err != nil {
			t.Fatal(err)
		}
		op := opSessionSync
		if ring {
			op = opSessionRing
		}
		c.mu.Lock()
		err = c.send(append(appendHeader(nil, op, 0, arg), body...))
		var fds []int
		var r []byte
		if err == nil {
			r, fds, err = c.recvRights(c.rbuf[:])
		}
		c.mu.Unlock()
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err == nil {
			if h, ok := parseHeader(r); !ok || h.op != opResult {
				t.Fatalf("reply %x", r)
			}
			if _, _, err := parseResult(r); err == nil && ring != (len(fds) == 1) {
				t.Fatalf("success with %d descriptors", len(fds))
			}
		}
		if _, err := probe.ReadDir("events"); err != nil {
			t.Fatalf("the daemon no longer serves: %v", err)
		}
	})
}
