package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

type testServer struct {
	*Server
	sock string
	log  *testutil.Buffer
}

func serve(t testing.TB, cfg Config) *testServer {
	t.Helper()
	return serveIn(t, cfg, t.TempDir())
}

func serveIn(t testing.TB, cfg Config, dir string) *testServer {
	t.Helper()
	sock := filepath.Join(dir, "d.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	log := &testutil.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Subsystem == nil {
		cfg.Subsystem = subsys.New(subsys.Options{NumCPU: 1})
	}
	if cfg.Rings == 0 {
		cfg.Rings = testRings
	}
	srv := New(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{srv, sock, log}
}

// arena is a sealed memfd mapped in the test, as a client's would be.
type testArena struct {
	fd  int
	mem []byte
}

func newArena(t testing.TB, size int, seals int) *testArena {
	t.Helper()
	fd, err := unix.MemfdCreate("test-arena", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem); unix.Close(fd) })
	return &testArena{fd, mem}
}

func (a *testArena) addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&a.mem[off]))) }
func (a *testArena) word(off int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&a.mem[off])))
}
func (a *testArena) dial(t testing.TB, sock string) *client.Conn {
	t.Helper()
	c, err := client.Dial(sock, &client.Arena{FD: a.fd, Addr: a.addr(0), Size: uint64(len(a.mem))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// producer is a client of s, on an arena of its own, that registered
// command — its write index idx — with its enable bit at the arena's
// start.
func producer(t testing.TB, s *testServer, command string) (a *testArena, c *client.Conn, idx uint32) {
	t.Helper()
	a = newArena(t, 4096, unix.F_SEAL_SHRINK)
	c = a.dial(t, s.sock)
	idx, _, err := c.Register(reg(a.addr(0), 0), command, false)
	if err != nil {
		t.Fatal(err)
	}
	return a, c, idx
}

// newSession is a session with opts, of a connection of its own to s.
func newSession(t testing.TB, s *testServer, opts client.SessionOptions) *client.Session {
	t.Helper()
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ss, err := c.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func reg(addr uint64, flags uint16) []byte {
	return abi.UserReg{Size: abi.UserRegSize, EnableSize: 4, Flags: flags, EnableAddr: addr}.Bytes()
}

func readFile(t testing.TB, c *client.Conn, name string) string {
	t.Helper()
	f, err := c.Open(name, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func writeFile(c *client.Conn, name, text string) error {
	f, err := c.Open(name, os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte(text))
	return err
}

// healthy checks that a fresh client can register, enable, write and see
// its record: the daemon is still serving everyone.
func healthy(t *testing.T, s *testServer) {
	t.Helper()
	a := newArena(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	c := a.dial(t, s.sock)
	name := fmt.Sprintf("healthy_%d", time.Now().UnixNano())
	idx, _, err := c.Register(reg(a.addr(64), 0), name+" u32 v", false)
	if err != nil {
		t.Fatalf("daemon no longer healthy: register: %v", err)
	}
	if err := writeFile(c, "events/user_events/"+name+"/enable", "1"); err != nil {
		t.Fatal(err)
	}
	if a.word(64)&1 == 0 {
		t.Fatal("daemon no longer healthy: enable bit not set")
	}
	var rec [8]byte
	wire.LE.PutUint32(rec[:], idx)
	wire.LE.PutUint32(rec[4:], 77)
	if n, err := c.Writev(1, 0, rec[:]); err != nil || n != 8 {
		t.Fatalf("daemon no longer healthy: write: %d, %v", n, err)
	}
	writeFile(c, "events/user_events/"+name+"/enable", "0")
	if !strings.Contains(readFile(t, c, "trace"), name+": v=0x4d (77)") {
		t.Fatal("daemon no longer healthy: record not in trace")
	}
}

// privileged is a Cred for tests whose admin client creates persistent
// events (dynamic_events "u:" lines), whoever runs them.
func privileged(unix.Ucred) subsys.Cred { return subsys.Cred{PerfmonCapable: true} }

func TestClientCrashReleasesEverything(t *testing.T) {
	s := serve(t, Config{Cred: privileged})
	admin := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	if err := writeFile(admin, "dynamic_events", "u:crash_persist u32 a"); err != nil {
		t.Fatal(err)
	}
	a := newArena(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	// A connection of its own, which this test closes without a word.
	c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(c, &unix.SockaddrUnix{Name: s.sock}); err != nil {
		t.Fatal(err)
	}
	exchange(t, c, helloMsg(a.addr(0), 4096), a.fd)
	register := func(reg []byte, name string) error {
		msg := wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRegister, 0, 0), uint32(len(reg)))
		_, _, err := wire.ParseResult(exchange(t, c, append(append(msg, reg...), name...)))
		return err
	}
	if err := register(reg(a.addr(0), 0), "crash_mine u32 a"); err != nil {
		t.Fatal(err)
	}
	if err := register(reg(a.addr(8), 0), "crash_persist u32 a"); err != nil {
		t.Fatal(err)
	}
	writeFile(admin, "events/user_events/crash_persist/enable", "1")
	if a.word(8)&1 == 0 {
		t.Fatal("enable bit not set while connected")
	}
	writeFile(admin, "events/user_events/crash_persist/enable", "0")

	// The process dies without a word: every connection of its pid goes
	// at once, admin's too, since admin is in this same process.
	unix.Close(c)
	admin.Close()
	deadline := time.Now().Add(waitLimit)
	for s.Conns() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("connections not closed")
		}
		time.Sleep(time.Millisecond)
	}
	admin = newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	for strings.Contains(readFile(t, admin, "user_events_status"), "crash_mine") {
		if time.Now().After(deadline) {
			t.Fatal("the crashed client's event was not deleted")
		}
		time.Sleep(time.Millisecond)
	}
	writeFile(admin, "events/user_events/crash_persist/enable", "1")
	if a.word(8) != 0 {
		t.Error("the daemon still writes the enable bit of a client that is gone")
	}
	if got := readFile(t, admin, "user_events_status"); !strings.Contains(got, "crash_persist") {
		t.Errorf("the persistent event went with the client:\n%s", got)
	}
	healthy(t, s)
}

// TestKilledProcess runs a real client process and kills it.
func TestKilledProcess(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "register" {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Register(reg(a.addr(0), 0), "killed_child u64 x", false); err != nil {
			t.Fatal(err)
		}
		fmt.Println("registered")
		time.Sleep(time.Minute)
		return
	}
	s := serve(t, Config{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "UETRACE_TEST_CHILD=register", "UETRACE_TEST_SOCK="+s.sock)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	admin := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(readFile(t, admin, "user_events_status"), "killed_child") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("child never registered:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline = time.Now().Add(waitLimit)
	for strings.Contains(readFile(t, admin, "user_events_status"), "killed_child") {
		if time.Now().After(deadline) {
			t.Fatal("the killed process's event was not deleted")
		}
		time.Sleep(time.Millisecond)
	}
	healthy(t, s)
}

// rawConn is a client socket that speaks bytes, for malformed traffic.
func rawConn(t *testing.T, sock string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func helloMsg(base, size uint64) []byte {
	b := wire.AppendHeader(nil, wire.OpHello, 0, 0)
	b = append(b, wire.HelloMagic...)
	b = wire.LE.AppendUint32(b, wire.Version)
	b = wire.LE.AppendUint32(b, 0)
	b = wire.LE.AppendUint64(b, base)
	return wire.LE.AppendUint64(b, size)
}

// exchange sends msg (with fds) and returns the reply, or nil when the
// daemon hung up.
func exchange(t *testing.T, fd int, msg []byte, fds ...int) []byte {
	t.Helper()
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := sendRetry(fd, msg, oob); err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			return nil
		}
		t.Fatal(err)
	}
	buf := make([]byte, wire.MaxMessage)
	n, err := recvRetry(fd, buf)
	if err != nil {
		if errors.Is(err, unix.ECONNRESET) {
			return nil
		}
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	return buf[:n]
}

func wantErrno(t *testing.T, what string, reply []byte, want unix.Errno) {
	t.Helper()
	_, _, err := wire.ParseResult(reply)
	if !errors.Is(err, want) {
		t.Errorf("%s: reply %v, want %v", what, err, want)
	}
}

// hungUp reports whether the daemon closed fd's connection.
func hungUp(fd int) bool {
	buf := make([]byte, 64)
	n, err := recvRetry(fd, buf)
	return n == 0 && err == nil || errors.Is(err, unix.ECONNRESET)
}

func TestBadHandshakes(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	unsealed := newArena(t, 4096, 0)
	small := newArena(t, 1024, unix.F_SEAL_SHRINK)
	file, err := os.CreateTemp(t.TempDir(), "notmemfd")
	if err != nil {
		t.Fatal(err)
	}
	file.Truncate(4096)
	cases := []struct {
		name string
		msg  []byte
		fds  []int
		want unix.Errno
	}{
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n"), nil, unix.EPROTO},
		{"short", []byte{1, 0}, nil, unix.EPROTO},
		{"not hello first", wire.AppendHeader(nil, wire.OpDelete, 0, 0), nil, unix.EPROTO},
		{"bad magic", append(wire.AppendHeader(nil, wire.OpHello, 0, 0), make([]byte, wire.HelloSize-wire.HeaderSize)...), nil, unix.EPROTO},
		{"future version", func() []byte { b := helloMsg(0, 0); wire.LE.PutUint32(b[16:], 99); return b }(), nil, unix.EPROTONOSUPPORT},
		{"size without memfd", helloMsg(a.addr(0), 4096), nil, unix.EINVAL},
		{"memfd without size", helloMsg(0, 0), []int{a.fd}, unix.EINVAL},
		{"two memfds", helloMsg(a.addr(0), 4096), []int{a.fd, a.fd}, unix.EINVAL},
		{"memfd too small", helloMsg(small.addr(0), 4096), []int{small.fd}, unix.EINVAL},
		{"memfd not sealed", helloMsg(unsealed.addr(0), 4096), []int{unsealed.fd}, unix.EINVAL},
		{"not a memfd", helloMsg(0x10000, 4096), []int{int(file.Fd())}, unix.EINVAL},
		{"arena too large", helloMsg(0x10000, MaxArena+8), []int{a.fd}, unix.EINVAL},
		{"socket as memfd", helloMsg(0x10000, 4096), []int{rawConn(t, s.sock)}, unix.EINVAL},
	}
	// A hugetlbfs memfd takes seals, but its client can punch a hole the
	// daemon's next access faults on (SIGBUS with the pool empty).
	if huge, err := unix.MemfdCreate("test-huge-arena", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_HUGETLB); err == nil {
		t.Cleanup(func() { unix.Close(huge) })
		const hugeSize = 2 << 20
		if unix.Ftruncate(huge, hugeSize) == nil {
			if _, err := unix.FcntlInt(uintptr(huge), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, struct {
				name string
				msg  []byte
				fds  []int
				want unix.Errno
			}{"hugetlb memfd", helloMsg(0x40000000, hugeSize), []int{huge}, unix.EINVAL})
		}
	} else {
		t.Logf("no hugetlb memfd to try (%v)", err)
	}
	for _, c := range cases {
		fd := rawConn(t, s.sock)
		reply := exchange(t, fd, c.msg, c.fds...)
		wantErrno(t, c.name, reply, c.want)
		if !hungUp(fd) {
			t.Errorf("%s: the daemon kept the connection", c.name)
		}
	}
	if !strings.Contains(s.log.String(), "handshake refused") {
		t.Errorf("refused handshakes not logged:\n%s", s.log.String())
	}
	healthy(t, s)
}

// rawHello is a rawConn that said Hello, sharing the arena it returns.
func rawHello(t *testing.T, s *testServer) (int, *testArena) {
	t.Helper()
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(a.addr(0), 4096), a.fd); len(r) == 0 || wire.LE.Uint16(r) != wire.OpHelloOK {
		t.Fatalf("hello: %x", r)
	}
	return fd, a
}

func TestMalformedRequests(t *testing.T) {
	s := serve(t, Config{})
	fd, a := rawHello(t, s)
	cases := []struct {
		name string
		msg  []byte
		want unix.Errno
	}{
		{"unknown op", wire.AppendHeader(nil, 999, 0, 0), unix.EPROTO},
		{"hello again", helloMsg(0, 0), unix.EPROTO},
		{"register length past the end", wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRegister, 0, 0), 1000), unix.EPROTO},
		{"register without length", wire.AppendHeader(nil, wire.OpRegister, 0, 0), unix.EPROTO},
		{"register short struct", append(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRegister, 0, 0), 4), 4, 0, 0, 0), unix.EINVAL},
		{"register outside the arena", append(append(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRegister, 0, 0), abi.UserRegSize), reg(a.addr(0)+8192, 0)...), "x u32 a"...), unix.ENOMEM},
		{"write without index", wire.AppendHeader(nil, wire.OpWrite, 0, 0), 0},
		// The ENOMEM registration still added its event to the file's
		// array (as Linux does), so index 0 exists and 1 does not.
		{"write short payload", append(wire.AppendHeader(nil, wire.OpWrite, 0, 0), 0, 0, 0, 0), unix.EINVAL},
		{"write to nothing", append(wire.AppendHeader(nil, wire.OpWrite, 0, 0), 1, 0, 0, 0), unix.ENOENT},
		{"read bad handle", wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRead, 0, 42), 100), unix.EBADF},
		{"read without size", wire.AppendHeader(nil, wire.OpRead, 0, 0), unix.EBADF},
		{"close bad handle", wire.AppendHeader(nil, wire.OpCloseFile, 0, 7), unix.EBADF},
		{"session read bad handle", wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionRead, 0, 3), 4096), unix.EBADF},
		{"huge session", wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 1<<30), unix.EINVAL},
		{"oversized", append(wire.AppendHeader(nil, wire.OpWrite, 0, 0), make([]byte, wire.MaxMessage)...), unix.EMSGSIZE},
		{"open outside", append(wire.AppendHeader(nil, wire.OpOpen, 0, 0), "../etc/passwd"...), unix.ENOENT},
	}
	for _, c := range cases {
		reply := exchange(t, fd, c.msg)
		if reply == nil {
			t.Fatalf("%s: the daemon dropped a client that only sent a bad request", c.name)
		}
		if c.want == 0 {
			// write(2) of 0..3 bytes: EFAULT; an empty writev returns 0.
			if ret, _, err := wire.ParseResult(reply); err != nil || ret != 0 {
				t.Errorf("%s: %d, %v", c.name, ret, err)
			}
			continue
		}
		wantErrno(t, c.name, reply, c.want)
	}
	// A message too short for a header: the client is dropped.
	reply := exchange(t, fd, []byte{1, 2, 3})
	wantErrno(t, "headerless", reply, unix.EPROTO)
	if !hungUp(fd) {
		t.Error("a headerless message did not drop the client")
	}
	if !strings.Contains(s.log.String(), "oversized") {
		t.Errorf("oversized message not logged:\n%s", s.log.String())
	}
	healthy(t, s)
}

