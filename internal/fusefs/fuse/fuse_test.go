package fuse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

// These tests mount a tree served by this process and reach it only from
// child processes under deadlines: this process must never touch the mount
// (see the package doc).

const childTimeout = 20 * time.Second

// testFS is a small tree: plain files, a writable one, a pipe whose reads
// block until something is written, a file with an ioctl and one with poll.
type testFS struct {
	mu    sync.Mutex
	files map[string]*testFile
	ev    chan string

	opens    []openRecord
	flushes  int
	maxWrite int
	ioctls   []ioctlRecord
}

type openRecord struct {
	path  string
	flags uint32
}

type ioctlRecord struct {
	cmd     uint32
	arg     uint64
	pid     uint32
	in      []byte
	outSize uint32
}

type testFile struct {
	mode uint32
	data []byte

	pipe bool
	ch   chan struct{} // closed when the pipe gets data
	// slowFail: a write waits for an INTERRUPT, then fails ENOENT anyway.
	slowFail bool
	ioctl    bool
	poll     bool
	ready    bool
	wake     func()
	ino      uint64 // Attr.Ino: 0 for the node ID
	// inline: writes are answered inline (InlineWriter); a write of
	// "stall" waits for stall to be closed, then says what Commit said
	// on commits.
	inline  bool
	stall   chan struct{}
	commits chan bool
}

func newTestFS() *testFS {
	big := make([]byte, 300_001)
	for i := range big {
		big[i] = byte(i * 7)
	}
	return &testFS{
		ev: make(chan string, 1000),
		files: map[string]*testFile{
			"":          {mode: unix.S_IFDIR | 0o755},
			"hello":     {mode: unix.S_IFREG | 0o444, data: []byte("hello world\n")},
			"big":       {mode: unix.S_IFREG | 0o444, data: big, ino: fixedIno},
			"rw":        {mode: unix.S_IFREG | 0o666, data: []byte("initial\n")},
			"pipe":      {mode: unix.S_IFREG | 0o666, pipe: true, ch: make(chan struct{})},
			"slowfail":  {mode: unix.S_IFREG | 0o666, slowFail: true},
			"dev":       {mode: unix.S_IFREG | 0o666, ioctl: true},
			"pollme":    {mode: unix.S_IFREG | 0o666, poll: true},
			"inline":    {mode: unix.S_IFREG | 0o666, inline: true, stall: make(chan struct{}), commits: make(chan bool, 10)},
			"sub":       {mode: unix.S_IFDIR | 0o755},
			"sub/inner": {mode: unix.S_IFREG | 0o640, data: []byte("inner\n")},
		},
	}
}

func (f *testFS) event(s string) {
	select {
	case f.ev <- s:
	default:
	}
}

// waitEvent waits for event want, failing the test at the deadline.
func (f *testFS) waitEvent(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(childTimeout)
	for {
		select {
		case e := <-f.ev:
			if e == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %q event within %v", want, childTimeout)
		}
	}
}

func (f *testFS) Stat(ctx context.Context, path string) (Attr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[path]
	if !ok {
		return Attr{}, unix.ENOENT
	}
	return Attr{Ino: file.ino, Mode: file.mode, Size: uint64(len(file.data)), Mtime: time.Unix(1700000000, 5)}, nil
}

func (f *testFS) ReadDir(ctx context.Context, path string) ([]DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.files[path]
	if !ok {
		return nil, unix.ENOENT
	}
	if d.mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, unix.ENOTDIR
	}
	var out []DirEntry
	for p, file := range f.files {
		if p == "" {
			continue
		}
		dir, name := "", p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dir, name = p[:i], p[i+1:]
		}
		if dir == path {
			out = append(out, DirEntry{Name: name, Mode: file.mode})
		}
	}
	return out, nil
}

func (f *testFS) Open(ctx context.Context, r *Request, path string, flags uint32) (Handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	file, ok := f.files[path]
	if !ok {
		return nil, unix.ENOENT
	}
	f.opens = append(f.opens, openRecord{path, flags})
	if flags&unix.O_TRUNC != 0 && !file.pipe {
		file.data = nil
	}
	return &testHandle{fs: f, f: file}, nil
}

type testHandle struct {
	fs *testFS
	f  *testFile
}

