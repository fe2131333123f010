package fuse

import (
	"context"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// dirCountFS is a testFS that counts its open directories (DirOpener) and
// refuses the third.
type dirCountFS struct {
	*testFS
	open atomic.Int32
}

func (f *dirCountFS) OpenDir(ctx context.Context, r *Request, path string) (func(), error) {
	if f.open.Add(1) > 2 {
		f.open.Add(-1)
		return nil, unix.EMFILE
	}
	var once atomic.Bool
	return func() {
		if once.Swap(true) {
			panic("a directory released twice")
		}
		f.open.Add(-1)
	}, nil
}

// TestFakeDirOpener: a DirOpener is told of each OPENDIR, its error is the
// answer, and each directory it allowed is released once: at RELEASEDIR,
// or at the connection's end for one the kernel never released.
func TestFakeDirOpener(t *testing.T) {
	fs := &dirCountFS{testFS: newTestFS()}
	k, _ := newFakeKernelOf(t, 45, fs, fs.testFS)
	opendir := func(unique uint64) (uint64, unix.Errno) {
		e, out := k.call(t, req(opOpendir, unique, rootID, fields(uint32(0), uint32(0))))
		if e != 0 {
			return 0, e
		}
		return le.Uint64(out), 0
	}
	a, e1 := opendir(2)
	_, e2 := opendir(4)
	_, e3 := opendir(6)
	if e1 != 0 || e2 != 0 || e3 != unix.EMFILE || fs.open.Load() != 2 {
		t.Fatalf("three OPENDIRs: %v %v %v, %d open; want 0 0 EMFILE, 2", e1, e2, e3, fs.open.Load())
	}
	if e, _ := k.call(t, req(opReleasedir, 8, rootID, fields(a, uint32(0), uint32(0), uint64(0)))); e != 0 || fs.open.Load() != 1 {
		t.Fatalf("RELEASEDIR: %v, %d open", e, fs.open.Load())
	}
	if _, e := opendir(10); e != 0 {
		t.Fatalf("OPENDIR after a release: %v", e)
	}
	unix.Close(k.fd) // the connection ends with two directories open
	k.c.Wait()
	if n := fs.open.Load(); n != 0 {
		t.Errorf("%d directories not released at the connection's end", n)
	}
	k.fd = -1
}

// waitFS is a testFS whose pipe's handles are ReadWaiters: WaitRead blocks
// until wake is closed, and Read records the buffer's size.
type waitFS struct {
	*testFS
	wake     chan struct{}
	waited   atomic.Int32
	readSize atomic.Int32
}

type waitHandle struct {
	*testHandle
	fs *waitFS
}

func (f *waitFS) Open(ctx context.Context, r *Request, path string, flags uint32) (Handle, error) {
	h, err := f.testFS.Open(ctx, r, path, flags)
	if err != nil {
		return nil, err
	}
	return &waitHandle{testHandle: h.(*testHandle), fs: f}, nil
}

func (h *waitHandle) WaitRead(ctx context.Context, r *Request) error {
	h.fs.waited.Add(1)
	h.fs.event("waiting")
	select {
	case <-h.fs.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *waitHandle) Read(ctx context.Context, r *Request, dst []byte, off int64) (int, error) {
	h.fs.readSize.Store(int32(len(dst)))
	return copy(dst, "x"), nil
}

// TestFakeReadWaiter: a ReadWaiter's READ waits in WaitRead, before any
// buffer is taken or Read called; INTERRUPT there answers EINTR without a
// Read; once WaitRead returns, Read gets the buffer.
func TestFakeReadWaiter(t *testing.T) {
	fs := &waitFS{testFS: newTestFS(), wake: make(chan struct{})}
	k, _ := newFakeKernelOf(t, 45, fs, fs.testFS)
	e, entry := k.call(t, req(opLookup, 2, rootID, fields("hello")))
	if e != 0 {
		t.Fatal(e)
	}
	node := le.Uint64(entry)
	e, open := k.call(t, req(opOpen, 4, node, fields(uint32(0), uint32(0))))
	if e != 0 {
		t.Fatal(e)
	}
	fh := le.Uint64(open)
	read := func(unique uint64) []byte {
		return req(opRead, unique, node, fields(fh, uint64(0), uint32(4096), uint32(0), uint64(0), uint32(0), uint32(0)))
	}
	k.send(t, read(6))
	fs.waitEvent(t, "waiting")
	k.send(t, req(opInterrupt, 7, 0, fields(uint64(6))))
	if u, e, _ := k.recv(t); u != 6 || e != unix.EINTR || fs.readSize.Load() != 0 {
		t.Fatalf("an interrupted wait: reply to %d %v, Read given %d bytes; want 6 EINTR, no Read", u, e, fs.readSize.Load())
	}
	k.send(t, read(8))
	fs.waitEvent(t, "waiting")
	close(fs.wake)
	if u, e, body := k.recv(t); u != 8 || e != 0 || string(body) != "x" || fs.readSize.Load() != 4096 {
		t.Fatalf("a read after the wait: reply to %d %v %q, Read given %d bytes", u, e, body, fs.readSize.Load())
	}
}
