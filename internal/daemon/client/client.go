package client

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// Conn is one connection to a daemon: one open user_events_data there,
// plus tracefs access. Its calls are safe for concurrent use; they are
// serialised on the connection, each waiting for its reply.
type Conn struct {
	fd      int
	path    string
	pid     int32
	perfmon bool
	tracer  bool
	rings   int // R: the rings of a ring set the daemon takes; 0 before sets

	mu     sync.Mutex
	closed bool
	rbuf   [8192]byte // replies to everything but data reads
}

// Arena is the enable-word memory a client shares with the daemon: a memfd
// sealed against shrinking, mapped at Addr for Size bytes in the client.
type Arena struct {
	FD   int
	Addr uint64
	Size uint64
}

// Dial connects to the daemon at path (wire.DefaultSocket() when empty) and
// shakes hands, sharing arena if it is not nil. The connection's
// descriptor is blocking: calls wait in the kernel, not in Go's poller.
// A socket this user may not connect to is a *PermissionError naming its
// owner, group and mode; a daemon running as a user this client does not
// trust (see checkPeer) is an *IdentityError, found before anything is
// sent.
func Dial(path string, arena *Arena) (*Conn, error) {
	if path == "" {
		path = wire.DefaultSocket()
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		if err == unix.EACCES {
			return nil, permissionError(path)
		}
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if err := checkPeer(fd, path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	c := &Conn{fd: fd, path: path}
	hello := make([]byte, 0, wire.HelloSize)
	hello = wire.AppendHeader(hello, wire.OpHello, 0, 0)
	hello = append(hello, wire.HelloMagic...)
	hello = wire.LE.AppendUint32(hello, wire.Version)
	hello = wire.LE.AppendUint32(hello, 0)
	var oob []byte
	if arena != nil {
		hello = wire.LE.AppendUint64(hello, arena.Addr)
		hello = wire.LE.AppendUint64(hello, arena.Size)
		oob = unix.UnixRights(arena.FD)
	} else {
		hello = wire.LE.AppendUint64(hello, 0)
		hello = wire.LE.AppendUint64(hello, 0)
	}
	err = unix.Sendmsg(fd, hello, oob, nil, 0)
	for err == unix.EINTR {
		err = unix.Sendmsg(fd, hello, oob, nil, 0)
	}
	if err != nil {
		// A daemon that refuses the connection (too many of this user's,
		// or of everyone's) answers why and closes before it reads the
		// Hello: the reason waits to be read.
		if err == unix.EPIPE || err == unix.ECONNRESET {
			if r, rerr := c.recv(c.rbuf[:]); rerr == nil {
				if _, _, perr := wire.ParseResult(r); perr != nil {
					err = perr
				}
			}
		}
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: hello: %w", path, err)
	}
	r, err := c.recv(c.rbuf[:])
	if err == unix.ECONNRESET {
		// The daemon refused the connection and closed it with the Hello
		// unread: the reset is reported first, then its reason.
		if r2, err2 := c.recv(c.rbuf[:]); err2 == nil {
			r, err = r2, nil
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if h, _ := wire.ParseHeader(r); h.Op != wire.OpHelloOK || len(r) < wire.HeaderSize+12 {
		_, _, err := wire.ParseResult(r)
		if err == nil {
			err = wire.ErrProtocol
		}
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	c.pid = int32(wire.LE.Uint32(r[wire.HeaderSize+4:]))
	c.perfmon = wire.LE.Uint32(r[wire.HeaderSize+8:])&wire.HelloPerfmon != 0
	c.tracer = wire.LE.Uint32(r[wire.HeaderSize+8:])&wire.HelloTracer != 0
	if len(r) >= wire.HeaderSize+16 {
		c.rings = int(wire.LE.Uint32(r[wire.HeaderSize+12:]))
	}
	return c, nil
}

// Rings is how many rings a ring set shared with this daemon has (its
// drainers: ShareRingSet), 0 when the daemon predates ring sets.
func (c *Conn) Rings() int { return c.rings }

// Path is the socket the client is connected to.
func (c *Conn) Path() string { return c.path }

// PerfmonCapable reports whether the daemon counts the caller as
// perfmon_capable (allowed PERSIST and dynamic_events changes).
func (c *Conn) PerfmonCapable() bool { return c.perfmon }

// Tracer reports whether the daemon counts the caller as a tracer, who may
// control tracing and read others' records (see the package doc, "Who may
// do what"). A daemon before the access model says false.
func (c *Conn) Tracer() bool { return c.tracer }

// Close closes the connection: the daemon closes the user_events_data it
// stood for. A call blocked in a read returns.
//
// Like close(2) of the kernel's file, it returns once that is done — the
// file's references to its events dropped (user_events_release), and its
// sessions closed; when it was the process's last connection, also the
// process's enablers, as at exit — so that what follows, on any
// connection, sees them gone. It tells the daemon it is done sending and
// waits for the daemon to hang up, which it does after releasing them (at
// most closeWait).
func (c *Conn) Close() error {
	// SHUT_WR, not RDWR: the daemon sees the end of our messages (which
	// also ends a read it is blocked in for us); our side can still read
	// its hang-up.
	unix.Shutdown(c.fd, unix.SHUT_WR)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	tv := unix.NsecToTimeval(closeWait.Nanoseconds())
	unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var buf [64]byte
	for {
		// Replies still on their way are discarded; 0 is the hang-up.
		n, err := unix.Read(c.fd, buf[:])
		if n == 0 || (err != nil && err != unix.EINTR) {
			break
		}
	}
	return unix.Close(c.fd)
}

// Hangup returns a channel that is closed when the daemon hangs up on this
// connection: it exited, or dropped the client — or Close ended the
// connection. Nothing else tells a client that only holds registrations,
// and sends nothing, that they are gone. Each call watches on a thread of
// its own, on a duplicate of the descriptor that it closes when the
// hang-up comes, which Close brings about.
func (c *Conn) Hangup() <-chan struct{} {
	done := make(chan struct{})
	c.mu.Lock()
	fd, err := -1, error(unix.EBADF)
	if !c.closed {
		fd, err = unix.FcntlInt(uintptr(c.fd), unix.F_DUPFD_CLOEXEC, 0)
	}
	c.mu.Unlock()
	if err != nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		defer unix.Close(fd)
		// POLLHUP and POLLERR are always reported; POLLRDHUP is the
		// daemon's end shut for writing. Replies are not watched: they are
		// the caller's to read.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		for {
			_, err := unix.Poll(pfd, -1)
			if err == unix.EINTR {
				continue
			}
			if err != nil || pfd[0].Revents&(unix.POLLHUP|unix.POLLRDHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				return
			}
		}
	}()
	return done
}

// closeWait bounds how long Close waits for the daemon to release the
// connection's registrations.
const closeWait = 5 * time.Second

// recv receives one reply into buf. A reply longer than buf is a protocol
// error (MSG_TRUNC gives its real length).
func (c *Conn) recv(buf []byte) ([]byte, error) {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), unix.MSG_TRUNC, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return nil, e
		}
		if n == 0 {
			return nil, fmt.Errorf("the daemon closed the connection: %w", unix.ECONNRESET)
		}
		if int(n) > len(buf) {
			return nil, fmt.Errorf("reply of %d bytes: %w", n, wire.ErrProtocol)
		}
		return buf[:n], nil
	}
}

