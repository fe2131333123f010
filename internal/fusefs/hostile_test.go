package fusefs_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// The hostile callers of the check: unmapped and read-only user_reg
// and enable_addr, callers killed in the middle of an ioctl, 1000 concurrent
// opens, a trace_pipe reader that never reads, an enable word unmapped after
// registration, 64 writers at once, an enable word behind a userfaultfd
// nobody serves. Each test does the hostile act from child processes
// (testdata/hostile.c; this process serves the mount and never touches it),
// then proves that a well-behaved client is still served, within a
// deadline, and that what the hostile callers held is let go: the
// connection's open handles and requests in flight, the callers known, the
// events they registered, this process's descriptors and goroutines.

// hostileEnv is a mounted tree, the hostile program, and what the serving
// process holds when idle.
type hostileEnv struct {
	t    *testing.T
	s    *subsys.Subsystem
	cs   *callers.Callers
	tree *fusefs.Tree
	dir  string
	bin  string

	baseGoroutines, baseFDs int
}

// clientDeadline bounds the well-behaved client: a daemon that serves
// everyone else answers it in milliseconds, one that is stuck never does.
const clientDeadline = 15 * time.Second

func newHostile(t *testing.T) *hostileEnv { return newHostileWith(t, fusefs.Options{}) }

// newHostileWith is newHostile with a tree of options o (its Callers are
// the env's).
func newHostileWith(t *testing.T, o fusefs.Options) *hostileEnv {
	t.Helper()
	testutil.NeedFUSE(t, "mounting FUSE, and reading the callers' memory")
	e := &hostileEnv{t: t, bin: testutil.BuildC(t, "", filepath.Join("testdata", "hostile.c"), "-Wall", "-O2", "-pthread")}
	e.s = subsys.New(subsys.Options{NumCPU: 2})
	e.cs = callers.New(e.s)
	_ = e.cs.Follow() // without it callers are noticed lazily; both must hold
	e.dir = filepath.Join(t.TempDir(), "tracing")
	if err := os.Mkdir(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o.Callers = e.cs
	var err error
	e.tree, err = fusefs.Mount(e.dir, e.s, o)
	if err != nil {
		e.cs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Tree.Close aborts the connection before it detaches the mount.
		if err := e.tree.Close(); err != nil {
			t.Errorf("Tree.Close: %v", err)
		}
		e.cs.Close()
	})
	// A first client, so that what serving keeps for good (pools, the
	// runtime's threads and poller) is in the baseline.
	e.client("hostile_warmup")
	e.settle(func() bool { return true })
	e.baseGoroutines, e.baseFDs = runtime.NumGoroutine(), fdCount(t)
	return e
}

// cmd is the hostile program with args, under ctx.
func (e *hostileEnv) cmd(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, e.bin, args...)
	c.WaitDelay = 5 * time.Second
	c.Stderr = &testutil.Buffer{}
	return c
}

// run runs the hostile program to its end, within d, and returns its
// output.
func (e *hostileEnv) run(d time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	c := e.cmd(ctx, args...)
	out, err := c.Output()
	if ctx.Err() != nil {
		err = fmt.Errorf("not done within %v: %w", d, ctx.Err())
	}
	if err != nil {
		err = fmt.Errorf("hostile %s: %w\n%s%s", strings.Join(args, " "), err, out, c.Stderr)
	}
	return string(out), err
}

// client proves the tree serves a well-behaved caller: it registers name,
// writes a record, reads user_events_status and unregisters.
func (e *hostileEnv) client(name string) {
	e.t.Helper()
	out, err := e.run(clientDeadline, "client", e.dir, name)
	if err != nil || out != "ok\n" {
		e.t.Fatalf("the well-behaved client was not served: %q, %v", out, err)
	}
}

// sh runs a shell script with $T the tree, within a deadline.
func (e *hostileEnv) sh(script string) string {
	e.t.Helper()
	return sh(e.t, e.dir, script)
}

// started is a hostile program running in the background, whose stdout
// lines are read as they come.
type started struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	lines  chan string
	stdin  io.WriteCloser
	done   chan error
}

