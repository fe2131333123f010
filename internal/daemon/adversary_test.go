package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

// The access model and the limits (issue 19.2 and 19.3), tried by hostile
// clients: raw protocol connections, and child processes running as other
// users (nobody, 65534, and 65533) against a daemon run as root. Each test
// fails on the daemon before them, which let every client control
// everything and bounded only the connections of all users together.

const (
	nobodyUID = 65534
	otherUID  = 65533
)

// childDir is a directory other users can reach, holding a copy of this
// test binary for children that run as them; the socket goes there too.
func childDir(t *testing.T) (dir, exe string) {
	t.Helper()
	testutil.NeedRoot(t, "running clients as other users")
	dir, err := os.MkdirTemp("", "uetrace-adversary")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, "child.test")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, exe
}

// childCmd runs this test binary's test run as uid (and gid), as child
// mode, against the daemon at sock.
func childCmd(ctx context.Context, exe, run, mode, sock string, uid uint32) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, "-test.run=^"+run+"$", "-test.v")
	cmd.Env = append(os.Environ(), "UETRACE_TEST_CHILD="+mode, "UETRACE_TEST_SOCK="+sock)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// startChild starts a child whose stdin and stdout are pipes to the test;
// at the test's end its stdin is closed, and it is killed and waited for.
func startChild(t *testing.T, cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait() // an error if the test waited already
	})
	return stdin, stdout
}

// runChild runs a child to its end and returns its output.
func runChild(t *testing.T, exe, run, mode, sock string, uid uint32) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := childCmd(ctx, exe, run, mode, sock, uid).CombinedOutput()
	if err != nil {
		t.Fatalf("child %s as uid %d: %v\n%s", mode, uid, err, out)
	}
	return string(out)
}

// errnoName is an error's errno by name ("EACCES"), "ok" for none.
func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// wantLines checks that out has each line.
func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l+"\n") {
			t.Errorf("child's output lacks %q:\n%s", l, out)
		}
	}
}

// TestIdleConnectionsOfOneUser: one unprivileged user opens 2100 idle
// connections — 100 that never say Hello, 2000 that do and then send
// nothing — against a daemon serving at most 2048. Its own beyond
// Limits.ConnsPerUID are refused EMFILE, and another user's status, and
// root's, are served. (Before per-uid limits, the one user took every
// connection and everyone else was refused.)
func TestIdleConnectionsOfOneUser(t *testing.T) {
	switch os.Getenv("UETRACE_TEST_CHILD") {
	case "idle":
		idleChild()
		return
	case "status":
		statusChild()
		return
	}
	dir, exe := childDir(t)
	s := serveIn(t, Config{MaxConns: 2048, Limits: Limits{Handshake: -1}}, dir)
	os.Chmod(s.sock, 0o666)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	idle := childCmd(ctx, exe, "TestIdleConnectionsOfOneUser", "idle", s.sock, nobodyUID)
	stdin, stdout := startChild(t, idle)
	var report string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "idle:") {
			report = sc.Text()
			break
		}
	}
	if report == "" {
		t.Fatal("the idle child reported nothing")
	}
	t.Log(report)
	want := fmt.Sprintf("idle: raw 100 ok %d EMFILE %d other 0", DefaultConnsPerUID-100, 2000-(DefaultConnsPerUID-100))
	if !strings.HasPrefix(report, want) {
		t.Errorf("the idle child got %q, want %q", report, want)
	}
	st := s.Stats()
	if got := st.ByUID[nobodyUID].Conns; got != DefaultConnsPerUID {
		t.Errorf("nobody holds %d connections, want %d", got, DefaultConnsPerUID)
	}
	if st.RefusedUID != int64(2000-(DefaultConnsPerUID-100)) || st.Handshakes < 100 {
		t.Errorf("stats: %+v", st)
	}

	// Another user, and root, are served.
	out := runChild(t, exe, "TestIdleConnectionsOfOneUser", "status", s.sock, otherUID)
	wantLines(t, out, "status: ok", "stats: ok")
	if !strings.Contains(out, fmt.Sprintf("uid %d connections", otherUID)) || strings.Contains(out, fmt.Sprintf("uid %d connections", nobodyUID)) {
		t.Errorf("a user who is not a tracer sees other uids' use, or not its own:\n%s", out)
	}
	healthy(t, s)
	stdin.Close()
	if err := idle.Wait(); err != nil {
		t.Errorf("idle child: %v", err)
	}
	waitConns(t, s, 1) // healthy's client remains
	if st := s.Stats(); len(st.ByUID) != 1 || st.Handshakes != 0 {
		t.Errorf("after the idle client left: %+v", st)
	}
}