// call sends msg and returns the reply's Result.
func (c *Conn) call(msg []byte) (int64, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, nil, unix.EBADF
	}
	if err := c.send(msg); err != nil {
		return 0, nil, err
	}
	r, err := c.recv(c.rbuf[:])
	if err != nil {
		return 0, nil, err
	}
	ret, rest, err := wire.ParseResult(r)
	return ret, append([]byte(nil), rest...), err
}

func (c *Conn) send(msg []byte) error {
	for {
		_, err := unix.Write(c.fd, msg)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

// callData sends msg and returns a Data reply.
func (c *Conn) callData(msg []byte) ([]byte, error) {
	return c.callDataInto(msg, make([]byte, wire.MaxMessage))
}

// callDataInto is callData receiving into buf, of wire.MaxMessage bytes.
func (c *Conn) callDataInto(msg, buf []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, unix.EBADF
	}
	if err := c.send(msg); err != nil {
		return nil, err
	}
	r, err := c.recv(buf)
	if err != nil {
		return nil, err
	}
	if h, _ := wire.ParseHeader(r); h.Op == wire.OpData {
		return r[wire.HeaderSize:], nil
	}
	_, _, err = wire.ParseResult(r)
	if err == nil {
		err = wire.ErrProtocol
	}
	return nil, err
}

// Register is DIAG_IOCSREG: reg is the struct user_reg bytes (their size
// field says how many the daemon reads), name the string at name_args.
// It returns the write index. A return that is neither 0 nor an errno
// (the struct-size quirk) comes back as ret.
func (c *Conn) Register(reg []byte, name string, nameFault bool) (idx uint32, ret int64, err error) {
	var flags uint16
	if nameFault {
		flags = wire.FlagNameFault
	}
	msg := wire.AppendHeader(make([]byte, 0, wire.HeaderSize+4+len(reg)+len(name)), wire.OpRegister, flags, 0)
	msg = wire.LE.AppendUint32(msg, uint32(len(reg)))
	msg = append(append(msg, reg...), name...)
	ret, rest, err := c.call(msg)
	if err != nil || ret != 0 {
		return 0, ret, err
	}
	if len(rest) < 4 {
		return 0, 0, wire.ErrProtocol
	}
	return wire.LE.Uint32(rest), 0, nil
}

// Unregister is DIAG_IOCSUNREG with the struct user_unreg bytes arg.
func (c *Conn) Unregister(arg []byte) error {
	_, _, err := c.call(append(wire.AppendHeader(nil, wire.OpUnregister, 0, 0), arg...))
	return err
}

// Delete is DIAG_IOCSDEL.
func (c *Conn) Delete(name string) error {
	_, _, err := c.call(append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), name...))
	return err
}

