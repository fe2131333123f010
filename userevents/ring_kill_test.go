package userevents_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// The SIGKILL test's producers are this test binary again, started with
// killEnv naming what to do (see killChild). Each reports through a slot of
// a file both sides map: a producer killed at any instant leaves there
// exactly what it had stored.
const (
	killEnv     = "UETRACE_KILLTEST"      // "MODE SLOT GOROUTINES RECORDS PACE"
	killSockEnv = "UETRACE_KILLTEST_SOCK" // the daemon's socket
	killCtlEnv  = "UETRACE_KILLTEST_CTL"  // the control file
	killCmd     = "kill_ev u32 pid; u32 g; u64 seq; u64 check"
	killPayload = 24
	// killRecord is a record's size in the ring: shmring's header and the
	// payload (already a multiple of 8).
	killRecord = shmring.HeaderSize + killPayload
	slotSize   = 4096
	maxG       = 32
)

// Words of a slot (uint64 each).
const (
	wState    = 0 // see the states below
	wPid      = 1
	wPost     = 2 // records written into the ring after the File was closed
	wErrLen   = 3
	wStarted  = 8 // + 2g: writes goroutine g began
	wDone     = 9 // + 2g: writes goroutine g saw return
	errOffset = 1024
)

const (
	stStarting = iota
	stReady    // registered, enabled, writing
	stClosed   // afterclose: the File is closed, the child writes on
	stFailed
)

func init() {
	if spec := os.Getenv(killEnv); spec != "" {
		os.Exit(killChild(spec))
	}
}

// check is what a record of (pid, g, seq) carries: a record with any of
// its fields changed does not match it.
func check(pid, g uint32, seq uint64) uint64 {
	return (uint64(pid)<<32|uint64(g))*0x9e3779b97f4a7c15 ^ (seq+1)*0xc2b2ae3d27d4eb4f
}

func killPayloadOf(buf []byte, pid, g uint32, seq uint64) []byte {
	ne := binary.NativeEndian
	ne.PutUint32(buf[0:], pid)
	ne.PutUint32(buf[4:], g)
	ne.PutUint64(buf[8:], seq)
	ne.PutUint64(buf[16:], check(pid, g, seq))
	return buf[:killPayload]
}

// slot is one producer's part of the control file.
type slot []byte

func (s slot) word(i int) *uint64    { return (*uint64)(unsafe.Pointer(&s[8*i])) }
func (s slot) load(i int) uint64     { return atomic.LoadUint64(s.word(i)) }
func (s slot) store(i int, v uint64) { atomic.StoreUint64(s.word(i), v) }
func (s slot) started(g int) uint64  { return s.load(wStarted + 2*g) }
func (s slot) message() string {
	return string(s[errOffset : errOffset+min(int(s.load(wErrLen)), slotSize-errOffset)])
}
func (s slot) reset() { clear(s) }
func (s slot) fail(err error) int {
	n := copy(s[errOffset:], err.Error())
	s.store(wErrLen, uint64(n))
	s.store(wState, stFailed)
	fmt.Fprintln(os.Stderr, "kill test producer:", err)
	return 1
}

