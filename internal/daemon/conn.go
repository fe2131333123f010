package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/subsys"
)

// maxSessionBuffer bounds what one session may ask to buffer.
const maxSessionBuffer = wire.MaxSessionRing

// bufPool holds message buffers. A connection takes one only while a
// message is in hand, so idle connections cost no buffer.
var bufPool = sync.Pool{New: func() any { b := make([]byte, wire.MaxMessage+1); return &b }}

// conn is one client connection: one open user_events_data, plus the
// tracefs handles and sessions opened through it.
type conn struct {
	s    *Server
	c    *net.UnixConn
	raw  syscall.RawConn
	log  *slog.Logger
	cred subsys.Cred
	proc *process
	file *subsys.File
	w    subsys.Writer // Writer.PID and CPU are set per write

	handles map[uint32]any // *subsys.Handle or *subsys.Session
	next    uint32

	set *ringSet // the ring set it shared, if any
	// fds are the descriptors the message read carried, until it is
	// handled: only a Hello's, Ring's or ServeFUSE's are kept, and only
	// when the message came whole (read).
	fds     []int
	uid     uint32            // the peer's uid (SO_PEERCRED)
	threads ringcheck.Threads // the thread ids its Write requests give
	empty   bool              // the message read was a 0-byte one, not the end
	ucred   unix.Ucred        // the peer's credentials (SO_PEERCRED), taken at accept

	// tracer: the caller may control tracing and read others' records
	// (policy.go).
	tracer bool
	// shook is set once the handshake is done; nhandles mirrors
	// len(handles) for Server.Stats.
	shook    atomic.Bool
	nhandles atomic.Int32
	// regs are the registrations through this connection not unregistered;
	// refs the events its user_events_data refers to, under Server.mu
	// (limits.go).
	regs int
	refs int
	// sessBytes is what each session holds (buffer and ring), released
	// from the uid's account when it closes.
	sessBytes map[*subsys.Session]int64
	// bufHandles are the handles of buffer_size_kb open for writing.
	bufHandles map[uint32]bool
	readErr    error // the last read's error

	// The message being received, set by recvFn.
	in     *[]byte
	n      int
	oob    [rightsSpace]byte
	oobn   int
	flags  int // recvmsg's: MSG_TRUNC, MSG_CTRUNC
	rerr   error
	recvFn func(fd uintptr) bool
	// wantRights keeps the descriptors of the message read (the Hello's
	// memfd) whatever its op.
	wantRights bool

	out      []byte // the reply being built
	sessRaw  []byte // raw records taken from a session, reused
	sessRecs []subsys.Record
	deadline time.Time
	pending  *[]byte // a message the watcher read during a blocking call
	pendingN int
	peerGone bool
	pendBad  error // why the pending message cannot be served (read)
}

// maxRights is the most descriptors a request carries: a Ring's memfd and
// eventfd. The control buffer holds no more, so a message carrying more
// comes with MSG_CTRUNC and the kernel closes the rest (scm_detach_fds):
// what one connection makes the daemon hold at any moment is its socket,
// its ring's eventfd, and these two while a request is in hand — the 4 per
// connection Config.MaxConns counts.
const maxRights = 2

// rightsSpace is unix.CmsgSpace(4 * maxRights) on 64-bit Linux: a 16-byte
// cmsghdr and 8 bytes of descriptors (TestRightsSpace checks it).
const rightsSpace = 24

func (c *conn) serve() {
	defer c.s.done(c)
	defer c.c.Close()
	ucred := &c.ucred
	c.log = c.s.log.With("pid", ucred.Pid, "uid", ucred.Uid)
	c.recvFn = c.recv
	c.uid = ucred.Uid
	if cerr := c.raw.Control(func(fd uintptr) {
		if c.s.peerCred {
			c.cred = peerCred(int(fd), *ucred)
		} else {
			c.cred = c.s.cred(*ucred)
		}
		c.tracer = c.s.isTracer(int(fd), *ucred, c.cred)
	}); cerr != nil {
		return // closed as it was accepted: the server is stopping
	}
	c.w = subsys.Writer{TGID: ucred.Pid, Comm: procComm(ucred.Pid)}
	c.threads.Init(ucred.Pid)
	c.out = make([]byte, 0, 4096)

	// A connection that does not say Hello in time is closed: it would
	// hold a descriptor and a goroutine, and count against its uid's
	// connections, for nothing.
	if d := c.s.limits.Handshake; d < 100*365*24*time.Hour {
		c.c.SetReadDeadline(time.Now().Add(d))
	}
	if !c.hello(*ucred) {
		return
	}
	defer c.teardown()
	c.log.Debug("client connected", "comm", c.w.Comm)
	for {
		buf, n, bad, ok := c.nextMessage()
		if !ok {
			return
		}
		if bad != nil {
			c.log.Warn("dropping a message it cannot serve: oversized, or with too many descriptors", "err", bad)
			bufPool.Put(buf)
			if !c.reply(wire.AppendResult(c.out[:0], 0, bad)) {
				return
			}
			continue
		}
		ok = c.handle((*buf)[:n])
		bufPool.Put(buf)
		if !ok {
			return
		}
	}
}

