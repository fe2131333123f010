package preload_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// These tests serve a subsystem's tree through FUSE with the daemon's
// shares, and run a C program (testdata/procs.c) on it with the library
// preloaded. This process never touches the mount: a FUSE server that
// blocks on its own mount cannot be ended.

// tree is a served tree, the library and the test program.
type tree struct {
	dir  string // the mount
	sys  *subsys.Subsystem
	srv  *daemon.Server
	lib  string // the library, written from preload.Library
	dev  uint64 // the mount's st_dev: UETRACE_TREE
	mt   *fusefs.Tree
	prog string // testdata/procs.c, built
	tmp  string
}

// newTree serves a tree; v10 serves the v10 ABI too (fusefs.Options.V10).
func newTree(t *testing.T, v10 ...bool) *tree {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("the interposer is built for amd64 only, this is %s", runtime.GOARCH)
	}
	testutil.NeedFUSE(t, "mounting FUSE")
	tmp := t.TempDir()
	tr := &tree{dir: filepath.Join(tmp, "tracing"), lib: filepath.Join(tmp, preload.FileName), tmp: tmp}
	tr.prog = testutil.BuildC(t, filepath.Join(tmp, "procs"), filepath.Join("testdata", "procs.c"), "-O2", "-Wall", "-Werror", "-pthread")
	if err := os.WriteFile(tr.lib, preload.Library, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tr.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tr.sys = subsys.New(subsys.Options{NumCPU: runtime.NumCPU()})
	// The daemon warns of what each ring lost: the stress tests' rings
	// lose much, on purpose.
	tr.srv = daemon.New(daemon.Config{Subsystem: tr.sys, Logger: slog.New(slog.DiscardHandler)})
	mt, err := fusefs.Mount(tr.dir, tr.sys, fusefs.Options{Flush: tr.srv.Flush, V10: len(v10) > 0 && v10[0],
		Share: func(r fusefs.ShareRequest) (fusefs.Share, error) {
			sh, err := tr.srv.FUSEShare(r.File, r.Writer, r.UID, r.Cred, r.Set, r.Table, r.Wake)
			if err != nil {
				return nil, err
			}
			return sh, nil
		}, Rings: tr.srv.Rings()})
	if err != nil {
		t.Fatal(err)
	}
	tr.mt = mt
	t.Cleanup(func() {
		mt.Close()
		tr.srv.Close()
	})
	tr.dev, _ = fusefs.MountDev(tr.dir)
	if tr.dev == 0 {
		t.Fatal("the mount's st_dev is unknown")
	}
	return tr
}

// env is this process's environment with the library preloaded (or not).
func (tr *tree) env(preloaded bool) []string {
	env := os.Environ()
	if preloaded {
		env = append(env, "LD_PRELOAD="+tr.lib, "UETRACE_TREE="+strconv.FormatUint(tr.dev, 10))
	}
	return env
}

// command is the test program with args, under ctx.
func (tr *tree) command(ctx context.Context, preloaded bool, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tr.prog, append([]string{tr.dir}, args...)...)
	cmd.Env = tr.env(preloaded)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs the test program to its end and returns its output.
func (tr *tree) run(t *testing.T, preloaded bool, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := tr.command(ctx, preloaded, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("procs %s (preloaded %v): %v\n%s%s", strings.Join(args, " "), preloaded, err, o.String(), e.String())
	}
	return o.String(), e.String()
}

// event is the subsystem's event of that name.
func (tr *tree) event(t *testing.T, name string) *subsys.Event {
	t.Helper()
	ev := tr.sys.Lookup("user_events", name)
	if ev == nil {
		t.Fatalf("no event %s", name)
	}
	return ev
}