// Writev is writev(2) on the user_events_data: iov together are [u32
// write_index][payload]. tid and cpu are who writes. It returns the
// length written, index included.
func (c *Conn) Writev(tid int32, cpu int, iov ...[]byte) (int, error) {
	var hdr [wire.HeaderSize]byte
	wire.PutHeader(hdr[:], wire.OpWrite, uint16(cpu), uint32(tid))
	if len(iov) > wire.MaxIov {
		return 0, fmt.Errorf("writev of %d slices: at most %d: %w", len(iov), wire.MaxIov, unix.EINVAL)
	}
	var vecs [wire.MaxIov + 1]unix.Iovec
	vecs[0] = unix.Iovec{Base: &hdr[0], Len: wire.HeaderSize}
	n, total := 1, 0
	for _, b := range iov {
		if len(b) > 0 {
			vecs[n] = unix.Iovec{Base: &b[0], Len: uint64(len(b))}
			n++
			total += len(b)
		}
	}
	if total == 0 {
		return 0, nil // the VFS returns 0 before user_events sees it
	}
	if total > wire.MaxWrite {
		return c.writeHead(tid, cpu, iov, total)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, unix.EBADF
	}
	var e unix.Errno
	for {
		_, _, e = unix.Syscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&vecs[0])), uintptr(n))
		if e != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(iov)
	if e != 0 {
		c.mu.Unlock()
		return 0, e
	}
	r, err := c.recv(c.rbuf[:])
	if err != nil {
		c.mu.Unlock()
		return 0, err
	}
	ret, _, err := wire.ParseResult(r)
	c.mu.Unlock()
	return int(ret), err
}

// writeHead is Writev of a write longer than a message holds: its length
// and first wire.MaxWrite-4 bytes, which is all the daemon needs of a record no
// consumer can take (WriteHead in wire.go).
func (c *Conn) writeHead(tid int32, cpu int, iov [][]byte, total int) (int, error) {
	msg := wire.LE.AppendUint32(wire.AppendHeader(make([]byte, 0, wire.MaxMessage), wire.OpWriteHead, uint16(cpu), uint32(tid)), uint32(total))
	for _, b := range iov {
		msg = append(msg, b[:min(len(b), wire.MaxMessage-len(msg))]...)
	}
	ret, _, err := c.call(msg)
	return int(ret), err
}

// File is a tracefs file open in the daemon.
type File struct {
	c      *Conn
	handle uint32
	name   string
}

// Open opens a tracefs file (path relative to the tracefs root) with
// open(2) flags.
func (c *Conn) Open(name string, flags int) (*File, error) {
	ret, _, err := c.call(append(wire.AppendHeader(nil, wire.OpOpen, 0, uint32(flags)), name...))
	if err != nil {
		return nil, err
	}
	return &File{c: c, handle: uint32(ret), name: name}, nil
}

// Read reads from the file; on trace_pipe it waits for data. Closing the
// Conn ends a wait.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	msg := wire.AppendHeader(make([]byte, 0, wire.HeaderSize+4), wire.OpRead, 0, f.handle)
	msg = wire.LE.AppendUint32(msg, uint32(min(len(p), wire.MaxMessage-wire.HeaderSize)))
	data, err := f.c.callData(msg)
	if err != nil {
		return 0, err
	}
	if len(data) == 0 {
		return 0, io.EOF
	}
	return copy(p, data), nil
}

// Write writes p to the file in one write.
func (f *File) Write(p []byte) (int, error) {
	if wire.HeaderSize+len(p) > wire.MaxMessage {
		return 0, fmt.Errorf("write of %d bytes to %s: %w", len(p), f.name, unix.EMSGSIZE)
	}
	ret, _, err := f.c.call(append(wire.AppendHeader(make([]byte, 0, wire.HeaderSize+len(p)), wire.OpWriteFile, 0, f.handle), p...))
	return int(ret), err
}

// Close closes the file.
func (f *File) Close() error {
	_, _, err := f.c.call(wire.AppendHeader(nil, wire.OpCloseFile, 0, f.handle))
	return err
}

