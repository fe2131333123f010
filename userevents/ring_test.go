package userevents_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// TestRingRecordHasWritersIdentity: a record written through the ring
// reaches the daemon's sessions and trace with this process's pid, the
// writing thread's id, the CPU it ran on and a CLOCK_MONOTONIC time taken
// during the Write.
func TestRingRecordHasWritersIdentity(t *testing.T) {
	const ncpu = 64
	sock := startDaemon(t, daemon.Config{Subsystem: subsys.New(subsys.Options{NumCPU: ncpu})})
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport}
	f := open(t, o)
	if f.Transport() != userevents.RingTransport {
		t.Fatalf("transport %v: %v", f.Transport(), f.RingError())
	}
	name := uniq("ring_who")
	ev := register(t, f, name+" u32 v", 0)
	ss := attachedSession(t, sock, name, 0)
	fs := openTracefs(t, o)
	setEnable(t, fs, "user_events", name, true)
	waitBit(t, ev, true)

	// Write from a thread pinned to one CPU, so that the CPU is known.
	type result struct {
		tid, cpu      int
		before, after uint64
		err           error
	}
	done := make(chan result)
	go func() {
		// Never unlocked: the thread, with its affinity, ends with the
		// goroutine.
		runtime.LockOSThread()
		var r result
		var set unix.CPUSet
		if r.err = unix.SchedGetaffinity(0, &set); r.err != nil {
			done <- r
			return
		}
		for c := range ncpu {
			if set.IsSet(c) {
				r.cpu = c
				break
			}
		}
		set.Zero()
		set.Set(r.cpu)
		if r.err = unix.SchedSetaffinity(0, &set); r.err != nil {
			done <- r
			return
		}
		r.tid = unix.Gettid()
		r.before = monotonic()
		r.err = ev.Write(binary.NativeEndian.AppendUint32(nil, 4321))
		r.after = monotonic()
		done <- r
	}()
	w := <-done
	if w.err != nil {
		t.Fatal(w.err)
	}
	recs, _, _, err := ss.Poll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	if r.PID != int32(os.Getpid()) || r.TID != int32(w.tid) || r.CPU != int32(w.cpu) || r.TS < w.before || r.TS > w.after {
		t.Errorf("record pid %d tid %d cpu %d time %d; want pid %d tid %d cpu %d time in [%d, %d]",
			r.PID, r.TID, r.CPU, r.TS, os.Getpid(), w.tid, w.cpu, w.before, w.after)
	}
	tr, err := fs.ReadFile("trace")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("-%d [%03d]", w.tid, w.cpu); !strings.Contains(strings.Join(strings.Fields(string(tr)), " "), want) ||
		!strings.Contains(string(tr), name+": v=0x10e1 (4321)") {
		t.Errorf("trace lacks %q and the record:\n%s", want, tr)
	}
}

func monotonic() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// TestRingSize: the ring's size comes from Options.RingKB, else from
// UETRACE_RING_KB; one that is not a power of two in range is EINVAL,
// naming where it came from.
func TestRingSize(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	for _, c := range []struct {
		kb   int
		env  string
		want unix.Errno
		says string
	}{
		{kb: 64},
		{env: "16"},
		{kb: 3, want: unix.EINVAL, says: "Options.RingKB=3"},
		{kb: 2 * wire.MaxRing / 1024, want: unix.EINVAL, says: "power of two"},
		{env: "lots", want: unix.EINVAL, says: "UETRACE_RING_KB=lots"},
		{env: "100", want: unix.EINVAL, says: "UETRACE_RING_KB=100"},
	} {
		t.Setenv(userevents.RingKBEnv, c.env)
		f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport, RingKB: c.kb})
		if c.want != 0 {
			if !errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.says) {
				t.Errorf("RingKB %d, env %q: %v; want %v saying %q", c.kb, c.env, err, c.want, c.says)
			}
			if err == nil {
				f.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("RingKB %d, env %q: %v", c.kb, c.env, err)
			continue
		}
		if f.Transport() != userevents.RingTransport {
			t.Errorf("RingKB %d, env %q: transport %v: %v", c.kb, c.env, f.Transport(), f.RingError())
		}
		f.Close()
	}
}

// TestRingFallsBackToSocket: a daemon that predates the ring — and so ring
// sets: its Hello reply has no ring count — is written to over the
// socket, and the File says why.
func TestRingFallsBackToSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "old.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// The old daemon, by hand: HelloOK to the Hello, then EPROTO to
	// anything, as daemon.conn.handle answers an op it does not know.
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		oob := make([]byte, 256)
		for first := true; ; first = false {
			n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				return
			}
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					fds, _ := unix.ParseUnixRights(&m)
					for _, fd := range fds {
						unix.Close(fd)
					}
				}
			}
			var out []byte
			if first {
				out = wire.AppendHeader(out, wire.OpHelloOK, 0, 0)
				out = wire.LE.AppendUint32(out, wire.Version)
				out = wire.LE.AppendUint32(out, uint32(os.Getpid()))
				out = wire.LE.AppendUint32(out, 0)
			} else {
				out = wire.AppendResult(out, 0, fmt.Errorf("unknown request %d: %w", wire.LE.Uint16(buf), unix.EPROTO))
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}()
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A daemon before rings is one before ring sets: its Hello reply has
	// no ring count, and the File does not ask.
	if f.Transport() != userevents.SocketTransport || !errors.Is(f.RingError(), unix.EPROTONOSUPPORT) {
		t.Errorf("transport %v, ring error %v; want the socket, because of EPROTONOSUPPORT", f.Transport(), f.RingError())
	}
}