func (e *hostileEnv) start(args ...string) *started {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c := e.cmd(ctx, args...)
	stdin, err := c.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		cancel()
		e.t.Fatal(err)
	}
	p := &started{cmd: c, cancel: cancel, lines: make(chan string, 16), stdin: stdin, done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.done <- c.Wait()
	}()
	e.t.Cleanup(func() { p.kill() })
	return p
}

// expect waits for the next line of p's output to be want.
func (p *started) expect(t *testing.T, want string) {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok || l != want {
			t.Fatalf("%s: said %q (ended: %v), want %q; stderr:\n%s", p.cmd.Args, l, !ok, want, p.cmd.Stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: did not say %q within a minute", p.cmd.Args, want)
	}
}

// kill SIGKILLs p and waits for it.
func (p *started) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
	p.wait()
}

// wait waits for p's end (the context's deadline bounds it).
func (p *started) wait() error {
	if p.done == nil {
		return nil
	}
	for range p.lines {
	}
	err := <-p.done
	p.done = nil
	p.cancel()
	return err
}

// settle waits until everything the hostile callers held is let go, and
// also until more holds: every handle released, no request in flight, no
// caller known, and no more goroutines and descriptors than when idle.
func (e *hostileEnv) settle(more func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := fusefs.ConnStats(e.tree)
		cst := e.cs.Stats()
		g, fds := runtime.NumGoroutine(), fdCount(e.t)
		ok := st.Handles == 0 && st.InFlight == 0 && cst.Processes == 0 && more()
		if e.baseFDs != 0 {
			ok = ok && g <= e.baseGoroutines && fds <= e.baseFDs
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			e.t.Fatalf("not released within 30s: %d handles, %d requests in flight, %d callers, %d goroutines (idle: %d), %d descriptors (idle: %d), condition %v\n%s",
				st.Handles, st.InFlight, cst.Processes, g, e.baseGoroutines, fds, e.baseFDs, more(), b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone is a settle condition: no event of these names exists (each
// registration's reference was dropped, and the event with its last one).
func (e *hostileEnv) gone(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if e.s.Lookup("user_events", n) != nil {
				return false
			}
		}
		return true
	}
}

func fdCount(t *testing.T) int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}

// goldenRows reads the rows of the kernel's answers (kernel/datacalls,
// recorded on Linux 6.12) as "rc ERRNO" by label.
func goldenRows(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "kernel", "datacalls", "testdata", "kernel.golden"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.Lines(string(b)) {
		label, rest, ok := strings.Cut(strings.TrimSpace(line), ": ")
		f := strings.Fields(rest)
		if ok && len(f) >= 2 {
			rows[label] = f[0] + " " + f[1]
		}
	}
	return rows
}

// (1) Unmapped and read-only user_reg, enable_addr and name: the kernel's
// errnos, and nothing held afterwards.
func TestHostileFaults(t *testing.T) {
	e := newHostile(t)
	golden := goldenRows(t)
	before := e.cs.Stats().WriteIndexFaults
	out, err := e.run(time.Minute, "faults", e.dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(out) {
		label, got, _ := strings.Cut(strings.TrimSpace(line), ": ")
		want, ok := golden[label]
		if !ok {
			t.Errorf("%s: not a row of kernel.golden", label)
			continue
		}
		n++
		if got != want {
			t.Errorf("%s: %s, the kernel: %s", label, got, want)
		}
	}
	if n != 10 {
		t.Errorf("%d rows, want 10:\n%s", n, out)
	}
	if got := e.cs.Stats().WriteIndexFaults - before; got != 1 {
		t.Errorf("WriteIndexFaults went up by %d, want 1 (the read-only user_reg)", got)
	}
	e.client("hostile_after_faults")
	e.settle(e.gone("hostile_faults"))
}

// (2) Callers SIGKILLed while their threads are in DIAG_IOCSREG,
// DIAG_IOCSUNREG, write, open or close: no request stays in flight, nothing
// they held stays held.
func TestHostileKilledMidCall(t *testing.T) {
	e := newHostile(t)
	const rounds, spinners = 20, 3
	busy := 0
	for r := range rounds {
		var ps []*started
		for i := range spinners {
			ps = append(ps, e.start("spin", e.dir, fmt.Sprintf("hostile_spin%d", i), "4"))
		}
		for _, p := range ps {
			p.expect(t, "go")
		}
		// Not a wait for anything: the kills land at varied points of
		// the callers' loops.
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		if fusefs.ConnStats(e.tree).InFlight > 0 {
			busy++
		}
		for _, p := range ps {
			p.cmd.Process.Kill()
		}
		for _, p := range ps {
			p.wait()
		}
		if r%5 == 4 {
			e.client(fmt.Sprintf("hostile_between%d", r))
		}
	}
	t.Logf("%d of %d rounds killed callers with requests in flight", busy, rounds)
	e.client("hostile_after_kills")
	e.settle(e.gone("hostile_spin0", "hostile_spin1", "hostile_spin2"))
}

// (3) 1000 concurrent opens of user_events_data and 1000 of
// user_events_status from one process, a registration on every data file,
// then every close.
func TestHostileOpens(t *testing.T) {
	e := newHostile(t)
	out, err := e.run(2*time.Minute, "opens", e.dir, "1000")
	if err != nil || out != "opened 1000 1000\nclosed\n" {
		t.Fatalf("%q, %v", out, err)
	}
	e.client("hostile_after_opens")
	e.settle(e.gone("hostile_opens"))
}

// (4) A trace_pipe reader that never reads, then one stopped (SIGSTOP) in
// the middle of reading: writers never block, trace and status are read, a
// second trace_pipe open is EBUSY as the kernel's, and once the reader is
// gone the pipe opens again.
func TestHostileTracePipe(t *testing.T) {
	e := newHostile(t)
	pipe := filepath.Join(e.dir, "trace_pipe")
	e.sh(`cd $T && echo 'u:hostile_tp u32 n' >> dynamic_events && echo 1 > events/user_events/hostile_tp/enable`)
	tryOpen := func() string {
		t.Helper()
		out, err := e.run(clientDeadline, "tryopen", pipe)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	freeAgain := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for tryOpen() != "ok" {
			if time.Now().After(deadline) {
				t.Fatal("trace_pipe still busy 30s after its reader died")
			}
		}
	}
	writeAll := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := range 4 {
			wg.Go(func() {
				out, err := e.run(time.Minute, "writer", e.dir, "hostile_tp", "5000")
				if err == nil && out != "wrote 5000\n" {
					err = fmt.Errorf("writer %d: %q", i, out)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a writer blocked or failed with trace_pipe held: %v", err)
			}
		}
	}

	// Opened, never read.
	hold := e.start("hold", pipe)
	hold.expect(t, "open")
	if got := tryOpen(); got != "EBUSY" {
		t.Errorf("second trace_pipe open: %s, want EBUSY", got)
	}
	writeAll()
	if got := e.sh(`grep -c 'hostile_tp: n=' $T/trace || true`); got == "0\n" {
		t.Error("trace has none of the records")
	}
	e.client("hostile_while_held")
	hold.kill()
	freeAgain()

	// Reading, then stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cat := exec.CommandContext(ctx, "cat", pipe)
	cat.WaitDelay = 5 * time.Second
	out, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	catDone := make(chan error, 1)
	br := bufio.NewReader(out)
	go func() {
		// Read its first line only, then let its stdout fill up.
		if _, err := e.run(time.Minute, "writer", e.dir, "hostile_tp", "1"); err != nil {
			catDone <- err
			return
		}
		catDone <- nil
	}()
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "hostile_tp: n=") {
		t.Fatalf("cat trace_pipe: %q, %v", line, err)
	}
	if err := <-catDone; err != nil {
		t.Fatal(err)
	}
	if err := cat.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	writeAll()
	if got := tryOpen(); got != "EBUSY" {
		t.Errorf("trace_pipe open while its reader is stopped: %s, want EBUSY", got)
	}
	e.client("hostile_while_stopped")
	cat.Process.Kill()
	cat.Wait()
	freeAgain()
	e.sh(`echo 0 > $T/events/user_events/hostile_tp/enable && echo '!u:hostile_tp u32 n' >> $T/dynamic_events`)
	e.settle(e.gone("hostile_tp"))
}

// (5) An enable word whose page the caller unmapped after registering:
// each change of the event fails to reach it and is counted; nothing waits
// for it, and the caller's exit releases its enabler.
func TestHostileUnmappedEnable(t *testing.T) {
	e := newHostile(t)
	p := e.start("munmap", e.dir, "hostile_unmap")
	p.expect(t, "ready")
	before := e.s.Stats().EnableWriteFailures
	for range 3 {
		e.sh(`cd $T/events/user_events/hostile_unmap && echo 1 > enable && echo 0 > enable`)
	}
	if got := e.s.Stats().EnableWriteFailures - before; got != 6 {
		t.Errorf("EnableWriteFailures went up by %d for 6 changes, want 6", got)
	}
	e.client("hostile_while_unmapped")
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatalf("hostile munmap: %v\n%s", err, p.cmd.Stderr)
	}
	e.settle(e.gone("hostile_unmap"))
}

// (6) 64 processes writing at once, with the event enabled: every write
// served, every record in the buffer.
func TestHostileStorm(t *testing.T) {
	e := newHostile(t)
	const procs, each = 64, 500
	e.sh(`cd $T && echo 'u:hostile_storm u32 n' >> dynamic_events && echo 1 > events/user_events/hostile_storm/enable`)
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for range procs {
		wg.Go(func() {
			out, err := e.run(2*time.Minute, "writer", e.dir, "hostile_storm", fmt.Sprint(each))
			if err == nil && out != fmt.Sprintf("wrote %d\n", each) {
				err = fmt.Errorf("%q", out)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ev := e.s.Lookup("user_events", "hostile_storm")
	if ev == nil {
		t.Fatal("the event is gone")
	}
	if w, _ := ev.Counts(); w != procs*each {
		t.Errorf("%d records written, want %d", w, procs*each)
	}
	e.client("hostile_after_storm")
	e.sh(`echo 0 > $T/events/user_events/hostile_storm/enable && echo '!u:hostile_storm u32 n' >> $T/dynamic_events`)
	e.settle(e.gone("hostile_storm"))
}

// (7) An enable word in a page whose faults nobody serves (userfaultfd,
// registered after the registration): changing the event reads and writes
// that word through process_vm_readv/writev, which wait for the fault to be
// served. That must stall neither the daemon nor anyone else's calls.
//
// It did, until procmem gave up an access after procmem.StallLimit: the
// thread enabling the event waited in the fault holding subsys's lock, and
// every other caller waited for the lock.
//
// A SIGKILLed caller whose request the daemon already read waits,
// unkillable, for its answer (FUSE's request_wait_answer): so when the
// daemon is stuck, the test ends the hang itself by killing the hostile
// process, whose exit releases its userfaultfd and with it the fault.
func TestHostileUserfaultfd(t *testing.T) {
	e := newHostile(t)
	p := e.start("uffd", e.dir, "hostile_uffd")
	select {
	case l := <-p.lines:
		if strings.HasPrefix(l, "no userfaultfd") {
			t.Skip(l)
		}
		if l != "ready" {
			t.Fatalf("hostile uffd: %q\n%s", l, p.cmd.Stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("hostile uffd: not ready within a minute")
	}
	shell := func(script string) chan string {
		done := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			c := exec.CommandContext(ctx, "sh", "-c", script)
			c.Env = append(os.Environ(), "T="+e.dir)
			c.WaitDelay = 5 * time.Second
			out, err := c.CombinedOutput()
			done <- fmt.Sprintf("%q %v", out, err)
		}()
		return done
	}
	// Enabling writes the bit into the page nobody serves.
	toggled := shell(`echo 1 > $T/events/user_events/hostile_uffd/enable`)
	// The client comes once the enabling is done, or this process waits
	// in the fault (a thread of it in handle_userfault).
	var got string
	inFault := false
	for deadline := time.Now().Add(time.Minute); !inFault && got == ""; {
		select {
		case got = <-toggled:
		case <-time.After(10 * time.Millisecond):
			inFault = waitsInUserfault(t)
		}
		if time.Now().After(deadline) {
			t.Fatal("enabling the event neither returned nor waited in the fault within a minute")
		}
	}
	t.Logf("enabling the event waits in the fault: %v", inFault)
	served := make(chan error, 1)
	go func() {
		// Not e.run: its deadline's SIGKILL cannot end a caller whose
		// request the daemon holds, and its Wait would wait for ever.
		c := e.cmd(context.Background(), "client", e.dir, "hostile_beside_uffd")
		out, err := c.Output()
		if err == nil && string(out) != "ok\n" {
			err = fmt.Errorf("%q", out)
		}
		served <- err
	}()
	var err error
	hung := false
	select {
	case err = <-served:
	case <-time.After(clientDeadline):
		hung = true
	}
	// The hostile's exit releases its userfaultfd and with it every access
	// waiting for the page.
	p.cmd.Process.Kill()
	recovered := time.After(2 * time.Minute)
	if hung {
		select {
		case err = <-served:
		case <-recovered:
			t.Fatal("the daemon did not recover within 2 minutes of the hostile's death")
		}
	}
	if got == "" {
		select {
		case got = <-toggled:
		case <-recovered:
			t.Fatal("enabling the event did not return within 2 minutes of the hostile's death")
		}
	}
	p.wait()
	t.Logf("enabling the event: %s; enable-bit write failures: %d", got, e.s.Stats().EnableWriteFailures)
	if got != `"" <nil>` {
		t.Errorf("enabling the event: %s, want success (the failed bit write is counted, not returned)", got)
	}
	if e.s.Stats().EnableWriteFailures == 0 {
		t.Error("the enable-bit write into the unserved page was not counted as failed")
	}
	if hung {
		t.Errorf("while an enable word's page fault went unanswered, another client was not served within %v (it was once the hostile died: %v)", clientDeadline, err)
	} else if err != nil {
		t.Errorf("the client beside the hostile: %v", err)
	}
	e.client("hostile_after_uffd")
	<-shell(`echo 0 > $T/events/user_events/hostile_uffd/enable`)
	e.settle(e.gone("hostile_uffd"))
}

// (2b) A caller killed while the daemon reads the name its struct user_reg
// points to from a page whose fault nobody serves. The kill cannot end the caller at once:
// FUSE makes a caller whose request the daemon read wait, unkillable, for
// the answer, and its userfaultfd — which would serve the fault by going
// away — is only released when it has exited. Daemon and caller waited
// for each other for ever until procmem gave up its access after
// procmem.StallLimit; now the caller dies within it and nothing is held.
func TestHostileKilledInFault(t *testing.T) {
	e := newHostile(t)
	p := e.start("uffdreg", e.dir)
	select {
	case l := <-p.lines:
		if strings.HasPrefix(l, "no userfaultfd") {
			t.Skip(l)
		}
		if l != "calling" {
			t.Fatalf("hostile uffdreg: %q\n%s", l, p.cmd.Stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("hostile uffdreg: not calling within a minute")
	}
	inFault := false
	for deadline := time.Now().Add(time.Minute); !inFault && time.Now().Before(deadline); {
		select {
		case l := <-p.lines:
			t.Logf("the ioctl returned before the kill: %q", l)
			deadline = time.Time{}
		case <-time.After(time.Millisecond):
			inFault = waitsInUserfault(t)
		}
	}
	t.Logf("the daemon waits in the caller's fault: %v", inFault)
	p.cmd.Process.Kill()
	exited := make(chan struct{})
	go func() { p.wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("the killed caller did not exit within 2 minutes: it and the daemon wait for each other")
	}
	e.client("hostile_after_fault_kill")
	e.settle(func() bool { return !waitsInUserfault(t) })
}

// waitsInUserfault reports whether a thread of this process waits for a
// userfaultfd page fault.
func waitsInUserfault(t *testing.T) bool {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/wchan")
		if err == nil && string(b) == "handle_userfault" {
			return true
		}
	}
	return false
}