// killChild is a producer process. It opens a File with the ring transport
// on the daemon at $UETRACE_KILLTEST_SOCK, registers killCmd and writes
// from several goroutines, recording in its slot each write it begins and
// each it saw return, until the test kills it. Modes:
//
//	write       just that
//	tear        first reserves a record in its ring and never commits it
//	afterclose  one goroutine writes, closes the File, then keeps
//	            publishing into the ring through a mapping of its own
func killChild(spec string) int {
	var mode string
	var si, ng, n, pace int
	if _, err := fmt.Sscan(spec, &mode, &si, &ng, &n, &pace); err != nil || ng > maxG {
		fmt.Fprintf(os.Stderr, "%s=%q: %v\n", killEnv, spec, err)
		return 2
	}
	f, err := os.OpenFile(os.Getenv(killCtlEnv), os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	mem, err := unix.Mmap(int(f.Fd()), int64(si*slotSize), slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := slot(mem)
	pid := uint32(os.Getpid())
	s.store(wPid, uint64(pid))
	// A producer outlives no test: it ends when its parent does, or after
	// a while whatever happens.
	ppid := os.Getppid()
	go func() {
		for start := time.Now(); os.Getppid() == ppid && time.Since(start) < 5*time.Minute; {
			time.Sleep(100 * time.Millisecond)
		}
		os.Exit(3)
	}()

	uf, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: os.Getenv(killSockEnv),
		Transport: userevents.RingTransport, RingKB: 4096})
	if err != nil {
		return s.fail(err)
	}
	if uf.Transport() != userevents.RingTransport {
		return s.fail(fmt.Errorf("no ring: %v", uf.RingError()))
	}
	ev, err := uf.Register(killCmd, 0)
	if err != nil {
		return s.fail(err)
	}
	for start := time.Now(); !ev.Enabled(); time.Sleep(100 * time.Microsecond) {
		if time.Since(start) > time.Minute {
			return s.fail(errors.New("the event was not enabled within a minute"))
		}
	}
	rnd := rand.New(rand.NewPCG(uint64(pid), uint64(time.Now().UnixNano())))
	write := func(g int, count int) error {
		var buf [killPayload]byte
		for seq := range count {
			s.store(wStarted+2*g, uint64(seq+1))
			if err := ev.Write(killPayloadOf(buf[:], pid, uint32(g), uint64(seq))); err != nil {
				return err
			}
			s.store(wDone+2*g, uint64(seq+1))
			if pace > 0 && seq%16 == 15 {
				time.Sleep(time.Duration(rand.IntN(pace)) * time.Microsecond)
			}
		}
		return nil
	}

	switch mode {
	case "write", "tear":
		if mode == "tear" {
			ring, err := ownRing(uf)
			if err != nil {
				return s.fail(err)
			}
			// The record's header is written, its payload half: the
			// daemon waits at it while the producer lives, and counts it
			// torn once it is gone, delivering what the others published
			// after it — into that ring and the others.
			p := ring(stamp.CPU())
			res, ok := p.Reserve(shmring.Meta{Time: stamp.Now(), WriteIndex: ev.WriteIndex(), TID: uint32(unix.Gettid())}, killPayload)
			if !ok {
				return s.fail(errors.New("the ring has no room for the torn record"))
			}
			killPayloadOf(res.Payload()[:killPayload:killPayload], pid, maxG, 0)
			clear(res.Payload()[12:])
			runtime.KeepAlive(ring)
		}
		s.store(wState, stReady)
		errs := make(chan error, ng)
		for g := range ng {
			go func() { errs <- write(g, n) }()
		}
		for range ng {
			if err := <-errs; err != nil {
				return s.fail(err)
			}
		}
	case "afterclose":
		s.store(wState, stReady)
		if err := write(0, n); err != nil {
			return s.fail(err)
		}
		ring, err := ownRing(uf)
		if err != nil {
			return s.fail(err)
		}
		idx := ev.WriteIndex()
		if err := uf.Close(); err != nil {
			return s.fail(err)
		}
		s.store(wState, stClosed)
		var buf [killPayload]byte
		for seq := uint64(n); ; seq++ {
			s.store(wStarted, seq+1)
			tid, cpu := stamp.TidCPU()
			ring(cpu).Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: uint32(tid), CPU: cpu}, killPayloadOf(buf[:], pid, 0, seq))
			s.store(wDone, seq+1)
			s.store(wPost, seq+1-uint64(n))
			if seq%64 == 0 {
				time.Sleep(time.Duration(rnd.IntN(50)) * time.Microsecond)
			}
		}
	default:
		return s.fail(fmt.Errorf("unknown mode %q", mode))
	}
	// Done: wait to be killed.
	select {}
}

