package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/subsys"
)

// root is the caller's credential: the driver runs its scenarios as root.
var root = subsys.Cred{PerfmonCapable: true}

// enablePage is a process's enable memory for the uetrace backends: one
// page of this OS process, written with the atomic 64-bit operations the
// kernel uses. Addresses outside it fail as unmapped memory does.
type enablePage struct {
	mem      []byte
	readonly atomic.Bool // protect readonly: the kernel could not write it either
}

func newEnablePage(shared bool) (*enablePage, int, error) {
	pg := os.Getpagesize()
	if !shared {
		mem, err := unix.Mmap(-1, 0, pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		return &enablePage{mem: mem}, -1, err
	}
	fd, err := unix.MemfdCreate("ueconform", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, -1, err
	}
	if err := unix.Ftruncate(fd, int64(pg)); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	mem, err := unix.Mmap(fd, 0, pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	return &enablePage{mem: mem}, fd, nil
}

func (e *enablePage) base() uint64 { return uint64(uintptr(unsafe.Pointer(&e.mem[0]))) }

func (e *enablePage) special(name string) (uint64, bool) { return specialAddr(e.base(), name) }

// specialAddr resolves addr=null|kernel|unmapped|readonly for an enable
// page at base. The two pages after it are, on the kernel backend, mapped
// PROT_NONE and PROT_READ; the uetrace backends never map them, so writing
// either fails there as in Linux.
func specialAddr(base uint64, name string) (uint64, bool) {
	pg := uint64(os.Getpagesize())
	switch name {
	case "null":
		return 0, true
	case "kernel":
		return 0xffff800000000000, true
	case "unmapped":
		return base + pg, true
	case "readonly":
		return base + 2*pg, true
	}
	return 0, false
}

func (e *enablePage) SetBit(addr uint64, bit uint, on bool) error {
	b := e.base()
	if addr < b || addr+8 > b+uint64(len(e.mem)) {
		return fmt.Errorf("address %#x outside the enable page: %w", addr, unix.EFAULT)
	}
	if e.readonly.Load() {
		return fmt.Errorf("address %#x is read-only: %w", addr, unix.EFAULT)
	}
	w := (*uint64)(unsafe.Pointer(&e.mem[addr-b]))
	if on {
		atomic.OrUint64(w, 1<<bit)
	} else {
		atomic.AndUint64(w, ^uint64(1<<bit))
	}
	return nil
}

// subsysProc is one process of an in-process Subsystem.
type subsysProc struct {
	sys   *subsys.Subsystem
	mem   *enablePage
	p     *subsys.Process
	files []*subsysData
	perfs []*subsysPerf
}

func newSubsysProc(sys *subsys.Subsystem) (*subsysProc, error) {
	mem, _, err := newEnablePage(false)
	if err != nil {
		return nil, err
	}
	return &subsysProc{sys: sys, mem: mem, p: sys.NewProcess(mem)}, nil
}

func (s *subsysProc) page() []byte                       { return s.mem.mem }
func (s *subsysProc) base() uint64                       { return s.mem.base() }
func (s *subsysProc) special(name string) (uint64, bool) { return s.mem.special(name) }
func (s *subsysProc) fs() fileSystem                     { return subsysFS{s.sys.FS()} }

// open: a subsys File has no open mode (the daemon's connections and
// userevents' files are always read-write), so asking for one is unsupported.
func (s *subsysProc) protect(writable bool) error {
	s.mem.readonly.Store(!writable)
	return nil
}

func (s *subsysProc) open(mode int) (dataFile, error) {
	if mode != 0 {
		return nil, errUnsupported
	}
	f := &subsysData{s: s, f: s.sys.Open()}
	s.files = append(s.files, f)
	return f, nil
}

func (s *subsysProc) child(steps []Step) ([]byte, error) {
	c, err := newSubsysProc(s.sys)
	if err != nil {
		return nil, err
	}
	return runProcess(c, steps), nil
}

// exit is what the kernel does when the process exits: its files close,
// its perf events close, its enablers go.
func (s *subsysProc) exit() {
	for _, f := range s.files {
		f.close()
	}
	for _, p := range s.perfs {
		p.close()
	}
	s.p.Release()
	unix.Munmap(s.mem.mem)
}

type subsysData struct {
	s      *subsysProc
	f      *subsys.File
	closed bool
}

func (d *subsysData) reg(raw []byte, name string, nameFault bool) (uint32, error) {
	name, _, _ = strings.Cut(name, "\x00")
	return d.f.Register(d.s.p, root, subsys.RegisterArgs{Reg: raw, Name: name, NameFault: nameFault})
}

func (d *subsysData) unreg(raw []byte) error { return d.f.Unregister(d.s.p, raw) }

func (d *subsysData) del(name string, fault bool) error {
	if fault {
		return errUnsupported
	}
	name, _, _ = strings.Cut(name, "\x00")
	return d.f.Delete(name, root)
}

func writer() subsys.Writer {
	return subsys.Writer{PID: int32(unix.Gettid()), TGID: int32(os.Getpid()), Comm: comm(), CPU: 0}
}

// comm is this process's name as the kernel's trace shows it.
var comm = sync.OnceValue(func() string {
	c, err := procfs.Comm(os.Getpid())
	if err != nil {
		return "ueconform"
	}
	return c
})

func (d *subsysData) writev(iov []iovec) (int, error) {
	bufs := make([][]byte, len(iov))
	for i, v := range iov {
		if v.fault != 0 {
			return 0, errUnsupported
		}
		bufs[i] = v.b
	}
	return d.f.Writev(writer(), bufs...)
}

func (d *subsysData) write(b []byte, off int64) (int, error) {
	return d.f.Write(writer(), b, off)
}

func (d *subsysData) close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	return d.f.Close()
}

type subsysFS struct{ fs *subsys.FS }

func (f subsysFS) read(p string) ([]byte, error) { return f.fs.ReadFile(p, root) }

func (f subsysFS) write(p string, flag int, data []byte) (int, error) {
	h, err := f.fs.Open(p, unix.O_WRONLY|flag, root)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	if data == nil {
		return 0, nil
	}
	return h.Write(data)
}

func (f subsysFS) readDir(p string) ([]string, error) {
	ents, err := f.fs.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, nil
}

func (f subsysFS) exists(p string) bool {
	_, err := f.fs.Stat(p)
	return err == nil
}

type subsysPerf struct {
	s      *subsys.Session
	ev     *subsys.Event
	closed bool
}

func (p *subsysPerf) setFilter(text string) error { return p.s.SetFilter(p.ev, text) }

func (s *subsysProc) perf(system, name string) (perfReader, error) {
	ev := s.sys.Lookup(system, name)
	if ev == nil {
		return nil, unix.ENOENT
	}
	ss := s.sys.NewSession(subsys.SessionOptions{})
	if err := ss.Attach(ev); err != nil {
		ss.Close()
		return nil, err
	}
	p := &subsysPerf{s: ss, ev: ev}
	s.perfs = append(s.perfs, p)
	return p, nil
}

func (p *subsysPerf) read() ([][]byte, error) {
	var out [][]byte
	buf := make([]byte, 1<<20)
	// Writes reach the session before they return, so everything written
	// is queued already: a done context makes Read take what is there and
	// never wait for more (a timeout here would be a race on a slow machine).
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		recs, err := p.s.Read(done, buf, nil)
		for _, r := range recs {
			out = append(out, append([]byte(nil), r.Raw[min(8, len(r.Raw)):]...))
		}
		if err != nil || len(recs) == 0 {
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
				return out, err
			}
			return out, nil
		}
	}
}

func (p *subsysPerf) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	return p.s.Close()
}