// recv is the RawConn read callback: one recvmsg without blocking, into a
// pooled buffer taken only now that a message is there. Descriptors that
// came with it stay in c.oob for the caller.
func (c *conn) recv(fd uintptr) bool {
	if c.in == nil {
		c.in = bufPool.Get().(*[]byte)
	}
	n, oobn, flags, _, err := unix.Recvmsg(int(fd), *c.in, c.oob[:], unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err == unix.EAGAIN {
		bufPool.Put(c.in)
		c.in = nil
		return false
	}
	c.n, c.oobn, c.flags, c.rerr = n, oobn, flags, err
	// recvmsg returns 0 for a 0-byte message as for the end: only a
	// socket whose peer has not hung up held a message.
	c.empty = false
	if n == 0 && err == nil {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if k, perr := unix.Poll(p, 0); perr == nil && (k == 0 || p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) == 0) {
			c.empty = true
		}
	}
	return true
}

// read receives one message; ok is false when the peer is gone. bad, when
// not nil, is why the message cannot be served: larger than wire.MaxMessage
// (EMSGSIZE) or carrying more descriptors than any request (EINVAL). The
// descriptors it carried are closed now, unless it is a whole message
// that takes them — the Hello (wantRights), a Ring or a ServeFUSE —
// whose handler takes c.fds; a descriptor is never held past the next
// read.
func (c *conn) read() (buf *[]byte, n int, bad error, ok bool) {
	err := c.raw.Read(c.recvFn)
	if err == nil {
		err = c.rerr
	}
	buf, c.in = c.in, nil
	switch {
	case err != nil:
	case c.flags&unix.MSG_TRUNC != 0 || c.n > wire.MaxMessage:
		bad = fmt.Errorf("message larger than %d bytes: %w", wire.MaxMessage, unix.EMSGSIZE)
	case c.flags&unix.MSG_CTRUNC != 0:
		bad = fmt.Errorf("message carrying more than %d descriptors, the most a request carries: %w", maxRights, unix.EINVAL)
	}
	if c.oobn > 0 {
		keep := err == nil && bad == nil && buf != nil && c.n >= 2 && c.fds == nil
		if keep && !c.wantRights {
			op := wire.LE.Uint16(*buf)
			keep = op == wire.OpRing || op == wire.OpServeFUSE
		}
		if keep {
			c.fds = wire.Rights(c.oob[:c.oobn])
		} else {
			closeRights(c.oob[:c.oobn])
		}
		c.oobn = 0
	}
	c.readErr = err
	if err != nil || c.n == 0 && !c.empty {
		if buf != nil {
			bufPool.Put(buf)
		}
		if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, unix.ECONNRESET) {
			c.log.Warn("read", "err", err)
		}
		return nil, 0, nil, false
	}
	return buf, c.n, bad, true
}

// takeFDs hands the descriptors of the message in hand to its handler,
// which closes them.
func (c *conn) takeFDs() []int {
	fds := c.fds
	c.fds = nil
	return fds
}

// nextMessage returns the message the watcher kept, or reads one.
func (c *conn) nextMessage() (*[]byte, int, error, bool) {
	if c.pending != nil {
		buf, n, bad := c.pending, c.pendingN, c.pendBad
		c.pending, c.pendBad = nil, nil
		c.s.count.pending.Add(-1)
		return buf, n, bad, true
	}
	if c.peerGone {
		return nil, 0, nil, false
	}
	return c.read()
}

// closeRights closes the descriptors an SCM_RIGHTS message carried.
func closeRights(oob []byte) {
	for _, fd := range wire.Rights(oob) {
		unix.Close(fd)
	}
}

