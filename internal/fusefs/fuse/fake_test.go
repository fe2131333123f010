package fuse

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeKernel stands in for /dev/fuse with a SOCK_SEQPACKET socket: each
// request is one message, each reply one message. It tests what a real
// kernel rarely or never does, without root.
type fakeKernel struct {
	fd int
	c  *Conn
	fs *testFS
}

func newFakeKernel(t testing.TB, minor uint32) (*fakeKernel, []byte) {
	fs := newTestFS()
	return newFakeKernelOf(t, minor, fs, fs)
}

// newFakeKernelOf serves served, which is or wraps fs.
func newFakeKernelOf(t testing.TB, minor uint32, served FileSystem, fs *testFS) (*fakeKernel, []byte) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Serve(os.NewFile(uintptr(fds[0]), "fake-fuse"), served, Options{FSName: "uetrace-fake"})
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{fd: fds[1], c: c, fs: fs}
	t.Cleanup(func() {
		unix.Close(k.fd)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(childTimeout):
			t.Error("the server did not end when its device closed")
		}
	})
	init := append(fields(uint32(7), minor, uint32(131072), uint32(0x73fffffb), uint32(0)), make([]byte, 44)...)
	k.send(t, req(opInit, 2, 0, init))
	_, _, body := k.recv(t)
	return k, body
}

func (k *fakeKernel) send(t testing.TB, b []byte) {
	t.Helper()
	if _, err := unix.Write(k.fd, b); err != nil {
		t.Fatal(err)
	}
}

// recv is the next reply: its unique, errno and body.
func (k *fakeKernel) recv(t testing.TB) (uint64, unix.Errno, []byte) {
	t.Helper()
	u, e, b, ok := k.recvWithin(t, childTimeout)
	if !ok {
		t.Fatalf("no reply within %v", childTimeout)
	}
	return u, e, b
}