func (h *testHandle) Read(ctx context.Context, r *Request, dst []byte, off int64) (int, error) {
	if !h.f.pipe {
		h.fs.mu.Lock()
		defer h.fs.mu.Unlock()
		if off >= int64(len(h.f.data)) {
			return 0, io.EOF
		}
		return copy(dst, h.f.data[off:]), nil
	}
	for {
		h.fs.mu.Lock()
		if len(h.f.data) > 0 {
			n := copy(dst, h.f.data)
			h.f.data = h.f.data[n:]
			h.fs.mu.Unlock()
			return n, nil
		}
		ch := h.f.ch
		h.fs.mu.Unlock()
		h.fs.event("pipe-read-blocked")
		select {
		case <-ch:
		case <-ctx.Done():
			h.fs.event("pipe-read-cancelled")
			return 0, ctx.Err()
		}
	}
}

func (h *testHandle) InlineWrites() bool { return h.f.inline }

func (h *testHandle) Write(ctx context.Context, r *Request, data []byte, off int64) (int, error) {
	if h.f.inline {
		if string(data) == "stall" {
			h.fs.event("inline-stalled")
			<-h.f.stall
		}
		ok := r.Commit()
		h.f.commits <- ok
		if !ok {
			return 0, unix.EIO // dropped: the server answered
		}
		return len(data), nil
	}
	if h.f.slowFail {
		h.fs.event("slowfail-write")
		<-ctx.Done()
		return 0, unix.ENOENT
	}
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	h.fs.maxWrite = max(h.fs.maxWrite, len(data))
	if h.f.pipe {
		h.f.data = append(h.f.data, data...)
		close(h.f.ch)
		h.f.ch = make(chan struct{})
		return len(data), nil
	}
	if h.f.mode&0o222 == 0 {
		return 0, unix.EBADF
	}
	if end := int(off) + len(data); end > len(h.f.data) {
		h.f.data = append(h.f.data, make([]byte, end-len(h.f.data))...)
	}
	copy(h.f.data[off:], data)
	return len(data), nil
}

func (h *testHandle) Flush(ctx context.Context, r *Request) error {
	h.fs.mu.Lock()
	h.fs.flushes++
	h.fs.mu.Unlock()
	return nil
}
func (h *testHandle) Release() error { return nil }
func (h *testHandle) Stream() bool   { return h.f.pipe }

func (h *testHandle) Ioctl(ctx context.Context, r *Request, cmd uint32, arg uint64, in []byte, outSize uint32) (int32, []byte, error) {
	if !h.f.ioctl {
		return 0, nil, unix.ENOTTY
	}
	h.fs.mu.Lock()
	h.fs.ioctls = append(h.fs.ioctls, ioctlRecord{cmd, arg, r.Pid, slices.Clone(in), outSize})
	h.fs.mu.Unlock()
	if uint32(len(in)) != outSize {
		return 0, nil, unix.EINVAL
	}
	return 7, slices.Clone(in), nil // the argument is a pointer's target: echo it
}

func (h *testHandle) Poll(ctx context.Context, r *Request, events uint32, wake func()) (uint32, error) {
	if !h.f.poll {
		return defaultPollMask, nil
	}
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.f.ready {
		return unix.POLLIN, nil
	}
	if wake != nil {
		h.f.wake = wake
		h.fs.event("poll-armed")
	}
	return 0, nil
}