// reply sends a reply; a client that does not take it within the timeout
// is dropped.
func (c *conn) reply(b []byte) bool {
	if now := time.Now(); c.deadline.Sub(now) < c.s.timeout/2 {
		c.deadline = now.Add(c.s.timeout)
		c.c.SetWriteDeadline(c.deadline)
	}
	if _, err := c.c.Write(b); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.log.Warn("dropping client that does not read its replies", "timeout", c.s.timeout)
		} else if !errors.Is(err, net.ErrClosed) && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
			c.log.Warn("write", "err", err)
		}
		return false
	}
	return true
}

func (c *conn) result(ret int64, err error) bool {
	return c.reply(wire.AppendResult(c.out[:0], ret, err))
}

// hello runs the handshake: the first message must be a Hello of a version
// this daemon speaks; its memfd, if any, becomes part of the process's
// memory.
func (c *conn) hello(u unix.Ucred) bool {
	c.wantRights = true
	buf, n, bad, ok := c.read()
	c.wantRights = false
	if !ok {
		if errors.Is(c.readErr, os.ErrDeadlineExceeded) {
			c.s.count.timeouts.Add(1)
			c.log.Info("closing a connection that sent no Hello in time", "timeout", c.s.limits.Handshake)
		}
		return false
	}
	c.c.SetReadDeadline(time.Time{})
	defer bufPool.Put(buf)
	fds := c.takeFDs()
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	fail := func(err error) bool {
		c.log.Warn("handshake refused", "err", err)
		c.result(0, err)
		return false
	}
	b := (*buf)[:n]
	h, _ := wire.ParseHeader(b)
	if errors.Is(bad, unix.EINVAL) {
		return fail(fmt.Errorf("handshake: %w", bad))
	}
	if bad != nil || len(b) != wire.HelloSize || h.Op != wire.OpHello || string(b[wire.HeaderSize:wire.HeaderSize+8]) != wire.HelloMagic {
		return fail(fmt.Errorf("handshake: expected a %d-byte Hello: %w", wire.HelloSize, unix.EPROTO))
	}
	if v := wire.LE.Uint32(b[16:]); v != wire.Version {
		return fail(fmt.Errorf("handshake: protocol version %d; this daemon speaks %d: %w", v, wire.Version, unix.EPROTONOSUPPORT))
	}
	base, size := wire.LE.Uint64(b[24:]), wire.LE.Uint64(b[32:])
	if size != 0 && len(fds) != 1 || size == 0 && len(fds) != 0 {
		return fail(fmt.Errorf("handshake: %d descriptors for an arena of %d bytes: %w", len(fds), size, unix.EINVAL))
	}
	c.proc = c.s.join(u.Pid)
	// The process's enablers count in its uid's limits, whichever of its
	// connections made them, until the last goes (the first connection's
	// uid and privileges decide).
	s, uid, cred := c.s, c.uid, c.cred
	c.proc.p.SetCharge(func(n int, force bool) error { return s.charge(uid, cred, 0, n, 0, force, "socket") })
	if size != 0 {
		r, err := mapArena(fds[0], base, size)
		if err == nil {
			// An arena the process shared already (a second
			// connection) is mapped once, and counts once.
			r.uid = c.uid
			_, err = c.proc.mem.add(r, func() error {
				if err := c.share("arena", int64(size)); err != nil {
					return c.overLimit(err)
				}
				return nil
			})
		}
		if err != nil {
			c.s.leave(c.proc)
			c.proc = nil
			return fail(err)
		}
	}
	c.file = c.s.sys.OpenCharged(c.chargeRefs)
	c.handles = map[uint32]any{}
	c.sessBytes = map[*subsys.Session]int64{}
	c.bufHandles = map[uint32]bool{}
	var flags uint32
	if c.cred.PerfmonCapable {
		flags |= wire.HelloPerfmon
	}
	if c.tracer {
		flags |= wire.HelloTracer
	}
	out := wire.AppendHeader(c.out[:0], wire.OpHelloOK, 0, 0)
	out = wire.LE.AppendUint32(out, wire.Version)
	out = wire.LE.AppendUint32(out, uint32(u.Pid))
	out = wire.LE.AppendUint32(out, flags)
	out = wire.LE.AppendUint32(out, uint32(c.s.drainers.n))
	if !c.reply(out) {
		c.teardown()
		return false
	}
	c.shook.Store(true)
	return true
}