// DirEntry is one entry of a daemon tracefs directory.
type DirEntry struct {
	Name string
	Mode fs.FileMode
}

// ReadDir lists a tracefs directory, a message's worth of entries at a
// time. A listing that fails part way (an event whose name no directory
// entry can have: see subsys.FS.ReadDir) returns the entries before the
// failure with its error, as os.ReadDir does.
func (c *Conn) ReadDir(name string) ([]DirEntry, error) {
	var out []DirEntry
	buf := make([]byte, wire.MaxMessage)
	for {
		data, err := c.callDataInto(append(wire.AppendHeader(nil, wire.OpReadDir, 0, uint32(len(out))), name...), buf)
		if err != nil {
			if out == nil {
				return nil, err
			}
			return out, err
		}
		n := len(out)
		if out, err = parseDirEntries(data, out); err != nil {
			return nil, err
		}
		if len(out) == n {
			return out, nil
		}
	}
}

// parseDirEntries appends the entries of a ReadDir reply to out: u32
// mode, name, NUL, repeated.
func parseDirEntries(data []byte, out []DirEntry) ([]DirEntry, error) {
	for len(data) > 0 {
		if len(data) < 5 {
			return nil, wire.ErrProtocol
		}
		mode := fs.FileMode(wire.LE.Uint32(data))
		data = data[4:]
		i := 0
		for i < len(data) && data[i] != 0 {
			i++
		}
		if i == len(data) {
			return nil, wire.ErrProtocol
		}
		out = append(out, DirEntry{Name: string(data[:i]), Mode: mode})
		data = data[i+1:]
	}
	return out, nil
}

// ShareRingSet shares a ring set with the daemon (the Ring request,
// version 2): its records are delivered into this connection's
// user_events_data by the daemon's drainers, ring k by drainer k. The set
// must have Rings rings; it wakes the daemon through an eventfd, made
// here.
func (c *Conn) ShareRingSet(sp *shmring.SetProducer) error {
	efd, err := sp.WakeByEventfd()
	if err == nil && sp.Len() != c.rings {
		err = unix.EINVAL // the daemon would say why
	}
	if err != nil {
		return fmt.Errorf("sharing %d rings (the daemon takes %d): %w", sp.Len(), c.rings, err)
	}
	return c.shareRing(wire.RingSet, sp.Fd(), efd)
}

// shareRing sends the Ring request of a version with the descriptors
// given.
func (c *Conn) shareRing(version uint32, fds ...int) error {
	if err := c.callRights(wire.OpRing, version, fds...); err != nil {
		return fmt.Errorf("sharing the ring: %w", err)
	}
	return nil
}

// callRights sends a request of op with arg, no body and the descriptors
// fds (SCM_RIGHTS), and returns its Result.
func (c *Conn) callRights(op uint16, arg uint32, fds ...int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return unix.EBADF
	}
	var msg [wire.HeaderSize]byte
	wire.PutHeader(msg[:], op, 0, arg)
	oob := unix.UnixRights(fds...)
	err := unix.Sendmsg(c.fd, msg[:], oob, nil, 0)
	for err == unix.EINTR {
		err = unix.Sendmsg(c.fd, msg[:], oob, nil, 0)
	}
	if err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	r, err := c.recv(c.rbuf[:])
	if err != nil {
		return err
	}
	_, _, err = wire.ParseResult(r)
	return err
}

// FlushRing asks the daemon to deliver everything this client has
// published into its ring so far, and waits until it has: the
// RingFlush request. A client that must publish something into a full
// ring — the count of records it dropped, before it closes — makes room
// with it.
func (c *Conn) FlushRing() error {
	_, _, err := c.call(wire.AppendHeader(nil, wire.OpRingFlush, 0, 0))
	return err
}

// Stats returns the daemon's counts as "name value" lines (Stats.AppendText),
// the per-uid ones last: all of them for a tracer, its own for anyone else.
// A daemon that keeps none answers EPROTO.
func (c *Conn) Stats() (string, error) {
	b, err := c.callData(wire.AppendHeader(nil, wire.OpStats, 0, 0))
	if err != nil {
		return "", fmt.Errorf("daemon stats: %w", err)
	}
	return string(b), nil
}

// ServeFUSE asks the daemon to serve its tracefs tree on dev, a /dev/fuse
// descriptor already mounted: the ServeFUSE request. The daemon keeps serving
// after this client goes, until the mount goes or the daemon stops.
func (c *Conn) ServeFUSE(dev *os.File) error {
	if err := c.callRights(wire.OpServeFUSE, 0, int(dev.Fd())); err != nil {
		return fmt.Errorf("handing the FUSE device to the daemon: %w", err)
	}
	return nil
}
