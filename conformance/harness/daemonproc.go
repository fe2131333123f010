package harness

import (
	"errors"
	"io"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// daemonProc is this OS process as a client of a uetrace daemon: every
// user_events_data is a connection sharing the process's enable page (a
// memfd), tracefs goes through one more connection.
type daemonProc struct {
	socket  string
	mem     *enablePage
	memfd   int
	spawner spawner
	fsConn  *client.Conn
	conns   []*client.Conn
	// ring: the daemon-ring backend, whose user_events_data connections
	// write through rings (daemonring.go); ringFiles are those opened.
	ring      bool
	ringFiles []*ringData
}

func newDaemonProc(socket string, spawn spawner, ring bool) (*daemonProc, error) {
	mem, fd, err := newEnablePage(true)
	if err != nil {
		return nil, err
	}
	d := &daemonProc{socket: socket, mem: mem, memfd: fd, spawner: spawn, ring: ring}
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	d.fsConn = c
	return d, nil
}

func (d *daemonProc) dial() (*client.Conn, error) {
	c, err := client.Dial(d.socket, &client.Arena{FD: d.memfd, Addr: d.mem.base(), Size: uint64(len(d.mem.mem))})
	if err != nil {
		return nil, err
	}
	d.conns = append(d.conns, c)
	return c, nil
}

func (d *daemonProc) page() []byte                       { return d.mem.mem }
func (d *daemonProc) base() uint64                       { return d.mem.base() }
func (d *daemonProc) special(name string) (uint64, bool) { return d.mem.special(name) }
func (d *daemonProc) fs() fileSystem                     { return daemonFS{d.fsConn} }

// protect changes this process's mapping; the daemon writes the memfd
// through its own, which a client's mprotect does not reach.
func (d *daemonProc) protect(writable bool) error {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	return unix.Mprotect(d.mem.mem, prot)
}

func (d *daemonProc) open(mode int) (dataFile, error) {
	if mode != 0 {
		return nil, errUnsupported // a connection is always read-write
	}
	c, err := d.dial()
	if err != nil {
		return nil, err
	}
	if d.ring {
		return d.openRing(c)
	}
	return &daemonData{c: c}, nil
}

func (d *daemonProc) child(steps []Step) ([]byte, error) { return d.spawner(source(steps)) }

func (d *daemonProc) exit() {
	for _, c := range d.conns {
		c.Close()
	}
}

type daemonData struct{ c *client.Conn }

func (d *daemonData) reg(raw []byte, name string, nameFault bool) (uint32, error) {
	name, _, _ = strings.Cut(name, "\x00")
	idx, ret, err := d.c.Register(raw, name, nameFault)
	if err != nil {
		return 0, err
	}
	if ret != 0 {
		if ret < 0 && ret >= -4095 {
			return 0, unix.Errno(-ret)
		}
		return 0, abi.RetError(int(ret))
	}
	return idx, nil
}

func (d *daemonData) unreg(raw []byte) error { return d.c.Unregister(raw) }

func (d *daemonData) del(name string, fault bool) error {
	if fault {
		return errUnsupported
	}
	name, _, _ = strings.Cut(name, "\x00")
	return d.c.Delete(name)
}

func (d *daemonData) writev(iov []iovec) (int, error) {
	bufs := make([][]byte, len(iov))
	for i, v := range iov {
		if v.fault != 0 {
			return 0, errUnsupported
		}
		bufs[i] = v.b
	}
	if len(bufs) > wire.MaxIov {
		return 0, errUnsupported
	}
	return d.c.Writev(int32(unix.Gettid()), 0, bufs...)
}

// write is a writev of one buffer: the daemon's protocol has no write(2)
// of its own, and for a non-zero position none at all.
func (d *daemonData) write(b []byte, off int64) (int, error) {
	if off != 0 {
		return 0, errUnsupported
	}
	return d.c.Writev(int32(unix.Gettid()), 0, b)
}

func (d *daemonData) close() error { return d.c.Close() }

type daemonFS struct{ c *client.Conn }

func (f daemonFS) read(p string) ([]byte, error) {
	h, err := f.c.Open(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return io.ReadAll(h)
}

func (f daemonFS) write(p string, flag int, data []byte) (int, error) {
	h, err := f.c.Open(p, unix.O_WRONLY|flag)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	if data == nil {
		return 0, nil
	}
	return h.Write(data)
}

func (f daemonFS) readDir(p string) ([]string, error) {
	ents, err := f.c.ReadDir(p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, nil
}

func (f daemonFS) exists(p string) bool {
	if _, err := f.c.ReadDir(p); err == nil {
		return true
	}
	h, err := f.c.Open(p, unix.O_RDONLY)
	if err == nil {
		h.Close()
		return true
	}
	// A write-only file (none in tracefs's user_events part) or a
	// directory that cannot be listed still exists unless ENOENT.
	return !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTDIR)
}

type daemonPerf struct {
	c     *client.Conn
	s     *client.Session
	event string
}

func (p *daemonPerf) setFilter(text string) error { return p.s.SetFilter(p.event, text) }

func (d *daemonProc) perf(system, name string) (perfReader, error) {
	c, err := client.Dial(d.socket, nil)
	if err != nil {
		return nil, err
	}
	s, err := c.NewSession(client.SessionOptions{})
	if err != nil {
		c.Close()
		return nil, err
	}
	names, err := s.Attach(system+":"+name, false)
	if err == nil && len(names) == 0 {
		err = unix.ENOENT
	}
	if err != nil {
		s.Close()
		c.Close()
		return nil, err
	}
	d.conns = append(d.conns, c)
	return &daemonPerf{c: c, s: s, event: names[0]}, nil
}

func (p *daemonPerf) read() ([][]byte, error) {
	var out [][]byte
	for {
		recs, _, _, err := p.s.Poll(nil)
		if err != nil {
			return out, err
		}
		for _, r := range recs {
			out = append(out, append([]byte(nil), r.Raw[min(8, len(r.Raw)):]...))
		}
		if len(recs) == 0 {
			return out, nil
		}
	}
}

func (p *daemonPerf) close() error {
	p.s.Close()
	return p.c.Close()
}