// teardown releases what the connection holds, as closing the fd and — for
// the process's last connection — process exit do.
func (c *conn) teardown() {
	// The ring set first: what the client published before it closed is
	// delivered while its events are still the file's.
	if c.set != nil {
		c.s.drainers.close(c.set)
		c.share("ring", -c.set.shared)
		c.set = nil
	}
	for _, fd := range c.takeFDs() {
		unix.Close(fd)
	}
	if c.pending != nil {
		bufPool.Put(c.pending)
		c.pending = nil
		c.s.count.pending.Add(-1)
	}
	for _, h := range c.handles {
		c.closeHandle(h)
	}
	c.handles = nil
	c.nhandles.Store(0)
	c.addRegs(-c.regs)
	c.file.Close()
	c.s.leave(c.proc)
	if n, u := c.threads.Forged(), c.threads.Unchecked(); n|u != 0 {
		c.log.Warn("client gone; it wrote records under another process's threads, or more new thread ids than the daemon checks, delivered under its own pid", "forged_tid", n, "unchecked_tid", u)
		return
	}
	c.log.Debug("client gone")
}

// closeHandle closes a tracefs file or a session, giving back to its
// uid what a session held.
func (c *conn) closeHandle(h any) {
	switch h := h.(type) {
	case *subsys.Handle:
		h.Close()
	case *subsys.Session:
		h.Close()
		if b, ok := c.sessBytes[h]; ok {
			delete(c.sessBytes, h)
			c.addSession(-1, -b)
		}
	}
}

func procComm(pid int32) string {
	if pid <= 0 {
		return "<...>"
	}
	comm, err := procfs.Comm(int(pid))
	if err != nil {
		return "<...>"
	}
	return comm
}

// handle serves one request. It returns false when the client must go.
func (c *conn) handle(m []byte) bool {
	h, ok := wire.ParseHeader(m)
	if !ok {
		c.log.Warn("dropping client: message shorter than a header", "len", len(m))
		c.result(0, fmt.Errorf("message of %d bytes has no header: %w", len(m), unix.EPROTO))
		return false
	}
	serve := ops[h.Op]
	if serve == nil {
		c.log.Warn("unknown request", "op", h.Op)
		return c.result(0, fmt.Errorf("unknown request %d: %w", h.Op, unix.EPROTO))
	}
	return serve(c, h, m[wire.HeaderSize:])
}

// An op serves one request of the protocol (package wire): it answers —
// a Result or a reply — and reports whether the connection goes on. ops is
// the daemon's table of them, as a kernel has its system call table, with
// a file per family: ops_data.go (user_events_data), ops_files.go
// (tracefs files), ops_sessions.go and session_stream.go (perf-like
// sessions), ops_rings.go (shared rings), and the server's own (Stats,
// ServeFUSE: limits.go, fuse.go). Hello is the handshake's (hello); after it, it is EPROTO.
var ops = map[uint16]func(c *conn, h wire.Header, body []byte) bool{
	wire.OpRegister:   (*conn).opRegister,
	wire.OpUnregister: (*conn).opUnregister,
	wire.OpDelete:     (*conn).opDelete,
	wire.OpWrite:      (*conn).opWrite,
	wire.OpWriteHead:  (*conn).opWriteHead,

	wire.OpOpen:      (*conn).opOpen,
	wire.OpRead:      (*conn).opRead,
	wire.OpWriteFile: (*conn).opWriteFile,
	wire.OpCloseFile: (*conn).opCloseFile,
	wire.OpReadDir:   (*conn).opReadDir,

	wire.OpSession:     (*conn).opSession,
	wire.OpAttach:      (*conn).opAttach,
	wire.OpSetFilter:   (*conn).opSetFilter,
	wire.OpSessionRead: (*conn).opSessionRead,
	wire.OpSessionSync: (*conn).sessionSync,

	wire.OpSessionStreams:  (*conn).opSessionStreams,
	wire.OpSessionHandOver: (*conn).opSessionHandOver,

	wire.OpRing:      (*conn).opRing,
	wire.OpRingFlush: (*conn).opRingFlush,

	wire.OpStats:     func(c *conn, _ wire.Header, _ []byte) bool { return c.stats() },
	wire.OpServeFUSE: func(c *conn, _ wire.Header, body []byte) bool { return c.result(0, c.serveFUSE(c.takeFDs(), body)) },
	wire.OpHello: func(c *conn, _ wire.Header, _ []byte) bool {
		return c.result(0, fmt.Errorf("hello after the handshake: %w", unix.EPROTO))
	},
}