// idleChild opens 100 connections without a Hello and dials 2000 more,
// reports how they went, and holds them until its stdin closes.
func idleChild() {
	sock := os.Getenv("UETRACE_TEST_SOCK")
	var raws []int
	for range 100 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
		}
		if err != nil {
			fmt.Printf("idle: raw connection: %v\n", err)
			return
		}
		raws = append(raws, fd)
	}
	var clients []*client.Conn
	counts := map[string]int{}
	var first string
	for range 2000 {
		c, err := client.Dial(sock, nil)
		if err == nil {
			clients = append(clients, c)
			counts["ok"]++
			continue
		}
		if errors.Is(err, unix.EMFILE) {
			counts["EMFILE"]++
			if first == "" {
				first = err.Error()
			}
			continue
		}
		counts["other"]++
		fmt.Fprintf(os.Stderr, "dial: %v\n", err)
	}
	fmt.Printf("idle: raw %d ok %d EMFILE %d other %d (%s)\n", len(raws), counts["ok"], counts["EMFILE"], counts["other"], first)
	io.Copy(io.Discard, os.Stdin)
	for _, c := range clients {
		c.Close()
	}
}

// statusChild is another user looking at the daemon.
func statusChild() {
	c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), nil)
	if err != nil {
		fmt.Printf("status: %v\n", err)
		return
	}
	defer c.Close()
	f, err := c.Open("user_events_status", os.O_RDONLY)
	if err == nil {
		_, err = io.ReadAll(f)
		f.Close()
	}
	fmt.Printf("status: %s\n", errnoName(err))
	st, err := c.Stats()
	fmt.Printf("stats: %s\n%s", errnoName(err), st)
}

// TestHandshakeTimeout: a connection that sends no Hello is closed after
// Limits.Handshake, and counted; one that said Hello is not.
func TestHandshakeTimeout(t *testing.T) {
	s := serve(t, Config{Limits: Limits{Handshake: 50 * time.Millisecond}})
	shook := rawConn(t, s.sock)
	if r := exchange(t, shook, helloMsg(0, 0)); len(r) == 0 || wire.LE.Uint16(r) != wire.OpHelloOK {
		t.Fatalf("hello: %x", r)
	}
	silent := rawConn(t, s.sock)
	// SO_RCVTIMEO is 5 s: well past the handshake's limit, and a bound.
	deadline := time.Now().Add(waitLimit)
	for !hungUp(silent) {
		if time.Now().After(deadline) {
			t.Fatal("a connection that never said Hello is still open")
		}
	}
	if st := s.Stats(); st.Timeouts != 1 {
		t.Errorf("handshake timeouts counted: %d, want 1", st.Timeouts)
	}
	// The one that shook hands before the silent one connected is served.
	reply := exchange(t, shook, append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...))
	wantErrno(t, "delete after the other's timeout", reply, unix.ENOENT)
	if !strings.Contains(s.log.String(), "no Hello in time") {
		t.Errorf("the timeout is not logged:\n%s", s.log.String())
	}
}