// ownRing maps this process's ring set a second time, as a producer that
// scribbles on it would, and returns the ring a record of each CPU goes
// into: its memfd is the one named "uetrace-ringset" among this process's
// descriptors, kept open by f's ring.
func ownRing(f *userevents.File) (func(cpu uint32) *shmring.Producer, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !strings.HasPrefix(target, "/memfd:uetrace-ringset") {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		sp, err := shmring.OpenSet(dup, userevents.RingCount(f))
		if err != nil {
			return nil, err
		}
		return sp.For, nil
	}
	return nil, errors.New("no uetrace-ringset memfd among this process's descriptors")
}

// daemonUsage is what the test process — the daemon — holds: descriptors,
// mappings (all, and those of memfds: clients' arenas and rings, and the
// control file), goroutines.
type daemonUsage struct {
	fds, maps, memfdMaps, goroutines int
}

func (u daemonUsage) String() string {
	return fmt.Sprintf("%d fds, %d mappings (%d of memfds), %d goroutines", u.fds, u.maps, u.memfdMaps, u.goroutines)
}

func usage(t *testing.T) daemonUsage {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return daemonUsage{
		fds:        len(ents),
		maps:       bytes.Count(maps, []byte("\n")),
		memfdMaps:  bytes.Count(maps, []byte("/memfd:")),
		goroutines: runtime.NumGoroutine(),
	}
}

// producer is one producer process of a round, and how it is to die.
type producer struct {
	mode string // killChild's
	plan string // early: killed at a random time from its start; kill: at a random time once it writes; stop: the same, stopped first
	slot slot
	g, n int
	pace int

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the child's exit, once exited is closed
	errf   *os.File
}

func (p *producer) pid() uint32 { return uint32(p.cmd.Process.Pid) }

func (p *producer) String() string {
	return fmt.Sprintf("producer %d (%s, %s, %d goroutines × %d records, pace %d µs)", p.pid(), p.mode, p.plan, p.g, p.n, p.pace)
}

func (p *producer) stderr() string {
	b, _ := os.ReadFile(p.errf.Name())
	if len(b) == 0 {
		return ""
	}
	return "; stderr:\n" + string(b)
}

// waitState waits until the producer reports state st, and fails if it
// exits or reports a failure first.
func (p *producer) waitState(st uint64) error {
	deadline := time.Now().Add(time.Minute)
	for {
		switch s := p.slot.load(wState); {
		case s == stFailed:
			return fmt.Errorf("%v failed: %s", p, p.slot.message())
		case s >= st:
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%v exited before it was killed: %v%s", p, p.err, p.stderr())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v not in state %d within a minute: %d", p, st, p.slot.load(wState))
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// kill SIGKILLs the producer and waits for it: it must die of the signal.
func (p *producer) kill() error {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		return fmt.Errorf("%v ended with %v, not SIGKILL: %s%s", p, p.err, p.slot.message(), p.stderr())
	}
	return nil
}

// stop SIGSTOPs the producer and waits until all its threads have stopped
// (waitid's CLD_STOPPED), so that none of its writes moves on.
func (p *producer) stop() error {
	p.cmd.Process.Signal(syscall.SIGSTOP)
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil); err != nil {
		return fmt.Errorf("%v: waitid for its stop: %w", p, err)
	}
	const cldStopped = 5
	if info.Code != cldStopped {
		return fmt.Errorf("%v: waitid reports code %d, not CLD_STOPPED", p, info.Code)
	}
	return nil
}

// counters are the writes each goroutine began and saw return.
func (p *producer) counters() (started, done []uint64) {
	for g := range p.g {
		started = append(started, p.slot.load(wStarted+2*g))
		done = append(done, p.slot.load(wDone+2*g))
	}
	return started, done
}