// TestRingAccountsForEveryWrite: every Write that succeeded is delivered or
// counted as dropped — by the Event, and by the daemon from the ring —
// exactly, however far the daemon fell behind a small ring.
func TestRingAccountsForEveryWrite(t *testing.T) {
	srv, sockPath := daemontest.Serve(t, daemon.Config{Subsystem: subsys.New(subsys.Options{NumCPU: 2})})
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sockPath, Transport: userevents.RingTransport, RingKB: 4}
	f, err := userevents.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	name := uniq("ring_acct")
	ev := register(t, f, name+" u64 v", 0)
	setEnable(t, openTracefs(t, o), "user_events", name, true)
	waitBit(t, ev, true)
	const n = 100000
	var v [8]byte
	for i := range n {
		binary.NativeEndian.PutUint64(v[:], uint64(i))
		if err := ev.Write(v[:]); err != nil {
			t.Fatal(err)
		}
	}
	dropped := ev.Dropped()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	st := srv.RingStats()
	t.Logf("%d written: %d delivered, %d dropped", n, st.Delivered, dropped)
	if st.Delivered+dropped != n || st.Dropped != dropped || st.Rejected+st.Torn+st.Discarded+st.Disabled != 0 {
		t.Errorf("%d written; the event dropped %d; daemon: %+v", n, dropped, st)
	}
}

// TestRingValidationMatchesSocket: for __data_loc and __rel_loc values
// pointing anywhere around the record — into its header, whose type id
// only the daemon knows, past its end, at strings with and without their
// NUL — a write through the ring fails with exactly the errno of the same
// write over the socket, where the daemon validates.
func TestRingValidationMatchesSocket(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	ring := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport}
	socket := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.SocketTransport}
	fr, fs := open(t, ring), open(t, socket)
	if fr.Transport() != userevents.RingTransport {
		t.Fatalf("no ring: %v", fr.RingError())
	}
	name := uniq("ring_valid")
	cmd := name + " __data_loc char[] s; __rel_loc char[] r; u8 pad"
	er, es := register(t, fr, cmd, 0), register(t, fs, cmd, 0)
	setEnable(t, openTracefs(t, ring), "user_events", name, true)
	waitBit(t, er, true)
	waitBit(t, es, true)
	// Both writes of a case from one thread: a loc into the header's pid
	// field reads the writing thread's id, which differs between threads
	// in its second byte once thread ids pass 255 (CI, in the VM: offset
	// 5, size 1 — EFAULT on one thread, valid on the other).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// Payload: s's loc, r's loc, pad, then "a\0" and two bytes that are
	// not NUL.
	tail := []byte{'a', 0, 'b', 'x'}
	n := 0
	seen := map[unix.Errno]int{}
	for off := range 20 {
		for size := range 4 {
			for _, field := range []int{0, 4} {
				// Valid defaults: s is the 3 bytes at record offset 9,
				// its own loc's last three, ending in 0; r is "a\0",
				// 1 byte past the end of its loc.
				p := make([]byte, 9) // the locs and pad
				binary.NativeEndian.PutUint32(p[0:], 3<<16|9)
				binary.NativeEndian.PutUint32(p[4:], 2<<16|1)
				binary.NativeEndian.PutUint32(p[field:], uint32(size)<<16|uint32(off))
				p = append(p, tail...)
				rerr, serr := er.Write(p), es.Write(p)
				seen[errnoOf(rerr)]++
				if errnoOf(rerr) != errnoOf(serr) {
					t.Errorf("loc %d: offset %d size %d: ring %v, socket %v", field/4, off, size, rerr, serr)
				}
				n++
			}
		}
	}
	t.Logf("%d writes compared: %v", n, seen)
	if seen[0] == 0 || seen[unix.EFAULT] == 0 {
		t.Errorf("the cases do not cover both outcomes: %v", seen)
	}
}

// TestRingInvalidRecordLeftToDaemon: whether a record that fails
// validation is EFAULT depends on the daemon's consumers, as in
// user_events_write_core: with tracing_on 0 the trace buffer reserves
// nothing and validates nothing, so the write succeeds; with tracing on it
// is EFAULT. A ring client cannot know which, and asks the daemon.
func TestRingInvalidRecordLeftToDaemon(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport}
	f := open(t, o)
	if f.Transport() != userevents.RingTransport {
		t.Fatalf("no ring: %v", f.RingError())
	}
	name := uniq("ring_invalid")
	ev := register(t, f, name+" __rel_loc char[] s", 0)
	fs := openTracefs(t, o)
	setEnable(t, fs, "user_events", name, true)
	waitBit(t, ev, true)
	noNUL := binary.NativeEndian.AppendUint32(nil, 3<<16)
	noNUL = append(noNUL, "abc"...)
	if err := fs.WriteFile("tracing_on", []byte("0"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ev.Write(noNUL); err != nil {
		t.Errorf("with tracing off, an invalid record: %v; want success (nothing reserves it, so nothing validates it)", err)
	}
	if err := fs.WriteFile("tracing_on", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ev.Write(noNUL); !errors.Is(err, unix.EFAULT) {
		t.Errorf("with tracing on, an invalid record: %v; want EFAULT", err)
	}
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return unix.EIO
	}
	return 0
}

// attachedSession is a daemon session of its own connection, attached to
// the events pattern matches, with a buffer of bufferBytes (0: the
// default); the test's cleanup closes the connection.
func attachedSession(t *testing.T, sock, pattern string, bufferBytes int) *client.Session {
	t.Helper()
	cons, err := client.Dial(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Close() })
	ss, err := cons.NewSession(client.SessionOptions{BufferBytes: bufferBytes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Attach(pattern, false); err != nil {
		t.Fatal(err)
	}
	return ss
}
