package fuse

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// backedFS is a root with one file, "ring", whose handles are Backed by
// one memfd of two pages.
type backedFS struct {
	memfd    int
	mem      []byte
	reads    atomic.Int32
	released atomic.Int32
}

func (f *backedFS) Stat(ctx context.Context, path string) (Attr, error) {
	switch path {
	case "":
		return Attr{Mode: unix.S_IFDIR | 0o755}, nil
	case "ring":
		return Attr{Mode: unix.S_IFREG | 0o600}, nil
	}
	return Attr{}, unix.ENOENT
}

func (f *backedFS) ReadDir(ctx context.Context, path string) ([]DirEntry, error) {
	return []DirEntry{{Name: "ring", Mode: unix.S_IFREG}}, nil
}

func (f *backedFS) Open(ctx context.Context, r *Request, path string, flags uint32) (Handle, error) {
	if path != "ring" {
		return nil, unix.EISDIR
	}
	return &backedHandle{f}, nil
}

type backedHandle struct{ f *backedFS }

func (h *backedHandle) Read(ctx context.Context, r *Request, dst []byte, off int64) (int, error) {
	h.f.reads.Add(1)
	return copy(dst, "from the handle"), nil
}
func (h *backedHandle) Write(ctx context.Context, r *Request, data []byte, off int64) (int, error) {
	return 0, unix.EINVAL
}
func (h *backedHandle) Release() error { h.f.released.Add(1); return nil }
func (h *backedHandle) Backing() int   { return h.f.memfd }

// TestPassthroughMmap: a Backed handle's file maps its memfd — the same
// pages, both ways, with no request to the server — while read(2) still
// reaches the handle (FOPEN_DIRECT_IO overrides passthrough), and the
// handle is released when the file is closed.
func TestPassthroughMmap(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("FUSE passthrough needs CAP_SYS_ADMIN (FUSE_DEV_IOC_BACKING_OPEN)")
	}
	bin := buildHelper(t)
	fd, err := unix.MemfdCreate("backed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	pg := unix.Getpagesize()
	if err := unix.Ftruncate(fd, int64(2*pg)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 2*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	binary.LittleEndian.PutUint64(mem, 0xfeedface12345678)
	fs := &backedFS{memfd: fd, mem: mem}
	c, dir := mountTestOpts(t, fs, Options{FSName: "uetrace-test", Passthrough: true, Debug: debugf()})
	out := strings.TrimSpace(mustRun(t, bin, "mmap", filepath.Join(dir, "ring")))
	if !c.Passthrough() {
		if strings.Contains(out, "errno=") {
			t.Skipf("this kernel grants no FUSE passthrough (6.9 or later, CONFIG_FUSE_PASSTHROUGH): %s", out)
		}
	}
	if want := "first=feedface12345678 read=from the handle"; out != want {
		t.Errorf("the helper said %q, want %q", out, want)
	}
	if got := string(mem[pg : pg+5]); got != "child" {
		t.Errorf("the memfd's second page starts %q; the helper wrote \"child\" through its mapping", got)
	}
	if fs.reads.Load() != 1 {
		t.Errorf("%d reads reached the handle, want 1", fs.reads.Load())
	}
	deadline := time.Now().Add(childTimeout)
	for fs.released.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if fs.released.Load() != 1 {
		t.Errorf("released %d times, want 1", fs.released.Load())
	}
}

// TestPassthroughRefused: without passthrough (not asked for at INIT, as
// for a server that cannot use it), a Backed handle's open fails with
// EOPNOTSUPP and the handle is released, never opened without its ring.
func TestPassthroughRefused(t *testing.T) {
	bin := buildHelper(t)
	fd, err := unix.MemfdCreate("backed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fs := &backedFS{memfd: fd}
	c, dir := mountTestOpts(t, fs, Options{FSName: "uetrace-test", Debug: debugf()})
	out, err := run(t, bin, "mmap", filepath.Join(dir, "ring"))
	if err == nil || !strings.Contains(err.Error(), "Operation not supported") {
		t.Errorf("open of a Backed file without passthrough: %q, %v; want EOPNOTSUPP", out, err)
	}
	if c.Passthrough() {
		t.Error("Passthrough() without Options.Passthrough")
	}
	if fs.released.Load() != 1 {
		t.Errorf("the refused handle was released %d times, want 1", fs.released.Load())
	}
}