func TestClientThatNeverReads(t *testing.T) {
	s := serve(t, Config{ReplyTimeout: 200 * time.Millisecond})
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
		t.Fatal("hello refused")
	}
	// Requests whose replies are never read: the socket fills, the daemon
	// blocks on its reply, times out and drops the client.
	msg := append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...)
	for start := time.Now(); time.Since(start) < waitLimit; {
		err := unix.Sendmsg(fd, msg, nil, nil, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			break // dropped
		}
	}
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(s.log.String(), "does not read") {
		if time.Now().After(deadline) {
			t.Fatalf("the stuck client was not dropped:\n%s", s.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	healthy(t, s)
}

func TestPersistNeedsPrivilege(t *testing.T) {
	s := serve(t, Config{Cred: func(unix.Ucred) subsys.Cred { return subsys.Cred{} }})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	if c.PerfmonCapable() {
		t.Error("hello says perfmon capable")
	}
	if _, _, err := c.Register(reg(a.addr(0), abi.RegPersist), "nopriv u32 a", false); !errors.Is(err, unix.EPERM) {
		t.Errorf("PERSIST: %v, want EPERM", err)
	}
	if err := writeFile(c, "dynamic_events", "u:nopriv u32 a"); !errors.Is(err, unix.EPERM) {
		t.Errorf("u: create: %v, want EPERM", err)
	}
	if _, _, err := c.Register(reg(a.addr(0), 0), "nopriv u32 a", false); err != nil {
		t.Errorf("plain register: %v", err)
	}
}

// TestPeerCredentials checks the default Cred: a process running as
// nobody, without capabilities, is refused PERSIST; root is not.
func TestPeerCredentials(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "persist" {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Register(reg(a.addr(0), abi.RegPersist), "peer_persist u32 a", false)
		fmt.Printf("result: %v\n", err)
		return
	}
	// A directory other users can reach, for the socket and the binary.
	dir, err := os.MkdirTemp("", "uetrace-peercred")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	s := serveIn(t, Config{}, dir)
	if os.Geteuid() != 0 {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c := a.dial(t, s.sock)
		if _, _, err := c.Register(reg(a.addr(0), abi.RegPersist), "peer_persist u32 a", false); !errors.Is(err, unix.EPERM) && !c.PerfmonCapable() {
			t.Errorf("PERSIST as an unprivileged user: %v, want EPERM", err)
		}
		return
	}
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	root := a.dial(t, s.sock)
	if !root.PerfmonCapable() {
		t.Error("root is not perfmon capable")
	}
	os.Chmod(s.sock, 0o666) // the daemon's 0660 would keep nobody out
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(dir, "child.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyExe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyExe, "-test.run=^TestPeerCredentials$", "-test.v")
	cmd.Env = append(os.Environ(), "UETRACE_TEST_CHILD=persist", "UETRACE_TEST_SOCK="+s.sock)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
	t.Logf("child as nobody: %s", bytes.TrimSpace(out))
	if !strings.Contains(string(out), "result: ") || !strings.Contains(string(out), "(EPERM)") && !strings.Contains(string(out), "operation not permitted") {
		t.Errorf("PERSIST as nobody:\n%s", out)
	}
	if _, _, err := root.Register(reg(a.addr(0), abi.RegPersist), "peer_persist u32 a", false); err != nil {
		t.Errorf("PERSIST as root: %v", err)
	}
}

func TestThousandConnections(t *testing.T) {
	s := serve(t, Config{Cred: privileged})
	const n = 1000
	a := newArena(t, 8*n, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	admin := a.dial(t, s.sock)
	if err := writeFile(admin, "dynamic_events", "u:many u32 i"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(admin, "events/user_events/many/enable", "1"); err != nil {
		t.Fatal(err)
	}
	clients := make([]*client.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(s.sock, &client.Arena{FD: a.fd, Addr: a.addr(0), Size: uint64(len(a.mem))})
			if err != nil {
				errs <- err
				return
			}
			clients[i] = c
			idx, _, err := c.Register(reg(a.addr(8*i), 0), "many u32 i", false)
			if err != nil {
				errs <- err
				return
			}
			var rec [8]byte
			wire.LE.PutUint32(rec[:], idx)
			wire.LE.PutUint32(rec[4:], uint32(i))
			if _, err := c.Writev(int32(i), 0, rec[:]); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.Conns(); got < n+1 {
		t.Errorf("%d connections served, want %d", got, n+1)
	}
	for i := range n {
		if a.word(8*i)&1 == 0 {
			t.Fatalf("client %d's enable bit is not set", i)
		}
	}
	trace := readFile(t, admin, "trace")
	if got := strings.Count(trace, "many: i="); got != n {
		t.Errorf("%d records in trace, want %d", got, n)
	}
	healthy(t, s)
	for _, c := range clients {
		c.Close()
	}
	deadline := time.Now().Add(waitLimit)
	for s.Conns() > 2 { // admin and healthy's client remain
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after their clients closed", s.Conns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Close while connections are being accepted: a connection closed before
// its goroutine reads the peer's credentials is dropped, and the daemon
// lives on (it once dereferenced the credentials it never got).
func TestCloseWhileAccepting(t *testing.T) {
	for range 50 {
		dir := t.TempDir()
		sock := filepath.Join(dir, "d.sock")
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := New(Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1}), Logger: slog.New(slog.DiscardHandler)})
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ln) }()
		for range 8 {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
			defer unix.Close(fd)
		}
		srv.Close()
		// Serve returns nil after Close, even when it started after it.
		if err := <-done; err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
}

// Serve called after Close returns nil, as after Close during Serve, and
// closes the listener as Close would have: `uetrace serve` stopped by a
// signal before its goroutine reached Serve was told "use of closed
// network connection", and the listening socket stayed open, its path
// bound, until the process exited.
func TestServeAfterClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1}), Logger: slog.New(slog.DiscardHandler)})
	srv.Close()
	if err := srv.Serve(ln); err != nil {
		t.Fatalf("Serve after Close: %v, want nil", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on the listener after Serve returned: %v, want net.ErrClosed (Serve closes it)", err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket's path after Serve returned: %v, want it removed with the listener", err)
	}
}