// TestUnprivilegedClient: a user who is not a tracer produces — registers,
// writes, unregisters — and reads the events' metadata, but every tracefs
// open for writing and of trace and trace_pipe is EACCES, a session is
// EPERM, as tracefs's root-only files and perf_event_paranoid give it on
// Linux; its registrations are bounded. (The daemon let it do all.)
func TestUnprivilegedClient(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "unpriv" {
		unprivilegedChild(t)
		return
	}
	dir, exe := childDir(t)
	s := serveIn(t, Config{Limits: Limits{RegistrationsPerConn: 3, RegistrationsPerUID: 5}}, dir)
	os.Chmod(s.sock, 0o666)
	admin := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	if err := writeFile(admin, "dynamic_events", "u:adv_ev u32 a"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(admin, "events/user_events/adv_ev/enable", "1"); err != nil {
		t.Fatal(err)
	}
	out := runChild(t, exe, "TestUnprivilegedClient", "unpriv", s.sock, nobodyUID)
	wantLines(t, out,
		"tracer: false", "register: ok", "write: ok", "unregister: ok",
		"read user_events_status: ok", "read events/user_events/adv_ev/format: ok", "readdir: ok",
		"write events/user_events/adv_ev/enable: EACCES", "write events/enable: EACCES",
		"write tracing_on: EACCES", "write buffer_size_kb: EACCES", "write set_event: EACCES",
		"write dynamic_events: EACCES", "truncate trace: EACCES",
		"read trace: EACCES", "read trace_pipe: EACCES",
		"session: EPERM", "stats: ok",
		"register 2: ok", "register 3: ok", "register 4: ENOMEM", "register after unregister: ok",
		"second connection register 5: ok", "second connection register 6: ok", "second connection register 7: ENOMEM",
	)
	if !strings.Contains(out, "--max-registrations-per-uid") {
		t.Errorf("the uid's registration limit is not named:\n%s", out)
	}
	if !strings.Contains(out, "--tracers") {
		t.Errorf("the refusals do not name the option that grants them:\n%s", out)
	}
	if trace := readFile(t, admin, "trace"); !strings.Contains(trace, "adv_ev: a=0x2a (42)") {
		t.Errorf("the unprivileged producer's record is not in trace:\n%s", trace)
	}
	if got := readFile(t, admin, "events/user_events/adv_ev/enable"); got != "1\n" {
		t.Errorf("adv_ev's enable is %q after the child", got)
	}
	if st := s.Stats(); st.Denied < 10 || st.OverLimit < 1 {
		t.Errorf("refusals not counted: %+v", st)
	}
}

func unprivilegedChild(t *testing.T) {
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("tracer: %v\n", c.Tracer())
	idx, _, err := c.Register(reg(a.addr(0), 0), "adv_ev u32 a", false)
	fmt.Printf("register: %s\n", errnoName(err))
	var rec [8]byte
	wire.LE.PutUint32(rec[:], idx)
	wire.LE.PutUint32(rec[4:], 42)
	_, err = c.Writev(1, 0, rec[:])
	fmt.Printf("write: %s\n", errnoName(err))
	for _, name := range []string{"user_events_status", "events/user_events/adv_ev/format"} {
		f, err := c.Open(name, os.O_RDONLY)
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		fmt.Printf("read %s: %s\n", name, errnoName(err))
	}
	_, err = c.ReadDir("events/user_events")
	fmt.Printf("readdir: %s\n", errnoName(err))
	for _, name := range []string{"events/user_events/adv_ev/enable", "events/enable", "tracing_on", "buffer_size_kb", "set_event", "dynamic_events"} {
		f, err := c.Open(name, os.O_WRONLY)
		if err == nil {
			f.Close()
		} else {
			fmt.Fprintf(os.Stderr, "%v\n", err)
		}
		fmt.Printf("write %s: %s\n", name, errnoName(err))
	}
	_, err = c.Open("trace", os.O_WRONLY|os.O_TRUNC)
	fmt.Printf("truncate trace: %s\n", errnoName(err))
	for _, name := range []string{"trace", "trace_pipe"} {
		_, err := c.Open(name, os.O_RDONLY)
		fmt.Printf("read %s: %s\n", name, errnoName(err))
	}
	_, err = c.NewSession(client.SessionOptions{})
	fmt.Printf("session: %s\n", errnoName(err))
	if err != nil {
		fmt.Printf("%v\n", err)
	}
	_, err = c.Stats()
	fmt.Printf("stats: %s\n", errnoName(err))
	for i := 2; i <= 4; i++ {
		_, _, err := c.Register(reg(a.addr(8*i), 0), fmt.Sprintf("adv_ev%d u32 a", i), false)
		fmt.Printf("register %d: %s\n", i, errnoName(err))
	}
	un := make([]byte, 16)
	wire.LE.PutUint32(un, 16)
	wire.LE.PutUint64(un[8:], a.addr(0))
	fmt.Printf("unregister: %s\n", errnoName(c.Unregister(un)))
	_, _, err = c.Register(reg(a.addr(0), 0), "adv_ev u32 a", false)
	fmt.Printf("register after unregister: %s\n", errnoName(err))
	// A second connection: the uid's limit counts both.
	c2, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for i := 5; i <= 7; i++ {
		_, _, err := c2.Register(reg(a.addr(8*i), 0), "adv_ev u32 a", false)
		fmt.Printf("second connection register %d: %s\n", i, errnoName(err))
		if err != nil {
			fmt.Printf("%v\n", err)
		}
	}
}

// TestListedTracer: a user `serve --tracers` names (here by its group)
// controls tracing and reads, held to the limits of a user without
// CAP_PERFMON: buffer_size_kb up to Limits.BufferKB (ENOMEM beyond), and
// sessions up to Limits.SessionsPerUID (EMFILE) and SessionKBPerUID
// (EPERM), given back when they close. (The daemon let anyone set any
// size and hold any number of sessions.)
func TestListedTracer(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "tracer" {
		tracerChild(t)
		return
	}
	dir, exe := childDir(t)
	s := serveIn(t, Config{
		Tracers: Tracers{GIDs: []uint32{nobodyUID}},
		Limits:  Limits{BufferKB: 2048, SessionsPerUID: 3, SessionKBPerUID: 6144},
	}, dir)
	os.Chmod(s.sock, 0o666)
	admin := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	if err := writeFile(admin, "dynamic_events", "u:adv_ev u32 a"); err != nil {
		t.Fatal(err)
	}
	out := runChild(t, exe, "TestListedTracer", "tracer", s.sock, nobodyUID)
	wantLines(t, out,
		"tracer: true", "enable: ok", "read trace: ok", "buffer_size_kb 4096: ENOMEM", "buffer_size_kb 2048: ok",
		"per_cpu/cpu0/buffer_size_kb 4096: ENOMEM", "session 2M: ok", "session 2M more: EPERM", "session 1M: ok", "session 1M more: EPERM",
		"session after close: ok", "session 4K: ok", "session 4K more: EMFILE",
		"stats: ok",
	)
	if got := readFile(t, admin, "events/user_events/adv_ev/enable"); got != "1\n" {
		t.Errorf("the tracer's enable did not take: %q", got)
	}
	if got := s.bufferKB(); got < 2048 || got >= 4096 {
		t.Errorf("buffer_size_kb is %d, want the tracer's 2048", got)
	}
	// Root is held to none of the per-user limits.
	if err := writeFile(admin, "buffer_size_kb", "8192"); err != nil {
		t.Errorf("root's buffer_size_kb 8192: %v", err)
	}
	waitConns(t, s, 1)
	if st := s.Stats(); st.Sessions != 0 || st.SessionKB != 0 {
		t.Errorf("the tracer's sessions are still counted after it left: %+v", st)
	}
}

func tracerChild(t *testing.T) {
	c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), nil)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("tracer: %v\n", c.Tracer())
	fmt.Printf("enable: %s\n", errnoName(writeFile(c, "events/user_events/adv_ev/enable", "1")))
	f, err := c.Open("trace", os.O_RDONLY)
	if err == nil {
		_, err = io.ReadAll(f)
		f.Close()
	}
	fmt.Printf("read trace: %s\n", errnoName(err))
	for _, size := range []struct{ file, kb string }{
		{"buffer_size_kb", "4096"}, {"buffer_size_kb", "2048"}, {"per_cpu/cpu0/buffer_size_kb", "4096"},
	} {
		err := writeFile(c, size.file, size.kb)
		fmt.Printf("%s %s: %s\n", size.file, size.kb, errnoName(err))
		if err != nil {
			fmt.Printf("%v\n", err)
		}
	}
	session := func(what string, bytes int) *client.Session {
		ss, err := c.NewSession(client.SessionOptions{BufferBytes: bytes})
		fmt.Printf("session %s: %s\n", what, errnoName(err))
		if err != nil {
			fmt.Printf("%v\n", err)
		}
		return ss
	}
	first := session("2M", 2<<20)
	session("2M more", 2<<20)
	session("1M", 1<<20)
	session("1M more", 1<<20)
	first.Close()
	session("after close", 1<<20)
	session("4K", 4096)
	session("4K more", 4096)
	st, err := c.Stats()
	fmt.Printf("stats: %s\n%s", errnoName(err), st)
}

