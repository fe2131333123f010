package handover_test

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/handover"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// TestPassMatchesDaemon: the same records, published into a ring set the
// daemon drains into a session's streams and into a set a reader passes
// over, come out byte for byte the same in stream k and in the reader's
// output of ring k — samples, names, loss records (waiting for the next
// record, merged, told on its CPU), records too large for perf, invalid
// __data_locs, disabled events, indices the connection does not have,
// short payloads, void records. The reader's counts are the daemon's
// RingStats of the same names.
func TestPassMatchesDaemon(t *testing.T) {
	const rings = 2
	sub := subsys.New(subsys.Options{NumCPU: rings})
	srv, sock := daemontest.Serve(t, daemon.Config{Subsystem: sub, Cred: daemontest.Perfmon, Rings: rings})

	// The producer: a connection with its enable words, its events, its
	// ring set.
	const size = 1 << 16
	sp := daemonProducer(t, sock, rings, size, handover.TestCommands...)

	// The session: streams, names, the first two events.
	sess, st := streamSession(t, sock, client.SessionOptions{Comm: true})
	var g handover.Grant
	g.PID, g.Rings, g.Comm = int32(os.Getpid()), rings, procComm(t)
	for i, cmd := range handover.TestCommands {
		def, _ := eventdef.Parse(cmd)
		e := handover.Event{Def: def}
		if i != handover.IdxOff {
			name := strings.Fields(cmd)[0]
			if _, err := sess.Attach("user_events:"+name, false); err != nil {
				t.Fatal(err)
			}
			e.SampleID = wire.SampleID(sub.Lookup("user_events", name).ID())
		}
		g.Events = append(g.Events, e)
	}

	// The reader's set: the same records in a set of its own, given
	// whole.
	runtime.LockOSThread() // the records say this thread wrote them
	defer runtime.UnlockOSThread()
	rsp, err := shmring.CreateSet(rings, size)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Close()
	ctl, err := handover.CreateControl(rings)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	g.LossSince = time.Now()
	set, err := handover.OpenSet(g, rsp.Fd(), ctl.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for k := range rings {
		ctl.Give(k, 0)
	}

	ts := stamp.Now() - 10_000_000
	tid := uint32(unix.Gettid())
	big := make([]byte, wire.MaxPerfRecord)
	type rec struct {
		idx     uint32
		cpu     uint32
		payload []byte
	}
	var recs []rec
	for k := range uint32(rings) {
		recs = append(recs,
			rec{handover.IdxPlain, k, handover.SeqPayload(1)},
			rec{handover.IdxLoc, k, handover.LocPayload(2, "hello")},
			rec{wire.LostIndex, k + 1, handover.LossPayload(handover.IdxLoc, 5)},
			rec{wire.LostIndex, k, handover.LossPayload(handover.IdxLoc, 2)},
			rec{wire.LostIndex, k, handover.LossPayload(handover.IdxPlain, 1)},
			rec{wire.LostIndex, k, handover.LossPayload(handover.IdxOff, 9)},
			rec{wire.LostIndex, k, handover.LossPayload(77, 9)},
			rec{handover.IdxPlain, k, handover.SeqPayload(3)},
			rec{handover.IdxLoc, k, big},
			rec{handover.IdxLoc, k, big},
			rec{handover.IdxPlain, k, big},
			rec{handover.IdxOff, k, handover.SeqPayload(4)},
			rec{9, k, handover.SeqPayload(5)},
			rec{handover.IdxPlain, k, []byte{1}},
			rec{handover.IdxLoc, k, append(handover.SeqPayload(6), 0xff, 0xff, 0, 0)},
			rec{preload.VoidIndex, k, nil},
			rec{handover.IdxLoc, k, handover.LocPayload(7, "")},
			rec{wire.LostIndex, k, handover.LossPayload(handover.IdxPlain, 3)}, // waits, then told on its own CPU
		)
	}
	for i, r := range recs {
		// Into the ring of its group (its CPU but for the first loss
		// record's, which is told on the next record's CPU).
		k := i / (len(recs) / rings)
		m := shmring.Meta{Time: ts + uint64(i), WriteIndex: r.idx, TID: tid, CPU: r.cpu}
		if !sp.Ring(k).Write(m, r.payload) || !rsp.Ring(k).Write(m, r.payload) {
			t.Fatalf("record %d: a ring is full", i)
		}
	}
	if _, _, err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	for k := range rings {
		out := handover.NewStream(true)
		if _, gone := set.Pass(k, out, 1000); gone {
			t.Fatalf("ring %d gone", k)
		}
		out.FlushLost()
		daemonBytes := st.Reader(k).Available()
		if len(daemonBytes) == 0 {
			t.Fatalf("stream %d is empty", k)
		}
		if !bytes.Equal(out.Bytes(), daemonBytes) {
			t.Errorf("ring %d: the reader wrote\n%x\nthe daemon\n%x", k, out.Bytes(), daemonBytes)
			if r, err := handover.ReadStream(out.Bytes()); err == nil {
				t.Logf("reader: %+v", r)
			}
			if r, err := handover.ReadStream(daemonBytes); err == nil {
				t.Logf("daemon: %+v", r)
			}
		}
	}
	var got handover.Counts
	for k := range rings {
		c := ctl.Counts(k)
		got.Add(&c)
	}
	rs := srv.RingStats()
	want := handover.Counts{
		Delivered: rs.Delivered, Rejected: rs.Rejected, Disabled: rs.Disabled, Voided: rs.Voided,
		Lost: rs.Lost, LostRecords: rs.LostRecords, LostCapped: rs.LostCapped,
		ForgedTID: rs.ForgedTID, UncheckedTID: rs.UncheckedTID, Future: rs.Future,
		// Torn, TooLong, Discarded and BadHead the daemon reads when it
		// releases a ring; none here.
	}
	if got != want {
		t.Errorf("the reader counted %+v\nthe daemon        %+v", got, want)
	}
}

// daemonProducer is a producer of the daemon at sock: a connection with
// its enable words, commands registered (write index i, enable bit i),
// and a ring set of rings rings of size bytes shared.
func daemonProducer(t *testing.T, sock string, rings, size int, commands ...string) *shmring.SetProducer {
	t.Helper()
	arena, addr := enableArena(t)
	prod, err := client.Dial(sock, &client.Arena{FD: arena, Addr: addr, Size: uint64(unix.Getpagesize())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prod.Close() })
	if prod.Rings() != rings {
		t.Fatalf("the daemon has %d rings", prod.Rings())
	}
	for i, cmd := range commands {
		reg := abi.UserReg{Size: abi.UserRegSize, EnableBit: uint8(i), EnableSize: 4, EnableAddr: addr}
		idx, ret, err := prod.Register(reg.Bytes(), cmd, false)
		if err != nil || ret != 0 || idx != uint32(i) {
			t.Fatalf("register %q: index %d, %d, %v", cmd, idx, ret, err)
		}
	}
	sp, err := shmring.CreateSet(rings, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	if err := prod.ShareRingSet(sp); err != nil {
		t.Fatal(err)
	}
	return sp
}

// streamSession is a session of a connection of its own to the daemon
// at sock, delivering into streams.
func streamSession(t *testing.T, sock string, opts client.SessionOptions) (*client.Session, *client.SessionStreams) {
	t.Helper()
	rd, err := client.Dial(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	sess, err := rd.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sess.ShareStreams(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return sess, st
}

// enableArena is a producer's enable words: a sealed memfd of a page,
// mapped, and its address.
func enableArena(t *testing.T) (fd int, addr uint64) {
	t.Helper()
	page := unix.Getpagesize()
	fd, err := shmring.SealedMemfd("ho-arena", uint64(page))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.MmapPtr(fd, 0, nil, uintptr(page), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.MunmapPtr(mem, uintptr(page))
		unix.Close(fd)
	})
	return fd, uint64(uintptr(mem))
}

// procComm is this process's name, as the daemon takes a connection's.
func procComm(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skip(err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// TestLateCounts: a reader stopped between a pass's commit and the store
// of its counts — longer than the daemon waits for them when it takes the
// ring back — still has them counted once they come: the records it read
// are in the daemon's RingStats and in their event's counts, once.
// Before, the daemon took the counts as they were and never looked again.
func TestLateCounts(t *testing.T) {
	sub := subsys.New(subsys.Options{NumCPU: 1})
	var log testutil.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, sock := daemontest.Serve(t, daemon.Config{Subsystem: sub, Cred: daemontest.Perfmon, Rings: 1, Logger: logger})
	const idx = 0
	sp := daemonProducer(t, sock, 1, 1<<16, "ho_late u32 seq")
	sess, _ := streamSession(t, sock, client.SessionOptions{})
	if _, err := sess.Attach("user_events:ho_late", false); err != nil {
		t.Fatal(err)
	}
	h, err := sess.HandOver()
	if err != nil || h == nil {
		t.Fatalf("no hand-over: %v", err)
	}
	defer h.Close()
	g, err := handover.GrantOf(h.HandOver)
	if err != nil {
		t.Fatal(err)
	}
	set, err := handover.OpenSet(g, h.SetFd, h.ControlFd)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()

	runtime.LockOSThread() // the records say this thread wrote them
	defer runtime.UnlockOSThread()
	const n = 500
	tid := uint32(unix.Gettid())
	for i := range uint32(n) {
		if !sp.Ring(0).Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: tid}, handover.SeqPayload(i)) {
			t.Fatalf("record %d: the ring is full", i)
		}
	}
	// The pass commits, then stops before its counts; meanwhile the
	// session ends, which takes the ring back, and the daemon's wait for
	// the counts passes.
	committed, taken := make(chan struct{}), make(chan struct{})
	handover.SetCommitted(func(int) {
		close(committed)
		<-taken
	})
	defer handover.SetCommitted(nil)
	passed := make(chan int, 1)
	go func() {
		out := handover.NewStream(false)
		got, _ := set.Pass(0, out, n+1)
		passed <- got
	}()
	<-committed
	closed := make(chan error, 1)
	go func() { closed <- sess.Close() }()
	// The daemon has resumed the ring and waits for the counts: the
	// store that follows is a late one.
	testutil.Wait(t, "the daemon to take the ring back without the pass's counts", func() bool {
		return strings.Contains(log.String(), "before the reader stored its last pass's counts")
	})
	close(taken)
	if got := <-passed; got != n {
		t.Fatalf("the pass took %d records, want %d", got, n)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(func() bool { return srv.RingStats().Delivered == n }) {
		t.Fatalf("RingStats.Delivered %d, want the reader's %d", srv.RingStats().Delivered, n)
	}
	if counts := string(sub.AppendCounts(nil)); !strings.Contains(counts, "ho_late 500 0\n") {
		t.Errorf("the event's counts:\n%s\nwant ho_late 500 0", counts)
	}
}