func (k *fakeKernel) recvWithin(t testing.TB, d time.Duration) (uint64, unix.Errno, []byte, bool) {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(k.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(d.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return 0, 0, nil, false
		}
		break
	}
	buf := make([]byte, 2<<20)
	n, err := unix.Read(k.fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	buf = buf[:n]
	if n < outHeaderSize || int(le.Uint32(buf)) != n {
		t.Fatalf("a reply of %d bytes says %d", n, le.Uint32(buf))
	}
	return le.Uint64(buf[8:]), unix.Errno(-int32(le.Uint32(buf[4:]))), buf[outHeaderSize:], true
}

// call sends a request and returns its reply (there must be no other
// reply in between).
func (k *fakeKernel) call(t testing.TB, b []byte) (unix.Errno, []byte) {
	t.Helper()
	k.send(t, b)
	u, e, body := k.recv(t)
	if want := le.Uint64(b[8:]); u != want {
		t.Fatalf("reply to %d, want %d", u, want)
	}
	return e, body
}

func TestFakeInit(t *testing.T) {
	_, out := newFakeKernel(t, 45)
	if len(out) != initOutSize {
		t.Fatalf("init_out of %d bytes", len(out))
	}
	want := uint32(initAsyncRead | initAtomicOTrunc | initBigWrites | initMaxPages)
	if major, minor, flags := le.Uint32(out), le.Uint32(out[4:]), le.Uint32(out[12:]); major != 7 || minor != ourMinor || flags != want {
		t.Errorf("INIT answered %d.%d flags %#x, want 7.%d %#x (no writeback cache)", major, minor, flags, ourMinor, want)
	}
	if mw, pages := le.Uint32(out[20:]), le.Uint16(out[28:]); mw != 1<<20 || pages != 256 {
		t.Errorf("max_write %d max_pages %d", mw, pages)
	}
}

func TestFakeOldKernel(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	c, err := Serve(os.NewFile(uintptr(fds[0]), "fake-fuse"), newTestFS(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKernel{fd: fds[1], c: c}
	k.send(t, req(opInit, 2, 0, fields(uint32(7), uint32(27), uint32(0), uint32(0))))
	if _, e, _ := k.recv(t); e != unix.EPROTO {
		t.Errorf("INIT 7.27 answered %v", e)
	}
	if err := c.Wait(); !errors.Is(err, unix.EPROTO) {
		t.Errorf("Wait: %v", err)
	}
}

// lookupOpen looks name up and opens it, returning node and fh.
func (k *fakeKernel) lookupOpen(t testing.TB, unique uint64, name string) (uint64, uint64) {
	t.Helper()
	e, entry := k.call(t, req(opLookup, unique, rootID, fields(name)))
	if e != 0 {
		t.Fatalf("LOOKUP %s: %v", name, e)
	}
	node := le.Uint64(entry)
	e, open := k.call(t, req(opOpen, unique+2, node, fields(uint32(unix.O_RDWR), uint32(0))))
	if e != 0 {
		t.Fatalf("OPEN %s: %v", name, e)
	}
	return node, le.Uint64(open)
}

// noFlushFS opens testFS's files as handles that are no Flusher.
type noFlushFS struct{ *testFS }

func (f noFlushFS) Open(ctx context.Context, r *Request, path string, flags uint32) (Handle, error) {
	h, err := f.testFS.Open(ctx, r, path, flags)
	if err != nil {
		return nil, err
	}
	return struct{ Handle }{h}, nil
}

// TestFakeNoFlush: a handle that is no Flusher is opened FOPEN_NOFLUSH, so
// that Linux sends no FLUSH at its closes; one a kernel before 5.17 sends
// anyway is answered. A Flusher's file gets every FLUSH.
func TestFakeNoFlush(t *testing.T) {
	flush := func(k *fakeKernel, unique, node, fh uint64) unix.Errno {
		e, _ := k.call(t, req(opFlush, unique, node, fields(fh, uint32(0), uint32(0), uint64(0))))
		return e
	}
	for _, c := range []struct {
		name    string
		noFlush bool
	}{{"a Flusher", false}, {"no Flusher", true}} {
		fs := newTestFS()
		var served FileSystem = fs
		if c.noFlush {
			served = noFlushFS{fs}
		}
		k, _ := newFakeKernelOf(t, 45, served, fs)
		_, entry := k.call(t, req(opLookup, 10, rootID, fields("hello")))
		node := le.Uint64(entry)
		e, open := k.call(t, req(opOpen, 12, node, fields(uint32(unix.O_RDONLY), uint32(0))))
		if e != 0 {
			t.Fatalf("%s: OPEN: %v", c.name, e)
		}
		if got := le.Uint32(open[8:])&fopenNoflush != 0; got != c.noFlush {
			t.Errorf("%s: OPEN flags %#x: FOPEN_NOFLUSH %v, want %v", c.name, le.Uint32(open[8:]), got, c.noFlush)
		}
		if e := flush(k, 14, node, le.Uint64(open)); e != 0 {
			t.Errorf("%s: FLUSH answered %v", c.name, e)
		}
		fs.mu.Lock()
		flushes := fs.flushes
		fs.mu.Unlock()
		if want := map[bool]int{false: 1, true: 0}[c.noFlush]; flushes != want {
			t.Errorf("%s: %d Flush calls, want %d", c.name, flushes, want)
		}
	}
}

func TestFakeInterrupt(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	node, fh := k.lookupOpen(t, 10, "pipe")
	if e, open := k.call(t, req(opOpen, 14, node, fields(uint32(0), uint32(0)))); e != 0 || le.Uint32(open[8:]) != fopenDirectIO|fopenStream|fopenNonseekable {
		t.Errorf("OPEN of a stream: %v flags %#x", e, le.Uint32(open[8:]))
	}
	k.send(t, req(opRead, 20, node, fields(fh, uint64(0), uint32(4096), uint32(0), uint64(0), uint32(0), uint32(0))))
	k.fs.waitEvent(t, "pipe-read-blocked")
	// Answered requests and the blocked one are known: no reply to the
	// INTERRUPT itself, only the READ's EINTR.
	k.send(t, req(opInterrupt, 21, 0, fields(uint64(12))))
	k.send(t, req(opInterrupt, 23, 0, fields(uint64(20))))
	if u, e, _ := k.recv(t); u != 20 || e != unix.EINTR {
		t.Errorf("the interrupted READ answered %d %v", u, e)
	}
	// An INTERRUPT for a request not read yet: EAGAIN, so the kernel sends
	// it again after the request.
	if e, _ := k.call(t, req(opInterrupt, 25, 0, fields(uint64(1000)))); e != unix.EAGAIN {
		t.Errorf("INTERRUPT of an unseen request answered %v", e)
	}
}

func TestFakeErrors(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	// A header that lies about its length is dropped; the next is answered.
	bad := req(opStatfs, 8, 1, nil)
	le.PutUint32(bad, 1000)
	k.send(t, bad)
	if e, _ := k.call(t, req(opStatfs, 10, 1, nil)); e != 0 {
		t.Errorf("STATFS: %v", e)
	}
	if e, _ := k.call(t, req(opLookup, 12, 1, []byte("no-nul"))); e != unix.EIO {
		t.Errorf("malformed LOOKUP: %v", e)
	}
	if e, _ := k.call(t, req(opMkdir, 14, 1, fields(uint32(0o755), uint32(0), "d"))); e != unix.ENOSYS {
		t.Errorf("MKDIR: %v", e)
	}
	if e, _ := k.call(t, req(999, 16, 1, nil)); e != unix.ENOSYS {
		t.Errorf("opcode 999: %v", e)
	}
	node, fh := k.lookupOpen(t, 20, "dev")
	ioc := func(unique uint64, flags uint32) []byte {
		return req(opIoctl, unique, node, fields(fh, flags, uint32(0xc0082a00), uint64(0x1000), uint32(8), uint32(8), uint64(1)))
	}
	if e, _ := k.call(t, ioc(30, ioctlUnrestricted)); e != unix.ENOSYS {
		t.Errorf("unrestricted IOCTL: %v", e)
	}
	e, out := k.call(t, ioc(32, 0))
	if e != 0 || len(out) != ioctlOutSize+8 || int32(le.Uint32(out)) != 7 || le.Uint64(out[ioctlOutSize:]) != 1 {
		t.Errorf("IOCTL: %v % x", e, out)
	}
	if e, _ := k.call(t, req(opRead, 34, 5, fields(uint64(999), uint64(0), uint32(10), uint32(0), uint64(0), uint32(0), uint32(0)))); e != unix.EBADF {
		t.Errorf("READ of an unknown fh: %v", e)
	}
	if e, _ := k.call(t, req(opSetattr, 36, node, append(fields(uint32(fattrMode)), make([]byte, 84)...))); e != unix.EPERM {
		t.Errorf("chmod: %v", e)
	}
	if e, out := k.call(t, req(opSetattr, 38, node, append(fields(uint32(fattrSize), uint32(0), uint64(0), uint64(0)), make([]byte, 64)...))); e != 0 || len(out) != attrOutSize {
		t.Errorf("truncate to 0: %v, %d bytes", e, len(out))
	}
}

// Nodes: a path keeps its ID while looked up, gets a new one when its type
// changes (the kernel would make the old inode bad), and is forgotten.
func TestFakeNodes(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	lookup := func(unique uint64, name string) (uint64, unix.Errno) {
		e, entry := k.call(t, req(opLookup, unique, rootID, fields(name)))
		if e != 0 {
			return 0, e
		}
		if le.Uint64(entry) != le.Uint64(entry[40:]) {
			t.Errorf("nodeid %d, ino %d", le.Uint64(entry), le.Uint64(entry[40:]))
		}
		return le.Uint64(entry), 0
	}
	a, _ := lookup(2, "hello")
	b, _ := lookup(4, "hello")
	if a != b || a == rootID {
		t.Errorf("hello looked up twice: %d, %d", a, b)
	}
	if _, e := lookup(6, "nothing"); e != unix.ENOENT {
		t.Errorf("LOOKUP nothing: %v", e)
	}
	k.fs.mu.Lock()
	k.fs.files["hello"].mode = unix.S_IFDIR | 0o755
	k.fs.mu.Unlock()
	if e, _ := k.call(t, req(opGetattr, 8, a, fields(uint32(0), uint32(0), uint64(0)))); e != unix.ENOENT {
		t.Errorf("GETATTR of a node whose path changed type: %v", e)
	}
	c, _ := lookup(10, "hello")
	if c == a {
		t.Error("a path that changed type kept its node")
	}
	k.send(t, req(opBatchForget, 12, 0, fields(uint32(2), uint32(0), a, uint64(2), c, uint64(1))))
	k.send(t, req(opForget, 14, rootID, fields(uint64(1))))
	if e, _ := k.call(t, req(opGetattr, 16, a, fields(uint32(0), uint32(0), uint64(0)))); e != unix.ESTALE {
		t.Errorf("GETATTR of a forgotten node: %v", e)
	}
	if e, _ := k.call(t, req(opGetattr, 18, rootID, fields(uint32(0), uint32(0), uint64(0)))); e != 0 {
		t.Errorf("GETATTR of the root after a FORGET of it: %v", e)
	}
	k.c.mu.Lock()
	n := len(k.c.nodes)
	k.c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d nodes left, want the root", n)
	}
}

func TestFakeReaddir(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	e, open := k.call(t, req(opOpendir, 2, rootID, fields(uint32(0), uint32(0))))
	if e != 0 {
		t.Fatal(e)
	}
	fh := le.Uint64(open)
	var names []string
	off := uint64(0)
	for range 20 {
		e, out := k.call(t, req(opReaddir, 4+off*2, rootID, fields(fh, off, uint32(80), uint32(0), uint64(0), uint32(0), uint32(0))))
		if e != 0 {
			t.Fatal(e)
		}
		if len(out) == 0 {
			break
		}
		for len(out) > 0 {
			nl := le.Uint32(out[16:])
			names = append(names, string(out[24:24+nl]))
			off = le.Uint64(out[8:])
			out = out[(24+nl+7)&^7:]
		}
	}
	if len(names) != 11 || names[0] != "." || names[1] != ".." {
		t.Errorf("READDIR in 80-byte pieces: %q", names)
	}
}

// FuzzServe: any request after INIT is answered or dropped; the server
// neither panics nor stops answering.
func FuzzServe(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= inHeaderSize {
			le.PutUint32(b, uint32(len(b)))
			le.PutUint64(b[8:], le.Uint64(b[8:])&^(1<<63)) // the ping's unique is free
			if le.Uint32(b[4:]) == opInit {
				return // a second INIT is the kernel's to never send
			}
		}
		k, _ := newFakeKernel(t, 45)
		if len(b) > 0 {
			k.send(t, b)
		}
		ping := req(opStatfs, 1<<63, rootID, nil)
		k.send(t, ping)
		for {
			u, _, _ := k.recv(t)
			if u == 1<<63 {
				return
			}
		}
	})
}

// TestFakeInterruptKeepsAnswer: a request that INTERRUPT reached (the
// caller got a signal — the Go runtime's preemption signal, say) but whose
// method returned its own error, not because of the interrupt, keeps that
// error: it was EINTR, and a FUSE user_events write failing ENOENT on a
// busy machine answered EINTR, where Linux's never does.
func TestFakeInterruptKeepsAnswer(t *testing.T) {
	k, _ := newFakeKernel(t, 45)
	node, fh := k.lookupOpen(t, 10, "slowfail")
	k.send(t, req(opWrite, 20, node, append(fields(fh, uint64(0), uint32(1), uint32(0), uint64(0), uint32(0), uint32(0)), "x"...)))
	k.fs.waitEvent(t, "slowfail-write")
	k.send(t, req(opInterrupt, 21, 0, fields(uint64(20))))
	if u, e, _ := k.recv(t); u != 20 || e != unix.ENOENT {
		t.Errorf("the interrupted WRITE that failed on its own answered %d %v, want ENOENT", u, e)
	}
}