func (c *conn) add(h any) uint32 {
	for {
		c.next++
		if _, used := c.handles[c.next]; !used && c.next != 0 {
			c.handles[c.next] = h
			c.nhandles.Store(int32(len(c.handles)))
			return c.next
		}
	}
}

// sessionRead waits for records (unless noWait) and sends as many as fit in
// one message.
func (c *conn) sessionRead(ss *subsys.Session, max int, noWait bool) bool {
	max = min(max, wire.MaxMessage)
	room := max - wire.HeaderSize - 16
	if room < 6*(8+wire.RecordHeaderLen) {
		return c.result(0, fmt.Errorf("session read: %d bytes cannot hold a record: %w", max, unix.EINVAL))
	}
	// Each record costs wire.RecordHeaderLen bytes of the reply besides its
	// raw data, and no padding: raw data is 4 bytes past a multiple of 8
	// (subsys.Record.Raw), so header and data end on one.
	if len(c.sessRaw) != room {
		c.sessRaw = make([]byte, room)
	}
	raw := c.sessRaw
	recs := c.sessRecs[:0]
	var err error
	if noWait {
		recs, err = ss.ReadFramed(doneContext, raw, wire.RecordHeaderLen, recs)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
	} else {
		c.blocking(func(ctx context.Context) { recs, err = ss.ReadFramed(ctx, raw, wire.RecordHeaderLen, recs) })
	}
	c.sessRecs = recs[:0]
	if err != nil {
		return c.result(0, err)
	}
	out := wire.AppendHeader(c.out[:0], wire.OpData, 0, 0)
	out = wire.LE.AppendUint64(out, ss.Lost())
	out = wire.LE.AppendUint64(out, ss.TooLarge())
	for _, r := range recs {
		out = wire.LE.AppendUint64(out, r.TS)
		out = wire.LE.AppendUint32(out, uint32(r.PID))
		out = wire.LE.AppendUint32(out, uint32(r.TID))
		out = wire.LE.AppendUint32(out, uint32(r.CPU))
		out = wire.LE.AppendUint32(out, uint32(r.ID))
		out = wire.LE.AppendUint32(out, uint32(len(r.Raw)))
		out = append(out, r.Raw...)
		for len(out)%8 != wire.HeaderSize%8 {
			out = append(out, 0)
		}
	}
	c.out = out[:0]
	return c.reply(out)
}

// doneContext is a context already cancelled: a read that must not wait.
var doneContext = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// blocking runs fn, which may wait, with a context cancelled when the peer
// hangs up. Meanwhile a watcher reads the connection: end of file or an
// error cancels fn; a message (the client pipelined a request) is kept
// for the main loop, and the watcher goes on watching for the hang-up
// without reading further — a client that pipelines a request behind a
// blocking read and exits is released at once, as close(2) releases its
// files in Linux. A half-closed socket (the client will send nothing more)
// counts as a hang-up: fn is cancelled, the kept message is still answered.
func (c *conn) blocking(fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	held := c.pending != nil
	go func() {
		defer close(done)
		if !held {
			buf, n, bad, ok := c.read()
			if !ok {
				if ctx.Err() == nil {
					c.peerGone = true
					cancel()
				}
				return
			}
			c.pending, c.pendingN, c.pendBad = buf, n, bad
			// At most this one message per connection waits in the
			// daemon; what the client sends after it waits in the
			// socket's buffer, bounded by the kernel.
			c.s.count.pending.Add(1)
		}
		// A hang-up, or the connection closed under it (the server
		// stopping): either way fn must end. The deadline that ends the
		// wait once fn has returned comes after cancel.
		c.waitHangup()
		cancel()
	}()
	fn(ctx)
	cancel()
	c.c.SetReadDeadline(time.Now())
	<-done
	c.c.SetReadDeadline(time.Time{})
}

// waitHangup waits, without reading, until the peer hangs up or shuts down
// its side (true), or the connection's read deadline passes or it is
// closed (false). The poller wakes on every edge — new messages as well as
// the hang-up (Go's netpoller waits for EPOLLRDHUP too) — and each time
// poll(2) says which it was; queued messages stay queued.
func (c *conn) waitHangup() bool {
	hup := false
	err := c.raw.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(p, 0); err == nil && n == 1 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
			hup = true
			return true
		}
		return false
	})
	return err == nil && hup
}