// makeReady makes pollme readable and wakes its poller.
func (f *testFS) makeReady() {
	f.mu.Lock()
	file := f.files["pollme"]
	file.ready = true
	file.data = []byte("ready")
	wake := file.wake
	f.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// mountTest mounts fs on a fresh directory; the test's cleanup unmounts it
// (abort, then detach) before the directory is removed.
func mountTest(t *testing.T, fs FileSystem) (*Conn, string) {
	t.Helper()
	return mountTestOpts(t, fs, Options{FSName: "uetrace-test", Debug: debugf()})
}

// mountTestOpts is mountTest with the connection's options.
func mountTestOpts(t *testing.T, fs FileSystem, o Options) (*Conn, string) {
	t.Helper()
	testutil.NeedFUSE(t, "mounts a FUSE filesystem")
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Mount(dir, fs, o)
	if err != nil {
		t.Fatal(err)
	}
	guard(t, c)
	t.Cleanup(func() {
		if err := c.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
	})
	if c.Dev() == 0 {
		t.Error("Dev() is 0 after Mount")
	}
	return c, dir
}

// debugf logs the server's complaints to stderr when UETRACE_FUSE_DEBUG is
// set (not to t.Logf: the server may outlive a test's logging by a moment).
func debugf() func(string, ...any) {
	if os.Getenv("UETRACE_FUSE_DEBUG") == "" {
		return nil
	}
	return func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
}

// guarded is the connection a test's children use: a child that overruns
// its deadline may be waiting on the server in the kernel, where no signal
// reaches it, so the connection is aborted before the child is killed.
var guarded sync.Map // *testing.T -> *Conn

func guard(t *testing.T, c *Conn) {
	guarded.Store(t, c)
	t.Cleanup(func() { guarded.Delete(t) })
}

// command is name args under a deadline, never in this process.
func command(t *testing.T, ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Cancel = func() error {
		if c, ok := guarded.Load(t); ok {
			// Abort, and close the device: its last close aborts the
			// connection where fusectl is not mounted.
			c.(*Conn).Abort()
			c.(*Conn).dev.Close()
		}
		return cmd.Process.Kill()
	}
	return cmd
}

// run runs a command (never in this process) under a deadline.
func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := command(t, ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%s %q: %w (stderr %q)", name, args, err, stderr.String())
	}
	return string(out), err
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := run(t, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// started is a child left running.
type started struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    chan string // stdout, as it comes, line by line
}

func start(t *testing.T, name string, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	cmd := command(t, ctx, name, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &started{cmd: cmd, cancel: cancel, out: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.out <- sc.Text()
		}
		close(s.out)
	}()
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	return s
}

// line is the child's next line of output, within the deadline.
func (s *started) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.out:
		if !ok {
			t.Fatal("the child's output ended")
		}
		return l
	case <-time.After(childTimeout):
		t.Fatalf("no output within %v", childTimeout)
	}
	return ""
}

func TestStatAndReadDir(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	for _, name := range []string{"hello", "big", "sub", "sub/inner", "pipe", "slowfail"} {
		f := fs.files[name]
		got := strings.TrimSpace(mustRun(t, "stat", "-c", "%f %s %Y", filepath.Join(dir, name)))
		want := fmt.Sprintf("%x %d 1700000000", f.mode, len(f.data))
		if got != want {
			t.Errorf("stat %s: %q, want %q", name, got, want)
		}
	}
	got := strings.TrimSpace(mustRun(t, "stat", "-c", "%f", dir))
	if got != "41ed" {
		t.Errorf("stat of the root: mode %s, want 41ed", got)
	}
	if _, err := run(t, "stat", filepath.Join(dir, "nothing")); err == nil {
		t.Error("stat of a missing file succeeded")
	}
	names := strings.Fields(mustRun(t, "ls", "-a", dir))
	want := []string{".", "..", "big", "dev", "hello", "inline", "pipe", "pollme", "rw", "slowfail", "sub"}
	if !slices.Equal(names, want) {
		t.Errorf("ls -a: %q, want %q", names, want)
	}
	long := mustRun(t, "ls", "-la", filepath.Join(dir, "sub"))
	if !strings.Contains(long, "-rw-r----- ") || !strings.Contains(long, " inner\n") {
		t.Errorf("ls -la sub:\n%s", long)
	}
	if out := mustRun(t, "stat", "-f", "-c", "%S", dir); strings.TrimSpace(out) != "4096" {
		t.Errorf("statfs block size %q", out)
	}
}

// fixedIno is the test tree's Attr.Ino for big.
const fixedIno = 0x75657464

// TestIno: a file with an Attr.Ino has it as st_ino, in stat and in a
// descriptor's fstat, however often it is looked up; the others have
// their node IDs, none of them it.
func TestIno(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	for range 2 {
		got := strings.TrimSpace(mustRun(t, "stat", "-c", "%i", filepath.Join(dir, "big")))
		if got != strconv.Itoa(fixedIno) {
			t.Errorf("st_ino of big: %s, want %d", got, fixedIno)
		}
	}
	// fstat of an open descriptor: the shell's stat -L of /dev/stdin.
	got := strings.TrimSpace(mustRun(t, "sh", "-c", "stat -L -c %i /dev/stdin < "+filepath.Join(dir, "big")))
	if got != strconv.Itoa(fixedIno) {
		t.Errorf("fstat's st_ino of an open big: %s, want %d", got, fixedIno)
	}
	other := strings.TrimSpace(mustRun(t, "stat", "-c", "%i", filepath.Join(dir, "hello")))
	if other == strconv.Itoa(fixedIno) || other == "0" {
		t.Errorf("st_ino of hello: %s, want its node ID", other)
	}
}