// die runs the producer's plan: it waits a random time — from its start,
// or from when it began writing — and kills it.
func (p *producer) die(delay time.Duration) error {
	if p.plan == "early" {
		time.Sleep(delay)
		return p.kill()
	}
	if err := p.waitState(stReady); err != nil {
		return err
	}
	time.Sleep(delay)
	if p.plan != "stop" {
		return p.kill()
	}
	if err := p.stop(); err != nil {
		return err
	}
	s1, d1 := p.counters()
	if err := p.kill(); err != nil {
		return err
	}
	if s2, d2 := p.counters(); fmt.Sprint(s1, d1) != fmt.Sprint(s2, d2) {
		return fmt.Errorf("%v wrote on while stopped: began %v and finished %v writes when stopped, %v and %v when killed", p, s1, d1, s2, d2)
	}
	return nil
}

// seen is what a round's records say of each producer: per goroutine, the
// sequence numbers delivered, in the order they came (each checked to be
// greater than the one before).
type seen map[uint32][][]uint64

// count is how many of seqs are below n.
func count(seqs []uint64, n uint64) uint64 {
	k := uint64(0)
	for _, s := range seqs {
		if s < n {
			k++
		}
	}
	return k
}

// take reads the session's records, checking each: payload intact, its pid
// the pid it was delivered under and one of the round's producers, each
// goroutine's sequence numbers increasing.
func take(t *testing.T, ss *client.Session, recs []client.Record, evID int, ps []*producer, got seen) (int, []client.Record) {
	t.Helper()
	// Everything the session has, then in time order: the records of a
	// goroutine that moved between CPUs reach the session through two
	// drainers, each CPU's in time order, and a reader orders them by
	// time, as perf's readers order the kernel's per-CPU rings.
	var all []client.Record
	for {
		var lost, tooLarge uint64
		var err error
		recs, lost, tooLarge, err = ss.Poll(recs[:0])
		if err != nil {
			t.Fatal(err)
		}
		if lost != 0 || tooLarge != 0 {
			t.Fatalf("the session lost %d records and dropped %d as too large", lost, tooLarge)
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			r.Raw = bytes.Clone(r.Raw)
			all = append(all, r)
		}
	}
	slices.SortStableFunc(all, func(a, b client.Record) int { return cmp.Compare(a.TS, b.TS) })
	n := len(all)
	for _, r := range all {
		if r.ID != evID || len(r.Raw) < eventdefHeader+killPayload {
			t.Fatalf("record of event %d with %d bytes; want event %d with %d", r.ID, len(r.Raw), evID, eventdefHeader+killPayload)
		}
		ne := binary.NativeEndian
		b := r.Raw[eventdefHeader:]
		pid, g, seq, chk := ne.Uint32(b), ne.Uint32(b[4:]), ne.Uint64(b[8:]), ne.Uint64(b[16:])
		if chk != check(pid, g, seq) {
			t.Fatalf("record of pid %d: payload %x is not intact", r.PID, b[:killPayload])
		}
		if uint32(r.PID) != pid {
			t.Fatalf("a record producer %d wrote was delivered under pid %d", pid, r.PID)
		}
		var p *producer
		for _, q := range ps {
			if q.pid() == pid {
				p = q
			}
		}
		if p == nil {
			t.Fatalf("record of pid %d (g %d seq %d), none of this round's producers — one released before", pid, g, seq)
		}
		if int(g) >= p.g {
			t.Fatalf("%v: record of goroutine %d", p, g)
		}
		if got[pid] == nil {
			got[pid] = make([][]uint64, p.g)
		}
		if seqs := got[pid][g]; len(seqs) > 0 && seq <= seqs[len(seqs)-1] {
			t.Fatalf("%v: goroutine %d's record %d arrived after its record %d (a duplicate, or out of order)", p, g, seq, seqs[len(seqs)-1])
		}
		got[pid][g] = append(got[pid][g], seq)
	}
	return n, recs
}

// eventdefHeader is the common header before a session record's payload.
const eventdefHeader = 8

