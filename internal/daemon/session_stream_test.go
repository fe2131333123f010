package daemon

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/perfdata"
)

// streamRec is a perf.data record of a stream: its type and the tid of
// each (a sample's, a COMM's), with a sample's CPU and its raw payload
// after the common header.
type streamRec struct {
	typ      perfdata.RecordType
	tid, cpu uint32
	payload  []byte
	n        uint64 // a LOST's count
}

// streamRecs are the records of a stream's bytes.
func streamRecs(t testing.TB, b []byte) []streamRec {
	t.Helper()
	var out []streamRec
	eachStreamRec(t, b, func(sr streamRec) { out = append(out, sr) })
	return out
}

// eachStreamRec walks the records of a stream's bytes, without allocating.
func eachStreamRec(t testing.TB, b []byte, fn func(streamRec)) {
	t.Helper()
	for len(b) > 0 {
		n := int(wire.LE.Uint16(b[6:]))
		if n < 8 || n > len(b) {
			t.Fatalf("a record of %d bytes with %d left", n, len(b))
		}
		r := b[:n]
		sr := streamRec{typ: perfdata.RecordType(wire.LE.Uint32(r))}
		switch sr.typ {
		case perfdata.RecordSample:
			sr.tid, sr.cpu = wire.LE.Uint32(r[20:]), wire.LE.Uint32(r[32:])
			sr.payload = r[wire.SampleHeadSize+8:]
		case perfdata.RecordComm:
			sr.tid = wire.LE.Uint32(r[12:])
		case perfdata.RecordLost:
			sr.n = wire.LE.Uint64(r[16:])
		}
		fn(sr)
		b = b[n:]
	}
}

// TestSessionStreams: a session's streams, one per drainer, get the
// records a producer publishes on each CPU in the stream of that CPU —
// its thread's name before its first sample there — once Sync returns;
// Poll says to read the streams; closing the session disables the event.
func TestSessionStreams(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	a, prod, idx := producer(t, s, "sstream_ev u32 n")
	ss := newSession(t, s, client.SessionOptions{Comm: true})
	st, err := ss.ShareStreams(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Len() != 2 {
		t.Fatalf("%d streams, want one per drainer: 2", st.Len())
	}
	if _, err := ss.Attach("sstream_*", true); err != nil {
		t.Fatal(err)
	}
	if a.word(0)&1 == 0 {
		t.Fatal("attaching a stream session did not set the enable bit")
	}
	ring := shareTestRing(t, prod, 1<<16)
	tid := uint32(unix.Gettid())
	for i := range 6 {
		m := shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: tid, CPU: uint32(i % 2)}
		if !ring.Write(m, wire.LE.AppendUint32(nil, uint32(i))) {
			t.Fatal("producer ring full")
		}
	}
	if lost, big, err := st.Sync(); err != nil || lost != 0 || big != 0 {
		t.Fatalf("sync: %d, %d, %v", lost, big, err)
	}
	for k := range 2 {
		r := st.Reader(k)
		got := streamRecs(t, r.Available())
		if len(got) != 4 || got[0].typ != perfdata.RecordComm || got[0].tid != tid {
			t.Fatalf("stream %d: %+v, want the thread's name and 3 samples", k, got)
		}
		for i, g := range got[1:] {
			if g.typ != perfdata.RecordSample || g.cpu != uint32(k) || wire.LE.Uint32(g.payload) != uint32(k+2*i) {
				t.Errorf("stream %d record %d: %+v, want the sample of CPU %d n=%d", k, i+1, g, k, k+2*i)
			}
		}
	}
	if _, _, _, err := ss.Poll(nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Poll of a stream session: %v, want EINVAL", err)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	if a.word(0)&1 != 0 {
		t.Error("closing the stream session left the event enabled")
	}
	healthy(t, s)
}

// TestSessionStreamsRefused: streams come before the session is attached,
// of a size the daemon takes, counted in the uid's session memory, for a
// session this connection holds; refused, the session is as it was.
func TestSessionStreamsRefused(t *testing.T) {
	s := serve(t, Config{Rings: 2, Limits: Limits{SessionKBPerUID: 4 << 10}})
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ss, err := c.NewSession(client.SessionOptions{BufferBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ShareStreams(wire.MaxSessionRing + 1); !errors.Is(err, unix.EINVAL) {
		t.Errorf("streams over the limit of a size: %v, want EINVAL", err)
	}
	// 2 streams of 4 MiB: over the uid's 4 MiB of sessions. (Root and
	// perfmon-capable users are not held to it: only another user is.)
	if os.Geteuid() != 0 {
		if _, err := ss.ShareStreams(4 << 20); !errors.Is(err, unix.EPERM) {
			t.Errorf("streams over the uid's session memory: %v, want EPERM", err)
		}
	}
	if _, err := ss.Attach("*", true); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ShareStreams(4096); !errors.Is(err, unix.EBUSY) {
		t.Errorf("streams after attach: %v, want EBUSY", err)
	}
	if _, _, _, err := ss.Poll(nil); err != nil {
		t.Errorf("the refused session is not read over the socket: %v", err)
	}
	fd := rawConn(t, s.sock)
	exchange(t, fd, helloMsg(0, 0))
	if _, _, err := wire.ParseResult(exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionStreams, 0, 999), 4096))); !errors.Is(err, unix.EBADF) {
		t.Errorf("streams for no session: %v, want EBADF", err)
	}
	healthy(t, s)
}

// FuzzSessionStreamsRequest sends SessionStreams and SessionSync requests
// with arbitrary arguments and bodies, after a session was made: the
// daemon answers (with the streams or an error) or drops the connection,
// and keeps serving others.
func FuzzSessionStreamsRequest(f *testing.F) {
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
	f.Fuzz(func(t *testing.T, streams bool, arg uint32, body []byte) {
		c := rawConn(t, sock)
		exchange(t, c, helloMsg(0, 0))
		if _, _, err := wire.ParseResult(exchange(t, c, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 0))); err != nil {
			t.Fatal(err)
		}
		op := wire.OpSessionSync
		if streams {
			op = wire.OpSessionStreams
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
			if _, _, err := wire.ParseResult(r); err == nil && streams != (len(fds) == 1) {
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