func TestRead(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	if got := mustRun(t, "cat", filepath.Join(dir, "hello")); got != "hello world\n" {
		t.Errorf("cat hello: %q", got)
	}
	if got := mustRun(t, "dd", "if="+filepath.Join(dir, "hello"), "bs=1", "skip=6", "count=5", "status=none"); got != "world" {
		t.Errorf("dd skip=6: %q", got)
	}
	if got := mustRun(t, "cat", filepath.Join(dir, "big")); got != string(fs.files["big"].data) {
		t.Errorf("cat big: %d bytes, not the file's %d", len(got), len(fs.files["big"].data))
	}
	if got := mustRun(t, "cat", filepath.Join(dir, "sub", "inner")); got != "inner\n" {
		t.Errorf("cat sub/inner: %q", got)
	}
}

func TestWrite(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	rw := filepath.Join(dir, "rw")
	content := func() string {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return string(fs.files["rw"].data)
	}
	mustRun(t, "sh", "-c", "echo abc > "+rw)
	if got := content(); got != "abc\n" {
		t.Errorf("after >: %q", got)
	}
	fs.mu.Lock()
	last := fs.opens[len(fs.opens)-1]
	fs.mu.Unlock()
	if last.path != "rw" || last.flags&unix.O_TRUNC == 0 {
		t.Errorf("the open of > was %+v: O_TRUNC did not reach Open", last)
	}
	mustRun(t, "sh", "-c", "echo def >> "+rw)
	if got := mustRun(t, "cat", rw); got != "abc\ndef\n" {
		t.Errorf("after >>: %q", got)
	}
	mustRun(t, "sh", "-c", "echo x > "+rw)
	if got := mustRun(t, "cat", rw); got != "x\n" {
		t.Errorf("after > again: %q", got)
	}
	mustRun(t, "dd", "if=/dev/zero", "of="+rw, "bs=1M", "count=3", "status=none")
	if got := len(content()); got != 3<<20 {
		t.Errorf("after dd: %d bytes", got)
	}
	fs.mu.Lock()
	mw := fs.maxWrite
	fs.mu.Unlock()
	if mw != 1<<20 {
		t.Errorf("largest WRITE %d bytes, want 1 MiB (FUSE_MAX_PAGES)", mw)
	}
	if _, err := run(t, "sh", "-c", "echo no > "+filepath.Join(dir, "hello")); err == nil {
		t.Error("writing a 0444 file succeeded as root? (default_permissions lets root in; the handle must refuse)")
	}
}

func TestBlockingReadDoesNotStall(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	pipe := filepath.Join(dir, "pipe")
	reader := start(t, "cat", pipe)
	fs.waitEvent(t, "pipe-read-blocked")
	// Another process's LOOKUP, OPEN, WRITE and RELEASE are answered while
	// the read blocks, and the write completes it.
	if got := mustRun(t, "cat", filepath.Join(dir, "hello")); got != "hello world\n" {
		t.Errorf("cat hello while a read blocks: %q", got)
	}
	mustRun(t, "sh", "-c", "echo through >> "+pipe)
	if got := reader.line(t); got != "through" {
		t.Errorf("the blocked reader got %q", got)
	}
}

func TestInterrupt(t *testing.T) {
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	reader := start(t, "cat", filepath.Join(dir, "pipe"))
	fs.waitEvent(t, "pipe-read-blocked")
	if err := reader.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	fs.waitEvent(t, "pipe-read-cancelled")
	err := reader.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("cat after SIGINT: %v", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("cat ended %v, not by SIGINT", ws)
	}
	if got := mustRun(t, "cat", filepath.Join(dir, "hello")); got != "hello world\n" {
		t.Errorf("after the interrupt: %q", got)
	}
}

// buildHelper compiles testdata/fusehelper.c.
func buildHelper(t *testing.T) string {
	t.Helper()
	return testutil.BuildC(t, "", "testdata/fusehelper.c", "-O1", "-Wall")
}