// TestRingProducersKilled kills producer processes that write through
// their rings at random points — while they set up, mid-write from several
// goroutines at once, stopped, holding a reservation they never commit,
// writing into the ring after they closed their File — round after round,
// against one daemon. After each round it checks that:
//
//   - the daemon released each killed producer's connection, and holds no
//     more descriptors, mappings of client memory or goroutines than
//     after the first round;
//   - every record delivered is intact, was delivered under the pid of the
//     process that wrote it, and each writing goroutine's sequence numbers
//     arrive in order, without gaps or duplicates;
//   - every write a producer saw return was delivered — published records
//     outlive their producer — or counted as dropped, and at most the one
//     write each goroutine was in the middle of besides;
//   - what was torn is counted: each reservation a producer never
//     committed is in RingStats.Torn (and its bytes in Discarded, which
//     counts every byte skipped), and Torn and Discarded count no more
//     than those and the writes in flight at the kill; nothing was
//     rejected or taken for a disabled event;
//   - what a producer publishes into its ring after its File was closed
//     and the daemon let the ring go is never delivered.
func TestRingProducersKilled(t *testing.T) {
	// At least minRounds; more, up to maxRounds, while the budget lasts —
	// a round takes ~0.1 s here, several times that under -race on a busy
	// machine.
	minRounds, maxRounds, budget := 25, 120, 25*time.Second
	if testing.Short() {
		maxRounds = minRounds
	}
	srv, sock := daemontest.Serve(t, daemon.Config{Subsystem: subsys.New(subsys.Options{NumCPU: 2})})

	// The test's own registration keeps the event between producers, and
	// a session attached to it keeps it enabled and receives every record.
	o := &userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.SocketTransport}
	own := open(t, o)
	ownEv := register(t, own, killCmd, 0)
	fs := openTracefs(t, o)
	idText, err := fs.ReadFile("events/user_events/kill_ev/id")
	if err != nil {
		t.Fatal(err)
	}
	evID, err := strconv.Atoi(strings.TrimSpace(string(idText)))
	if err != nil {
		t.Fatal(err)
	}
	ss := attachedSession(t, sock, "user_events:kill_ev", 32<<20)
	waitBit(t, ownEv, true)

	const slots = 2
	dir := t.TempDir()
	ctlPath := filepath.Join(dir, "control")
	if err := os.WriteFile(ctlPath, make([]byte, slots*slotSize), 0o600); err != nil {
		t.Fatal(err)
	}
	ctlFile, err := os.OpenFile(ctlPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := unix.Mmap(int(ctlFile.Fd()), 0, slots*slotSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	ctlFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ctl)

	baseConns := srv.Conns()
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 15))
	var base daemonUsage
	var sum struct {
		delivered, published, missing, torn, discarded, inflight, tears uint64
		plans                                                           map[string]int
	}
	sum.plans = map[string]int{}
	var recs []client.Record
	start := time.Now()
	rounds := 0
	for round := range maxRounds {
		if round >= minRounds && time.Since(start) > budget {
			break
		}
		rounds++
		var ps []*producer
		spawn := func(p *producer, si int) {
			p.slot = slot(ctl[si*slotSize : (si+1)*slotSize])
			p.slot.reset()
			errf, err := os.Create(filepath.Join(dir, fmt.Sprintf("producer-%d.out", si)))
			if err != nil {
				t.Fatal(err)
			}
			p.errf = errf
			p.cmd = exec.Command(os.Args[0], "-test.run=^$")
			p.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d %d", killEnv, p.mode, si, p.g, p.n, p.pace),
				killSockEnv+"="+sock, killCtlEnv+"="+ctlPath)
			p.cmd.Stdout, p.cmd.Stderr = errf, errf
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			p.exited = make(chan struct{})
			go func() { p.err = p.cmd.Wait(); errf.Close(); close(p.exited) }()
			ps = append(ps, p)
			sum.plans[p.mode+"/"+p.plan]++
		}
		before := srv.RingStats()
		got := seen{}
		if round%10 == 9 {
			// One producer writes, closes its File and goes on writing
			// into the ring through its own mapping.
			p := &producer{mode: "afterclose", plan: "kill", g: 1, n: 500}
			spawn(p, 0)
			if err := p.waitState(stClosed); err != nil {
				t.Fatal(err)
			}
			if !testutil.Eventually(func() bool { return srv.Conns() == baseConns }) {
				t.Fatalf("round %d: %v closed its File; the daemon still has %d connections, want %d", round, p, srv.Conns(), baseConns)
			}
			n, r := take(t, ss, recs, evID, ps, got)
			recs = r
			// What it published before the close is there (but for what
			// the ring dropped, checked below), and perhaps some of what
			// came after, before the daemon let go.
			var seqs []uint64
			if got[p.pid()] != nil {
				seqs = got[p.pid()][0]
			}
			missing := uint64(p.n) - count(seqs, uint64(p.n))
			if len(seqs) > 0 && seqs[len(seqs)-1] >= p.slot.started(0) {
				t.Fatalf("round %d: %v: record %d delivered; it began %d writes", round, p, seqs[len(seqs)-1], p.slot.started(0))
			}
			released := srv.RingStats()
			after := p.slot.load(wPost)
			if !testutil.Eventually(func() bool { return p.slot.load(wPost) >= after+5000 || p.slot.load(wState) == stFailed }) {
				t.Fatalf("round %d: %v did not go on writing after the close: %d records", round, p, p.slot.load(wPost))
			}
			if more, _ := take(t, ss, recs, evID, ps, got); more != 0 {
				t.Fatalf("round %d: %v: %d records written after the daemon released its ring were delivered", round, p, more)
			}
			if st := srv.RingStats(); st != released {
				t.Fatalf("round %d: the ring stats moved after the release: %+v, then %+v", round, released, st)
			}
			if err := p.kill(); err != nil {
				t.Fatal(err)
			}
			st := srv.RingStats()
			// Closing while a write was in flight may tear that one
			// record; a ring the daemon was slow to drain may have
			// dropped some of what came after the close.
			d := diffStats(st, before)
			if d.Delivered != uint64(n) || d.Rings != 1 || d.Rejected+d.Disabled+d.TooLong+d.BadHead != 0 ||
				d.Torn > 1 || d.Discarded > killRecord || d.Dropped < missing {
				t.Fatalf("round %d: %v: %d records delivered, %d of those written before the close missing; ring stats moved by %+v", round, p, n, missing, d)
			}
			sum.delivered += uint64(n)
			sum.published += uint64(p.n)
			sum.missing += missing
		} else {
			for si := range slots {
				p := &producer{mode: "write", g: 3}
				// Paced producers write for tens of milliseconds, so that
				// kills land among their writes; unpaced ones as fast as
				// they can, so that kills land inside writes.
				if rnd.IntN(2) == 0 {
					p.n, p.pace = 1000, 200
				} else {
					p.n = 3000
				}
				switch r := rnd.IntN(8); {
				case r == 0:
					p.plan = "early"
				case r < 3:
					p.plan = "stop"
				default:
					p.plan = "kill"
				}
				if p.plan != "early" && rnd.IntN(5) == 0 {
					p.mode = "tear"
				}
				spawn(p, si)
			}
			errs := make(chan error, len(ps))
			for _, p := range ps {
				var delay time.Duration
				switch {
				case p.plan == "early":
					delay = time.Duration(rnd.Int64N(int64(30 * time.Millisecond)))
				case p.pace > 0:
					delay = time.Duration(rnd.Int64N(int64(40 * time.Millisecond)))
				default:
					delay = time.Duration(rnd.Int64N(int64(2 * time.Millisecond)))
				}
				go func() { errs <- p.die(delay) }()
			}
			for range ps {
				if err := <-errs; err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if !testutil.Eventually(func() bool { return srv.Conns() == baseConns }) {
				t.Fatalf("round %d: all producers killed; the daemon still has %d connections, want %d", round, srv.Conns(), baseConns)
			}
			n, r := take(t, ss, recs, evID, ps, got)
			recs = r
			// Each write a goroutine saw return was delivered or dropped;
			// the one it was in, if any, delivered, dropped, torn or never
			// reserved.
			var inflight, missing, tears, published uint64
			for _, p := range ps {
				started, done := p.counters()
				for g := range p.g {
					var seqs []uint64
					if got[p.pid()] != nil {
						seqs = got[p.pid()][g]
					}
					if len(seqs) > 0 && seqs[len(seqs)-1] >= started[g] {
						t.Fatalf("round %d: %v: goroutine %d's record %d delivered; it began %d writes", round, p, g, seqs[len(seqs)-1], started[g])
					}
					k := count(seqs, done[g])
					missing += done[g] - k
					inflight += started[g] - done[g] - (uint64(len(seqs)) - k)
					published += done[g]
				}
				if p.mode == "tear" {
					tears++
				}
			}
			d := diffStats(srv.RingStats(), before)
			if d.Delivered != uint64(n) || d.Rings > uint64(len(ps)) || d.Rejected+d.Disabled+d.TooLong+d.BadHead != 0 ||
				d.Dropped < missing || d.Dropped > missing+inflight ||
				d.Torn < tears || d.Torn > tears+inflight || d.Discarded < tears*killRecord || d.Discarded > (tears+inflight)*killRecord {
				t.Fatalf("round %d: %d records delivered, %d written and not delivered, %d reservations never committed, %d writes in flight at the kill and not delivered; ring stats moved by %+v",
					round, n, missing, tears, inflight, d)
			}
			sum.missing += missing
			sum.delivered += uint64(n)
			sum.published += published
			sum.torn += d.Torn
			sum.discarded += d.Discarded
			sum.inflight += inflight
			sum.tears += tears
		}

		// The daemon holds nothing more than after the first round.
		u := usage(t)
		if round == 0 {
			base = u
			continue
		}
		if !testutil.Eventually(func() bool {
			u = usage(t)
			return u.fds <= base.fds && u.memfdMaps <= base.memfdMaps && u.goroutines <= base.goroutines
		}) {
			t.Fatalf("round %d: the daemon holds %v; after the first round it held %v", round, u, base)
		}
	}
	end := usage(t)
	// Each client a daemon forgot would leave several mappings (an arena,
	// a ring's three); mappings of the Go heap may come and go.
	if end.maps >= base.maps+rounds {
		t.Errorf("mappings grew from %d after the first round to %d after %d rounds", base.maps, end.maps, rounds)
	}
	t.Logf("%d rounds in %v (seed %d): %v; %d records published and %d delivered; %d reservations never committed, %d writes in flight at kills; torn %d, discarded %d bytes; daemon %v (after round 0: %v)",
		rounds, time.Since(start).Round(time.Millisecond), seed, sum.plans, sum.published, sum.delivered, sum.tears, sum.inflight, sum.torn, sum.discarded, end, base)
	if sum.missing > 0 {
		// Counted as dropped, so not lost silently; but the rings here
		// never hold more than a few hundred KiB of their 4 MiB: a drop
		// is a producer that took a tail ahead of a stale head for a
		// full ring (fixed in shmring's TryReserve).
		t.Errorf("%d published records were dropped by rings that were far from full", sum.missing)
	}
}

// diffStats is a-b, field by field.
func diffStats(a, b daemon.RingStats) daemon.RingStats {
	return daemon.RingStats{
		Rings: a.Rings - b.Rings, Delivered: a.Delivered - b.Delivered, Rejected: a.Rejected - b.Rejected,
		Disabled: a.Disabled - b.Disabled, Dropped: a.Dropped - b.Dropped, Torn: a.Torn - b.Torn,
		TooLong: a.TooLong - b.TooLong, Discarded: a.Discarded - b.Discarded, BadHead: a.BadHead - b.BadHead,
	}
}