// TestCalls: each write of the program is answered as without the library
// — through FUSE, the daemon's answers, which are the kernel's — but the
// 0-byte write(2), which the library answers as the kernel does (EFAULT)
// and FUSE's VFS cannot (0).
func TestCalls(t *testing.T) {
	tr := newTree(t)
	pre, stats := tr.run(t, true, "calls")
	fuse, _ := tr.run(t, false, "calls")
	a, b := strings.Split(pre, "\n"), strings.Split(fuse, "\n")
	if len(a) != len(b) || len(a) < 30 {
		t.Fatalf("%d lines preloaded, %d through FUSE:\n%s\n%s", len(a), len(b), pre, fuse)
	}
	differ := map[string]string{"write_0_bytes": "write_0_bytes -1 EFAULT"}
	for i := range a {
		label, _, _ := strings.Cut(a[i], " ")
		if want, ok := differ[label]; ok {
			if a[i] != want {
				t.Errorf("preloaded %q, want %q (the kernel's answer)", a[i], want)
			}
			continue
		}
		if a[i] != b[i] {
			t.Errorf("preloaded %q, through FUSE %q", a[i], b[i])
		}
	}
	// The writes the ring could take went through it: one share, and the
	// invalid records it voided for the daemon to answer.
	var shares, voided, fallbacks int
	if _, err := fmt.Sscanf(stats, "shares %d voided %d fallbacks %d", &shares, &voided, &fallbacks); err != nil || shares != 1 || voided != 6 {
		t.Errorf("the library's counts: %q (%v); want 1 share and 6 records voided (a fault, five __data_loc/__rel_loc the daemon judged)", stats, err)
	}
	tr.srv.Flush()
	if st := tr.srv.RingStats(); st.Rejected != 0 || st.Voided != 6 {
		t.Errorf("ring stats %+v: want no record rejected and the 6 voided", st)
	}
}