func TestIoctl(t *testing.T) {
	bin := buildHelper(t)
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	out := strings.TrimSpace(mustRun(t, bin, "ioctl", filepath.Join(dir, "dev")))
	var arg uint64
	var tid, ret, errno int
	var v uint64
	if _, err := fmt.Sscanf(out, "arg=%d tid=%d ret=%d errno=%d v=%x", &arg, &tid, &ret, &errno, &v); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if ret != 7 || v != 0x1122334455667788 {
		t.Errorf("ioctl returned %d, value %#x after; want 7 and the value echoed", ret, v)
	}
	fs.mu.Lock()
	ioctls := slices.Clone(fs.ioctls)
	fs.mu.Unlock()
	if len(ioctls) != 1 {
		t.Fatalf("%d ioctls reached the handle", len(ioctls))
	}
	got := ioctls[0]
	const iowr uint32 = 3<<30 | 8<<16 | '*'<<8 // _IOWR('*', 0, uint64_t)
	wantIn := []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}
	if got.cmd != iowr || got.arg != arg || got.pid != uint32(tid) || !bytes.Equal(got.in, wantIn) || got.outSize != 8 {
		t.Errorf("the handle saw %+v; want cmd %#x arg %#x pid %d in % x outSize 8", got, iowr, arg, tid, wantIn)
	}
	// A file without ioctls is ENOTTY (25).
	out, _ = run(t, bin, "ioctl", filepath.Join(dir, "hello"))
	if !strings.Contains(out, "errno=25") {
		t.Errorf("ioctl of a plain file: %q", out)
	}
}

func TestPoll(t *testing.T) {
	bin := buildHelper(t)
	fs := newTestFS()
	_, dir := mountTest(t, fs)
	p := start(t, bin, "poll", filepath.Join(dir, "pollme"))
	fs.waitEvent(t, "poll-armed")
	fs.makeReady()
	if got := p.line(t); got != "revents=0x1 read=ready" {
		t.Errorf("the poller said %q", got)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Error(err)
	}
}

// fuseGoroutines lists the goroutines still in this package's serving.
func fuseGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stuck []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "internal/fuse.(*Conn)") {
			stuck = append(stuck, g)
		}
	}
	return stuck
}

func TestAbortWhileBlocked(t *testing.T) {
	fs := newTestFS()
	c, dir := mountTest(t, fs)
	reader := start(t, "cat", filepath.Join(dir, "pipe"))
	fs.waitEvent(t, "pipe-read-blocked")
	if err := c.Unmount(); err != nil {
		t.Fatalf("Unmount: %v", err)
	}
	fs.waitEvent(t, "pipe-read-cancelled")
	waitEnd(t, c)
	if err := reader.cmd.Wait(); err == nil {
		t.Error("the blocked cat succeeded after the abort")
	}
	deadline := time.Now().Add(childTimeout)
	for {
		stuck := fuseGoroutines()
		if len(stuck) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left serving:\n%s", strings.Join(stuck, "\n\n"))
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond)
	}
	// The mount is gone: a child sees the plain directory again.
	if out := mustRun(t, "ls", "-a", dir); len(strings.Fields(out)) != 2 {
		t.Errorf("after Unmount the mount point lists %q", out)
	}
}

func TestServe(t *testing.T) {
	testutil.NeedFUSE(t, "mounts a FUSE filesystem")
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	const name = "uetrace-serve-test"
	data := "fd=" + strconv.Itoa(fd) + ",rootmode=40000,user_id=0,group_id=0,default_permissions"
	if err := unix.Mount(name, dir, "fuse.uetrace", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	// The mounter reads the mount's st_dev from its own table and passes
	// it on with the descriptor.
	mdev, ok := MountDev(dir)
	if !ok {
		unix.Unmount(dir, unix.MNT_DETACH)
		t.Fatalf("MountDev(%s): no fuse.uetrace mount there", dir)
	}
	fs := newTestFS()
	c, err := Serve(os.NewFile(uintptr(fd), "/dev/fuse"), fs, Options{FSName: name, Dev: mdev, Debug: debugf()})
	if err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		t.Fatal(err)
	}
	guard(t, c)
	t.Cleanup(func() {
		if err := c.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("umount: %v", err)
		}
	})
	if got := mustRun(t, "cat", filepath.Join(dir, "hello")); got != "hello world\n" {
		t.Errorf("cat hello: %q", got)
	}
	if c.Dev() != mdev {
		t.Errorf("Dev() is %#x, the mount's st_dev %#x", c.Dev(), mdev)
	}
	reader := start(t, "cat", filepath.Join(dir, "pipe"))
	fs.waitEvent(t, "pipe-read-blocked")
	// Unmount of a served descriptor aborts and closes; the mount stays
	// (Serve does not know where it is) but answers nothing any more.
	if err := c.Unmount(); err != nil {
		t.Fatal(err)
	}
	fs.waitEvent(t, "pipe-read-cancelled")
	if err := reader.cmd.Wait(); err == nil {
		t.Error("the blocked cat succeeded after Unmount")
	}
	if _, err := run(t, "cat", filepath.Join(dir, "hello")); err == nil {
		t.Error("cat succeeded after Unmount")
	}
	waitEnd(t, c)
}

