package daemon

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/shmring"
)

// Client is one connection to a daemon: one open user_events_data there,
// plus tracefs access. Its calls are safe for concurrent use; they are
// serialised on the connection, each waiting for its reply.
type Client struct {
	fd      int
	path    string
	pid     int32
	perfmon bool
	tracer  bool

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

// Dial connects to the daemon at path (DefaultSocket() when empty) and
// shakes hands, sharing arena if it is not nil. The connection's
// descriptor is blocking: calls wait in the kernel, not in Go's poller.
// A socket this user may not connect to is a *PermissionError naming its
// owner, group and mode; a daemon running as a user this client does not
// trust (see checkPeer) is an *IdentityError, found before anything is
// sent.
func Dial(path string, arena *Arena) (*Client, error) {
	if path == "" {
		path = DefaultSocket()
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
	c := &Client{fd: fd, path: path}
	hello := make([]byte, 0, helloSize)
	hello = appendHeader(hello, opHello, 0, 0)
	hello = append(hello, helloMagic...)
	hello = le.AppendUint32(hello, Version)
	hello = le.AppendUint32(hello, 0)
	var oob []byte
	if arena != nil {
		hello = le.AppendUint64(hello, arena.Addr)
		hello = le.AppendUint64(hello, arena.Size)
		oob = unix.UnixRights(arena.FD)
	} else {
		hello = le.AppendUint64(hello, 0)
		hello = le.AppendUint64(hello, 0)
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
				if _, _, perr := parseResult(r); perr != nil {
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
	if h, _ := parseHeader(r); h.op != opHelloOK || len(r) < headerSize+12 {
		_, _, err := parseResult(r)
		if err == nil {
			err = errProtocol
		}
		unix.Close(fd)
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	c.pid = int32(le.Uint32(r[headerSize+4:]))
	c.perfmon = le.Uint32(r[headerSize+8:])&helloPerfmon != 0
	c.tracer = le.Uint32(r[headerSize+8:])&helloTracer != 0
	return c, nil
}

// Path is the socket the client is connected to.
func (c *Client) Path() string { return c.path }

// PerfmonCapable reports whether the daemon counts the caller as
// perfmon_capable (allowed PERSIST and dynamic_events changes).
func (c *Client) PerfmonCapable() bool { return c.perfmon }

// Tracer reports whether the daemon counts the caller as a tracer, who may
// control tracing and read others' records (see the package doc, "Who may
// do what"). A daemon before the access model says false.
func (c *Client) Tracer() bool { return c.tracer }

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
func (c *Client) Close() error {
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
		n, _, err := unix.Recvfrom(c.fd, buf[:], 0)
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
func (c *Client) Hangup() <-chan struct{} {
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
func (c *Client) recv(buf []byte) ([]byte, error) {
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
			return nil, fmt.Errorf("reply of %d bytes: %w", n, errProtocol)
		}
		return buf[:n], nil
	}
}

// call sends msg and returns the reply's Result.
func (c *Client) call(msg []byte) (int64, []byte, error) {
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
	ret, rest, err := parseResult(r)
	return ret, append([]byte(nil), rest...), err
}

func (c *Client) send(msg []byte) error {
	for {
		_, err := unix.Write(c.fd, msg)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

// callData sends msg and returns a Data reply.
func (c *Client) callData(msg []byte) ([]byte, error) {
	return c.callDataInto(msg, make([]byte, MaxMessage))
}

// callDataInto is callData receiving into buf, of MaxMessage bytes.
func (c *Client) callDataInto(msg, buf []byte) ([]byte, error) {
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
	if h, _ := parseHeader(r); h.op == opData {
		return r[headerSize:], nil
	}
	_, _, err = parseResult(r)
	if err == nil {
		err = errProtocol
	}
	return nil, err
}

// Register is DIAG_IOCSREG: reg is the struct user_reg bytes (their size
// field says how many the daemon reads), name the string at name_args.
// It returns the write index. A return that is neither 0 nor an errno
// (the struct-size quirk) comes back as ret.
func (c *Client) Register(reg []byte, name string, nameFault bool) (idx uint32, ret int64, err error) {
	var flags uint16
	if nameFault {
		flags = flagNameFault
	}
	msg := appendHeader(make([]byte, 0, headerSize+4+len(reg)+len(name)), opRegister, flags, 0)
	msg = le.AppendUint32(msg, uint32(len(reg)))
	msg = append(append(msg, reg...), name...)
	ret, rest, err := c.call(msg)
	if err != nil || ret != 0 {
		return 0, ret, err
	}
	if len(rest) < 4 {
		return 0, 0, errProtocol
	}
	return le.Uint32(rest), 0, nil
}

// Unregister is DIAG_IOCSUNREG with the struct user_unreg bytes arg.
func (c *Client) Unregister(arg []byte) error {
	_, _, err := c.call(append(appendHeader(nil, opUnregister, 0, 0), arg...))
	return err
}

// Delete is DIAG_IOCSDEL.
func (c *Client) Delete(name string) error {
	_, _, err := c.call(append(appendHeader(nil, opDelete, 0, 0), name...))
	return err
}

// MaxIov is how many slices Writev takes: its iovecs are a fixed array on
// the stack, so that neither they nor the caller's buffers escape.
const MaxIov = 16

// Writev is writev(2) on the user_events_data: iov together are [u32
// write_index][payload]. tid and cpu are who writes. It returns the
// length written, index included.
func (c *Client) Writev(tid int32, cpu int, iov ...[]byte) (int, error) {
	var hdr [headerSize]byte
	putHeader(hdr[:], opWrite, uint16(cpu), uint32(tid))
	if len(iov) > MaxIov {
		return 0, fmt.Errorf("writev of %d slices: at most %d: %w", len(iov), MaxIov, unix.EINVAL)
	}
	var vecs [MaxIov + 1]unix.Iovec
	vecs[0] = unix.Iovec{Base: &hdr[0], Len: headerSize}
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
	if total > MaxWrite {
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
	ret, _, err := parseResult(r)
	c.mu.Unlock()
	return int(ret), err
}

// writeHead is Writev of a write longer than a message holds: its length
// and first MaxWrite-4 bytes, which is all the daemon needs of a record no
// consumer can take (WriteHead in wire.go).
func (c *Client) writeHead(tid int32, cpu int, iov [][]byte, total int) (int, error) {
	msg := le.AppendUint32(appendHeader(make([]byte, 0, MaxMessage), opWriteHead, uint16(cpu), uint32(tid)), uint32(total))
	for _, b := range iov {
		msg = append(msg, b[:min(len(b), MaxMessage-len(msg))]...)
	}
	ret, _, err := c.call(msg)
	return int(ret), err
}

// File is a tracefs file open in the daemon.
type File struct {
	c      *Client
	handle uint32
	name   string
}

// Open opens a tracefs file (path relative to the tracefs root) with
// open(2) flags.
func (c *Client) Open(name string, flags int) (*File, error) {
	ret, _, err := c.call(append(appendHeader(nil, opOpen, 0, uint32(flags)), name...))
	if err != nil {
		return nil, err
	}
	return &File{c: c, handle: uint32(ret), name: name}, nil
}

// Read reads from the file; on trace_pipe it waits for data. Closing the
// Client ends a wait.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	msg := appendHeader(make([]byte, 0, headerSize+4), opRead, 0, f.handle)
	msg = le.AppendUint32(msg, uint32(min(len(p), MaxMessage-headerSize)))
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
	if headerSize+len(p) > MaxMessage {
		return 0, fmt.Errorf("write of %d bytes to %s: %w", len(p), f.name, unix.EMSGSIZE)
	}
	ret, _, err := f.c.call(append(appendHeader(make([]byte, 0, headerSize+len(p)), opWriteFile, 0, f.handle), p...))
	return int(ret), err
}

// Close closes the file.
func (f *File) Close() error {
	_, _, err := f.c.call(appendHeader(nil, opCloseFile, 0, f.handle))
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
func (c *Client) ReadDir(name string) ([]DirEntry, error) {
	var out []DirEntry
	buf := make([]byte, MaxMessage)
	for {
		data, err := c.callDataInto(append(appendHeader(nil, opReadDir, 0, uint32(len(out))), name...), buf)
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
			return nil, errProtocol
		}
		mode := fs.FileMode(le.Uint32(data))
		data = data[4:]
		i := 0
		for i < len(data) && data[i] != 0 {
			i++
		}
		if i == len(data) {
			return nil, errProtocol
		}
		out = append(out, DirEntry{Name: string(data[:i]), Mode: mode})
		data = data[i+1:]
	}
	return out, nil
}

// Session is a perf-like consumer in the daemon.
type Session struct {
	c      *Client
	handle uint32
	buf    []byte // the last reply, which the last records alias
}

// Record is one record a Session read.
type Record struct {
	TS  uint64 // trace clock, ns
	PID int32
	TID int32
	CPU int32
	ID  int // the event's type ID
	// Raw is the 8-byte common header and the payload; for ID 0, a task's
	// name (SessionOptions.Comm), NUL-terminated and NUL-padded.
	Raw []byte
}

// SessionOptions configure a session (see subsys.SessionOptions).
type SessionOptions struct {
	BufferBytes int  // bound of the records waiting to be read (0: 1 MiB)
	Other       bool // count as an "other" consumer instead of perf
	Comm        bool // records of the writers' names (Record ID 0)
}

// NewSession opens a session.
func (c *Client) NewSession(opts SessionOptions) (*Session, error) {
	var flags uint16
	if opts.Other {
		flags |= flagOther
	}
	if opts.Comm {
		flags |= flagComm
	}
	ret, _, err := c.call(le.AppendUint32(appendHeader(nil, opSession, flags, 0), uint32(opts.BufferBytes)))
	if err != nil {
		return nil, err
	}
	return &Session{c: c, handle: uint32(ret)}, nil
}

// Attach attaches the session to the events pattern selects (see
// subsys.MatchEvent), and with follow to those created later. It returns
// the attached events as "system:tracepoint".
func (s *Session) Attach(pattern string, follow bool) ([]string, error) {
	var flags uint16
	if follow {
		flags = flagFollow
	}
	data, err := s.c.callData(append(appendHeader(nil, opAttach, flags, s.handle), pattern...))
	if err != nil {
		return nil, err
	}
	var names []string
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != 0 {
			i++
		}
		names = append(names, string(data[:i]))
		data = data[min(i+1, len(data)):]
	}
	return names, nil
}

// SetFilter sets the session's filter for the event "system:tracepoint",
// as PERF_EVENT_IOC_SET_FILTER sets a perf event's (see
// subsys.Session.SetFilter): errors are the kernel's (EINVAL for a bad
// filter, EEXIST for a second one), ENOENT for no such event.
func (s *Session) SetFilter(event, filter string) error {
	msg := appendHeader(nil, opSetFilter, 0, s.handle)
	msg = append(append(append(msg, event...), 0), filter...)
	_, _, err := s.c.call(msg)
	return err
}

// Read waits for records and appends them to dst, with the counts of
// records lost to a full buffer and dropped as too large so far. The
// records' Raw data is valid until the session's next Read or Poll.
// Cancelling ctx ends the wait by shutting the connection down: the Client
// is unusable afterwards (Poll does not wait).
func (s *Session) Read(ctx context.Context, dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	stop := context.AfterFunc(ctx, func() { unix.Shutdown(s.c.fd, unix.SHUT_RDWR) })
	defer stop()
	data, err := s.read(0)
	if err != nil {
		if ctx.Err() != nil {
			return dst, 0, 0, ctx.Err()
		}
		return dst, 0, 0, err
	}
	return parseRecords(data, dst)
}

// Poll is Read without the wait: the records already waiting, perhaps none.
// Unlike a cancelled Read it leaves the connection usable.
func (s *Session) Poll(dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	data, err := s.read(flagNoWait)
	if err != nil {
		return dst, 0, 0, err
	}
	return parseRecords(data, dst)
}

// read asks for records into the session's reply buffer.
func (s *Session) read(flags uint16) ([]byte, error) {
	if s.buf == nil {
		s.buf = make([]byte, MaxMessage)
	}
	var msg [headerSize + 4]byte
	return s.c.callDataInto(le.AppendUint32(appendHeader(msg[:0], opSessionRead, flags, s.handle), MaxMessage), s.buf)
}

// parseRecords reads a SessionRead reply: the lost and too-large counts,
// then records, each 8-byte aligned.
func parseRecords(data []byte, dst []Record) (recs []Record, lost, tooLarge uint64, err error) {
	if len(data) < 16 {
		return dst, 0, 0, errProtocol
	}
	lost, tooLarge = le.Uint64(data), le.Uint64(data[8:])
	data = data[16:]
	for len(data) > 0 {
		if len(data) < recordHeaderLen {
			return dst, lost, tooLarge, errProtocol
		}
		n := int(le.Uint32(data[24:]))
		if n > len(data)-recordHeaderLen {
			return dst, lost, tooLarge, errProtocol
		}
		dst = append(dst, Record{
			TS: le.Uint64(data), PID: int32(le.Uint32(data[8:])), TID: int32(le.Uint32(data[12:])),
			CPU: int32(le.Uint32(data[16:])), ID: int(le.Uint32(data[20:])),
			Raw: data[recordHeaderLen : recordHeaderLen+n],
		})
		adv := recordHeaderLen + n
		adv += (8 - adv%8) % 8
		data = data[min(adv, len(data)):]
	}
	return dst, lost, tooLarge, nil
}

// Close closes the session.
func (s *Session) Close() error {
	_, _, err := s.c.call(appendHeader(nil, opCloseFile, 0, s.handle))
	return err
}

// ShareRing hands the daemon the ring p (internal/shmring) this client
// publishes its writes into: the Ring request. p is made to wake the
// daemon through an eventfd (Producer.WakeByEventfd), sent with the ring's
// memfd; the daemon keeps its own mapping, the caller keeps p. A daemon
// that predates rings answers EPROTO, one that refuses this ring EINVAL
// (or another errno saying why): the caller then writes with Writev.
func (c *Client) ShareRing(p *shmring.Producer) error {
	efd, err := p.WakeByEventfd()
	if err != nil {
		return fmt.Errorf("sharing the ring: %w", err)
	}
	return c.shareRing(p.Fd(), efd)
}

// shareRing sends the Ring request with the descriptors given.
func (c *Client) shareRing(fds ...int) error {
	if err := c.callRights(opRing, fds...); err != nil {
		return fmt.Errorf("sharing the ring: %w", err)
	}
	return nil
}

// callRights sends a request of op with no body and the descriptors fds
// (SCM_RIGHTS), and returns its Result.
func (c *Client) callRights(op uint16, fds ...int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return unix.EBADF
	}
	var msg [headerSize]byte
	putHeader(msg[:], op, 0, 0)
	rights := unix.UnixRights(fds...)
	err := unix.Sendmsg(c.fd, msg[:], rights, nil, 0)
	for err == unix.EINTR {
		err = unix.Sendmsg(c.fd, msg[:], rights, nil, 0)
	}
	if err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	r, err := c.recv(c.rbuf[:])
	if err != nil {
		return err
	}
	_, _, err = parseResult(r)
	return err
}

// FlushRing asks the daemon to deliver everything this client has
// published into its ring so far, and waits until it has: the
// RingFlush request. A client that must publish something into a full
// ring — the count of records it dropped, before it closes — makes room
// with it.
func (c *Client) FlushRing() error {
	_, _, err := c.call(appendHeader(nil, opRingFlush, 0, 0))
	return err
}