// traceCounts counts the records of event name in the trace buffer by
// writer pid.
func (tr *tree) traceCounts(t *testing.T, name string) map[int]int {
	t.Helper()
	tr.srv.Flush()
	b, err := tr.sys.FS().ReadFile("trace", subsys.Cred{PerfmonCapable: true})
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\s*\S+-(\d+)\s+\[\d+\].*: ` + regexp.QuoteMeta(name) + `:`)
	got := map[int]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			pid, _ := strconv.Atoi(m[1])
			got[pid]++
		}
	}
	return got
}

// TestProcesses: dup, dup2, dup3, F_DUPFD, close, close_range, closefrom,
// fclose, a number reused by another file, SCM_RIGHTS, fork, a raw clone,
// vfork, exec and a lost wake socket (the program checks what it can see)
// — and every record is in the trace under the process that wrote it.
func TestProcesses(t *testing.T) {
	tr := newTree(t)
	out, _ := tr.run(t, true, "procs")
	if !strings.Contains(out, "PASS 0") {
		t.Errorf("procs:\n%s", out)
	}
	want := map[int]int{}
	for line := range strings.Lines(out) {
		var pid, n int
		var who string
		if _, err := fmt.Sscanf(line, "wrote %d %d %s", &pid, &n, &who); err == nil {
			want[pid] += n
		}
	}
	if len(want) < 5 {
		t.Fatalf("the program said it wrote from %d processes, want the parent, two fork children, the vfork and the exec child:\n%s", len(want), out)
	}
	got := tr.traceCounts(t, "ue_a")
	for pid, n := range want {
		if got[pid] != n {
			t.Errorf("process %d: %d records in the trace, it wrote %d", pid, got[pid], n)
		}
	}
	for pid, n := range got {
		if _, ok := want[pid]; !ok {
			t.Errorf("%d records in the trace under process %d, which wrote none", n, pid)
		}
	}
	if st := tr.srv.RingStats(); st.Rejected != 0 || st.ForgedTID != 0 || st.Torn != 0 {
		t.Errorf("ring stats %+v", st)
	}
}

// readResult is what a reader of ue_a's records saw.
type readResult struct {
	n   int      // records read
	bad []string // the first garbled ones, described
}

// reader attaches a session to ue_a (which follows it into existence) and
// reads its records as they come (readRecords); stop, after the writers
// are done and the daemon flushed, returns what it read.
func (tr *tree) reader(t *testing.T) (*subsys.Session, func() readResult) {
	t.Helper()
	ss := tr.sys.NewSession(subsys.SessionOptions{BufferBytes: 64 << 20})
	t.Cleanup(func() { ss.Close() })
	if _, err := ss.AttachMatching("user_events:ue_a", true); err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	done := make(chan readResult, 1)
	go func() { n, bad := readRecords(ss, quit); done <- readResult{n, bad} }()
	return ss, func() readResult { close(quit); return <-done }
}

// readRecords reads a session's records of ue_a until stop is closed and
// the session drained, checking each payload is whole: the tag and the
// source, the sequence's pattern, the end mark. It returns the records
// read and the garbled ones' descriptions.
func readRecords(ss *subsys.Session, stop <-chan struct{}) (n int, bad []string) {
	buf := make([]byte, 1<<20)
	var recs []subsys.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		var err error
		recs, err = ss.Read(ctx, buf, recs[:0])
		cancel()
		for _, r := range recs {
			if r.Event == nil {
				continue
			}
			n++
			if msg := checkPayload(r.Raw[8:]); msg != "" && len(bad) < 10 {
				bad = append(bad, msg)
			}
		}
		if err != nil && len(recs) == 0 {
			select {
			case <-stop:
				return n, bad
			default:
			}
		}
	}
}

// checkPayload says what is wrong with a record of ue_a, or "".
func checkPayload(p []byte) string {
	if len(p) < 34 {
		return fmt.Sprintf("%d bytes", len(p))
	}
	le := binary.LittleEndian
	tag, seq, src := le.Uint32(p), le.Uint64(p[4:]), le.Uint32(p[12:])
	if tag&^0xff != 0xC0FFEE00 || tag&0xff != src {
		return fmt.Sprintf("tag %#x, source %d", tag, src)
	}
	for _, c := range p[16:32] {
		if c != byte(seq) {
			return fmt.Sprintf("source %d sequence %d: pattern %x", src, seq, p[16:32])
		}
	}
	if p[32] != 0x5a || p[33] != 0x5a {
		return fmt.Sprintf("source %d sequence %d: end mark %x", src, seq, p[32:34])
	}
	return ""
}

// TestSignalsAndThreads: the main thread, a second thread and a storm of
// signal handlers on the main thread write at once — the handlers
// interrupting the writes and the share's set-up of the thread they run
// on. Every write returns its length, no record is garbled, and every one
// is accounted for: the event's count of records written is the program's.
func TestSignalsAndThreads(t *testing.T) {
	tr := newTree(t)
	ss, stop := tr.reader(t)
	out, _ := tr.run(t, true, "stress", "2")
	tr.srv.Flush()
	res := stop()
	var written, failed, dropped, fallbacks uint64
	if _, err := fmt.Sscanf(out, "written %d failed %d dropped %d fallbacks %d", &written, &failed, &dropped, &fallbacks); err != nil {
		t.Fatalf("stress said %q: %v", out, err)
	}
	if failed != 0 || written < 1000 {
		t.Errorf("stress: %s", out)
	}
	if len(res.bad) > 0 {
		t.Errorf("garbled records: %q", res.bad)
	}
	// Written: records delivered, records the ring dropped and the
	// library told in loss records, and writes through FUSE (during the
	// share's set-up).
	ev := tr.event(t, "ue_a")
	evWritten, evDropped := ev.Counts()
	st := tr.srv.RingStats()
	if evWritten != written {
		t.Errorf("the event counts %d records written (%d of them lost in full rings), the program wrote %d; ring stats %+v", evWritten, evDropped, written, st)
	}
	if st.Rejected != 0 || st.Torn != 0 || st.ForgedTID != 0 || st.LostCapped != 0 {
		t.Errorf("ring stats %+v", st)
	}
	t.Logf("%d written (%d through FUSE, %d dropped by a full ring and told), %d read by the session, %d lost by it", written, fallbacks, evDropped, res.n, ss.Lost())
}

// TestKilledMidWrite: a producer killed at a random moment — perhaps
// between its reservation and its commit — loses at most its own record
// being written: the daemon skips it (torn), delivers every record
// committed before, and nothing garbled.
func TestKilledMidWrite(t *testing.T) {
	tr := newTree(t)
	ss, stop := tr.reader(t)
	const kills = 8
	for i := range kills {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := tr.command(ctx, true, "forever")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("the writer said %q", line)
		}
		// Let it write a while, stop it wherever it is, kill it.
		time.Sleep(time.Duration(5+7*i) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGSTOP)
		cmd.Process.Kill()
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		cancel()
	}
	// Each share is released when the daemon learns its process exited.
	testutil.Wait(t, "the killed writers' rings released", func() bool {
		st := tr.srv.RingStats()
		return st.Released == st.Rings && st.Rings == kills
	})
	res := stop()
	st := tr.srv.RingStats()
	if len(res.bad) > 0 {
		t.Errorf("garbled records: %q", res.bad)
	}
	if st.Torn > kills || st.Rejected != 0 || st.BadHead != 0 {
		t.Errorf("ring stats %+v: at most one torn record per kill, nothing rejected", st)
	}
	// The session's lost count has its own drops (a full buffer) and
	// those the producers told (a full ring).
	if res.n == 0 || uint64(res.n)+ss.Lost() != st.Delivered+st.Lost {
		t.Errorf("the session read %d records and lost %d, the daemon delivered %d and was told of %d lost", res.n, ss.Lost(), st.Delivered, st.Lost)
	}
	t.Logf("%d kills: %d records delivered, %d torn", kills, st.Delivered, st.Torn)
}

// TestHostileTable: a process that scribbles its share's validation table
// — every index enabled, no minimum size, no __rel_loc rule — gets its
// library to publish records that break their events' layout; the daemon
// delivers none of them, counting each as rejected (or, for the disabled
// event, delivered to no one).
func TestHostileTable(t *testing.T) {
	tr := newTree(t)
	out, _ := tr.run(t, true, "hostile")
	if !strings.Contains(out, "hostile 300 of 300 accepted") {
		t.Fatalf("hostile: %s", out)
	}
	tr.srv.Flush()
	st := tr.srv.RingStats()
	if st.Rejected != 200 || st.Disabled != 100 || st.Delivered != 1 {
		t.Errorf("ring stats %+v: want the 200 broken records rejected, the 100 of the disabled event delivered to no one, the first write delivered", st)
	}
	if w, _ := tr.event(t, "ue_rl").Counts(); w != 0 {
		t.Errorf("ue_rl: %d records written", w)
	}
	if got := tr.traceCounts(t, "ue_a"); len(got) != 1 {
		t.Errorf("ue_a in the trace: %v, want the one whole record", got)
	}
}

// TestV10 runs a program of the first user_events ABI (testdata/v10.c:
// the calls of the v10 series' example of typical usage) on a tree serving
// it: the status page it maps says 0, then the event's status once
// something attaches, and its write reaches the trace under its pid. On a
// tree of today's ABI only, mapping the status page fails as it does on
// any FUSE file (ENODEV).
func TestV10(t *testing.T) {
	tr := newTree(t, true)
	prog := testutil.BuildC(t, filepath.Join(tr.tmp, "v10"), filepath.Join("testdata", "v10.c"), "-O2", "-Wall", "-Werror")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, tr.dir)
	cmd.Env = append(tr.env(true), "UETRACE_ABI=v10")
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the program's output ended: %v", lines.Err())
		}
		return lines.Text()
	}
	var si, wi int
	if l := next(); func() bool { _, err := fmt.Sscanf(l, "status_index %d write_index %d", &si, &wi); return err != nil }() || si == 0 {
		t.Fatalf("the program said %q", l)
	}
	root := subsys.Cred{PerfmonCapable: true}
	if err := tr.sys.FS().WriteFile("events/user_events/test/enable", []byte("1"), 0, root); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "wrote" {
		t.Fatalf("the program said %q, want wrote", l)
	}
	if got := tr.traceCounts(t, "test"); got[cmd.Process.Pid] != 1 || len(got) != 1 {
		t.Errorf("records of test in the trace by pid: %v, want 1 of %d", got, cmd.Process.Pid)
	}
	if err := tr.sys.FS().WriteFile("events/user_events/test/enable", []byte("0"), 0, root); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "disabled" {
		t.Fatalf("the program said %q, want disabled", l)
	}
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}

	// Today's ABI alone: the page cannot be mapped.
	plain := newTree(t)
	out, err := exec.Command(prog, plain.dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "mmap of user_events_status: ENODEV") {
		t.Errorf("on a tree of today's ABI: %v, %q", err, out)
	}
}

// TestTreeGone: when the tree stops being served while a program writes
// through its ring — nobody drains it any more — the library gives the
// ring up as soon as it fills and the program's writes fail as they do
// through FUSE alone (ENOTCONN), not succeed into a ring nobody reads.
func TestTreeGone(t *testing.T) {
	tr := newTree(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := tr.command(ctx, true, "untilfail")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("the writer said %q", out.Text())
	}
	tr.mt.Close()
	if !out.Scan() || out.Text() != "ENOTCONN" {
		t.Errorf("after the tree went, the writer's write failed with %q, want ENOTCONN", out.Text())
	}
	cmd.Wait()
}