// TestServeAbortsOnlyItsOwn: a descriptor served without Options.Dev —
// its mount is in another mount namespace, say, as uetrace run's is — never
// takes another fuse.uetrace mount of the table for its own. It once did
// (by FSName), and its Unmount aborted that other tree, whose callers got
// ECONNABORTED.
func TestServeAbortsOnlyItsOwn(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(fusectl, &st); err != nil || st.Type != fusectlMagic {
		t.Skip("fusectl is not mounted")
	}
	other, otherDir := mountTest(t, newTestFS())
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Mounted under another name: in the table, but not by the name
	// Serve is given, as if it were out of sight.
	data := "fd=" + strconv.Itoa(fd) + ",rootmode=40000,user_id=0,group_id=0,default_permissions"
	if err := unix.Mount("uetrace-elsewhere", dir, "fuse.uetrace", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	c, err := Serve(os.NewFile(uintptr(fd), "/dev/fuse"), newTestFS(), Options{FSName: "uetrace-test", Debug: debugf()})
	if err != nil {
		t.Fatal(err)
	}
	guard(t, c)
	if got := mustRun(t, "cat", filepath.Join(dir, "hello")); got != "hello world\n" {
		t.Errorf("cat hello: %q", got)
	}
	if c.Dev() != 0 {
		t.Errorf("Dev() is %#x without Options.Dev (the other mount's is %#x)", c.Dev(), other.Dev())
	}
	if err := c.Unmount(); err != nil {
		t.Fatal(err)
	}
	waitEnd(t, c)
	if got := mustRun(t, "cat", filepath.Join(otherDir, "hello")); got != "hello world\n" {
		t.Errorf("the other mount after this one's Unmount: %q", got)
	}
	select {
	case <-other.done:
		t.Error("the other connection ended with this one")
	default:
	}
}

// waitEnd waits, bounded, for the connection to end.
func waitEnd(t *testing.T, c *Conn) {
	t.Helper()
	waited := make(chan error, 1)
	go func() { waited <- c.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
	case <-time.After(childTimeout):
		t.Fatal("Wait did not return after the connection ended")
	}
}

func TestAbort(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(fusectl, &st); err != nil || st.Type != fusectlMagic {
		t.Skip("fusectl is not mounted")
	}
	fs := newTestFS()
	c, dir := mountTest(t, fs)
	reader := start(t, "cat", filepath.Join(dir, "pipe"))
	fs.waitEvent(t, "pipe-read-blocked")
	if err := c.Abort(); err != nil {
		t.Fatal(err)
	}
	fs.waitEvent(t, "pipe-read-cancelled")
	waitEnd(t, c)
	if err := reader.cmd.Wait(); err == nil {
		t.Error("the blocked cat succeeded after the abort")
	}
	if _, err := run(t, "cat", filepath.Join(dir, "hello")); err == nil {
		t.Error("cat succeeded after Abort")
	}
}

// TestMountNotRoot: without the privilege to mount, Mount says what is
// missing.
func TestMountNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	_, err := Mount(t.TempDir(), newTestFS(), Options{})
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EACCES) {
		t.Fatalf("Mount as %d: %v, want EPERM", os.Geteuid(), err)
	}
	if !strings.Contains(err.Error(), "root") {
		t.Errorf("the error does not say what to do: %v", err)
	}
}