// TestBufferSizeMemoryReturned: the trace buffer made large and then small
// again gives its memory back to the system at once. (The daemon kept it:
// 199 MB grew to 564 MB and stayed.)
func TestBufferSizeMemoryReturned(t *testing.T) {
	s := serve(t, Config{})
	c := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	runtime.GC()
	base := heap()
	if err := writeFile(c, "buffer_size_kb", "131072"); err != nil {
		t.Fatal(err)
	}
	if grown := heap(); grown < base+100<<20 {
		t.Skipf("a 128 MiB buffer took %d MiB of heap: nothing to give back", (grown-base)>>20)
	}
	if err := writeFile(c, "buffer_size_kb", "1408"); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > base+32<<20 {
		t.Errorf("after buffer_size_kb 131072 and back to 1408 the heap holds %d MiB, %d MiB more than before", ms.HeapInuse>>20, (ms.HeapInuse-base)>>20)
	}
	if ms.HeapReleased < 100<<20 {
		t.Errorf("only %d MiB of the heap went back to the system", ms.HeapReleased>>20)
	}
}

// TestHandlesPerConnection: a connection holds at most Limits.Handles
// files and sessions (EMFILE beyond, root too, as RLIMIT_NOFILE), and one
// closed makes room.
func TestHandlesPerConnection(t *testing.T) {
	s := serve(t, Config{Cred: privileged, Limits: Limits{Handles: 8}})
	c := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	var files []*client.File
	for range 7 {
		f, err := c.Open("user_events_status", os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	ss, err := c.NewSession(client.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open("README", os.O_RDONLY); !errors.Is(err, unix.EMFILE) || !strings.Contains(err.Error(), "--max-handles") {
		t.Errorf("the 9th open: %v, want EMFILE naming --max-handles", err)
	}
	if _, err := c.NewSession(client.SessionOptions{}); !errors.Is(err, unix.EMFILE) {
		t.Errorf("the 9th handle a session: %v, want EMFILE", err)
	}
	if st := s.Stats(); st.Handles != 8 || st.Sessions != 1 || st.OverLimit != 2 {
		t.Errorf("stats: %+v", st)
	}
	files[0].Close()
	if _, err := c.Open("README", os.O_RDONLY); err != nil {
		t.Errorf("open after a close: %v", err)
	}
	ss.Close()
	if st := s.Stats(); st.Sessions != 0 {
		t.Errorf("a closed session still counted: %+v", st)
	}
	// Another connection is not held by this one's handles.
	if _, err := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock).Open("README", os.O_RDONLY); err != nil {
		t.Errorf("another connection's open: %v", err)
	}
}

// TestConnectionsOfEveryone: beyond Config.MaxConns a connection is told
// ENFILE, and counted; one that leaves makes room.
func TestConnectionsOfEveryone(t *testing.T) {
	s := serve(t, Config{MaxConns: 2})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	first := a.dial(t, s.sock)
	a.dial(t, s.sock)
	if _, err := client.Dial(s.sock, nil); !errors.Is(err, unix.ENFILE) || !strings.Contains(err.Error(), "--max-conns") {
		t.Errorf("a third connection: %v, want ENFILE naming --max-conns", err)
	}
	if st := s.Stats(); st.RefusedAll != 1 {
		t.Errorf("refusals counted: %+v", st)
	}
	first.Close()
	waitConns(t, s, 1)
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatalf("after one left: %v", err)
	}
	c.Close()
}

// TestPendingMessages: a request pipelined behind a blocking read is the
// one message the daemon holds for a connection, counted while it waits
// and released with the connection; the rest wait in the socket.
func TestPendingMessages(t *testing.T) {
	s := serve(t, Config{})
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
		t.Fatal("hello refused")
	}
	h := rawOpen(t, fd, "trace_pipe")
	rawSend(t, fd, readMsg(h)) // blocks: nothing is traced
	for range 3 {
		rawSend(t, fd, append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...))
	}
	deadline := time.Now().Add(waitLimit)
	for s.Stats().Pending != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pending messages: %+v, want 1", s.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	unix.Shutdown(fd, unix.SHUT_RDWR)
	waitConns(t, s, 0)
	if st := s.Stats(); st.Pending != 0 || st.Handles != 0 {
		t.Errorf("after the client left: %+v", st)
	}
}
