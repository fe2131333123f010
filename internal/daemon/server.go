package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Config configures a Server. The zero value serves a new Subsystem with
// Linux's defaults.
type Config struct {
	// Subsystem is what the daemon serves (nil: subsys.New with defaults
	// and one CPU per CPU this process may run on, procfs.AllowedCPUs).
	Subsystem *subsys.Subsystem
	// Logger receives connection events and client misbehaviour (nil:
	// slog.Default()).
	Logger *slog.Logger
	// ReplyTimeout is how long a reply may wait for a client that does not
	// read before the client is dropped (0: 5 s).
	ReplyTimeout time.Duration
	// MaxConns bounds the connections served at once; more are answered
	// ENFILE and closed (0: 16384, or fewer when the daemon's RLIMIT_NOFILE
	// would not hold their descriptors, so that the limit, not EMFILE on
	// accept, answers; negative: no limit). A connection holds at most 5
	// of the daemon's descriptors: its socket, its ring's eventfd, its ring
	// set's memfd (kept to hand the set over), and the at most two (a
	// Ring's memfd and eventfd) of the request in hand, which
	// are taken or closed before the next message is read — a message
	// carrying more is refused EINVAL and the kernel closes the rest, one
	// too large to read has its descriptors closed with it. A FUSE tree a
	// tracer hands over holds its /dev/fuse descriptor until its mount
	// goes, past the connection: it counts as a connection of its uid's
	// until then. Limits.ConnsPerUID keeps one user from taking them all.
	MaxConns int
	// Tracers names who may control tracing and read others' records
	// besides root, perfmon-capable callers and the daemon's own user
	// (package doc, "Who may do what").
	Tracers Tracers
	// Limits bound what a connection and a uid may make the daemon hold.
	Limits Limits
	// Cred decides a caller's privileges from its peer credentials (nil:
	// perfmon_capable() as Linux decides it — CAP_PERFMON or CAP_SYS_ADMIN
	// effective in the daemon's user namespace, not in one the client made
	// — of the process the socket's SO_PEERPIDFD names: package caps).
	Cred func(unix.Ucred) subsys.Cred
	// Rings is how many rings a client's ring set has, and so how many
	// drainers deliver them (0: the largest divisor of the trace buffer's
	// CPU count up to 64, so that one trace buffer CPU's records all come
	// from one ring index; see drainer.go). Clients learn it in the Hello
	// reply.
	Rings int
	// ServeFUSE serves the subsystem's tracefs tree on dev, a mounted
	// /dev/fuse a client handed over (the ServeFUSE request), until the
	// mount goes or the returned tree is closed — at the latest when the
	// Server is. nil: the request is EOPNOTSUPP. (The FUSE tree, package
	// fusefs, sits beside this package: cmd/uetrace joins them.) from is
	// the client that handed it over, whom the tree is served for: FUSE
	// gives callers' ids in the pid namespace of the mount's maker, taken
	// to be the client's, and callers are to be reached only where the
	// client could ptrace them.
	ServeFUSE func(dev *os.File, from FUSEMounter) (FUSETree, error)
}

// Server serves one Subsystem to the clients of a Unix socket.
type Server struct {
	sys     *subsys.Subsystem
	log     *slog.Logger
	timeout time.Duration
	maxConn int
	cred    func(unix.Ucred) subsys.Cred
	// peerCred: no Config.Cred, the peer process decides (peerCred).
	peerCred bool
	freeing  atomic.Bool // idle's giveBack is under way
	freeMore atomic.Bool // idle was called again meanwhile
	tracers  Tracers
	limits   Limits
	count    counters
	// lastRefusal is the second of the last refused connection, to log a
	// flood once.
	lastRefusal atomic.Int64

	serveFUSE func(dev *os.File, from FUSEMounter) (FUSETree, error)
	fuses     map[FUSETree]struct{} // the trees served through ServeFUSE
	trees     int                   // trees served or being set up (reserveTree), under mu

	mu     sync.Mutex
	lns    map[*net.UnixListener]struct{}
	conns  map[*conn]struct{}
	procs  map[int32]*process
	uids   map[uint32]*uidUse // what each uid's connections hold
	closed bool

	drainers  drainers  // their ring sets
	handOvers handOvers // ring sets handed to sessions' readers
	unhook    func()    // the subsystem's sync and count hooks' removal (beforeChange, countHanded)
	wg        sync.WaitGroup
}

// process is one client process: its enablers (the kernel's user_event_mm)
// and the arenas it shared, kept while any of its connections is open.
type process struct {
	pid   int32
	p     *subsys.Process
	mem   *memory
	conns int
}

// New returns a Server.
func New(cfg Config) *Server {
	s := &Server{
		sys:     cfg.Subsystem,
		log:     cfg.Logger,
		timeout: cfg.ReplyTimeout,
		maxConn: cfg.MaxConns,
		cred:    cfg.Cred,
		tracers: cfg.Tracers,
		limits:  cfg.Limits.withDefaults(),
		uids:    map[uint32]*uidUse{},

		serveFUSE: cfg.ServeFUSE,
		fuses:     map[FUSETree]struct{}{},
		lns:       map[*net.UnixListener]struct{}{},
		conns:     map[*conn]struct{}{},
		procs:     map[int32]*process{},
	}
	if s.sys == nil {
		s.sys = subsys.New(subsys.Options{NumCPU: procfs.AllowedCPUs()})
	}
	rings := cfg.Rings
	if rings <= 0 {
		rings = drainerCount(s.sys.NumCPU())
	}
	s.drainers.init(s, min(rings, shmring.MaxSetRings))
	unsync, uncount := s.sys.AddSyncHook(s.beforeChange), s.sys.AddCountHook(s.countHanded)
	s.unhook = func() { unsync(); uncount() }
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.timeout == 0 {
		s.timeout = 5 * time.Second
	}
	if s.limits.RegistrationsPerUID == 0 {
		s.limits.RegistrationsPerUID = max(1, min(DefaultRegistrationsPerUID, s.sys.MaxEvents()/4))
	}
	switch {
	case s.maxConn == 0:
		s.maxConn = defaultMaxConns()
	case s.maxConn < 0:
		s.maxConn = int(^uint(0) >> 1)
	}
	if s.cred == nil {
		s.peerCred = true
	}
	return s
}

// defaultMaxConns is 16384, or what RLIMIT_NOFILE holds at 5 descriptors
// a connection (Config.MaxConns) with 256 spare (Go raises the soft limit
// to the hard one at start).
func defaultMaxConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 16384
	}
	return min(16384, max(64, (int(rl.Cur)-256)/5))
}

// Subsystem returns the subsystem the server serves.
func (s *Server) Subsystem() *subsys.Subsystem { return s.sys }

// Listen creates the socket at path — its directory too, mode 0755 — with
// mode 0660. A socket file nobody answers at is stale and replaced; one a
// daemon answers at is EADDRINUSE. ListenAccess gives it another mode or
// group.
func Listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln, err := listen(path)
	if err != nil {
		return nil, err
	}
	if err := setAccess(path, unix.S_IFSOCK, DefaultAccess.Mode, -1); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// afterBind is called by listen once the socket is bound: the tests replace
// it to do what another user can do in that instant.
var afterBind = func(path string) {}

// listen binds the socket at path, replacing a stale one.
func listen(path string) (*net.UnixListener, error) {
	if _, err := os.Lstat(path); err == nil {
		c, err := net.DialTimeout("unixpacket", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: a daemon is already serving there: %w", path, unix.EADDRINUSE)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen %s: removing the stale socket: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	afterBind(path)
	return ln, nil
}

// Serve accepts connections on ln until ln is closed or the server is
// closed. It returns nil after Close — also when Close came first, as it
// may when Serve runs on a goroutine of its own: ln is closed then, as
// Close closes the listeners it knows.
func (s *Server) Serve(ln *net.UnixListener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
				s.log.Warn("accept", "err", err)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		var u *unix.Ucred
		raw, err := c.SyscallConn()
		if err == nil {
			// Control fails without calling the function when the
			// connection is already closed (the server shutting down as
			// it was accepted).
			if cerr := raw.Control(func(fd uintptr) {
				u, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
			}); cerr != nil {
				err = cerr
			}
		}
		if err != nil {
			s.log.Warn("connection: SO_PEERCRED", "err", err)
			c.Close()
			continue
		}
		s.mu.Lock()
		use := s.uids[u.Uid]
		var refuse error
		switch {
		case s.closed:
			refuse = fmt.Errorf("the daemon is stopping: %w", unix.ESHUTDOWN)
		case len(s.conns)+s.trees >= s.maxConn:
			s.count.refusedAll.Add(1)
			refuse = fmt.Errorf("the daemon serves %d connections and %d FUSE trees, the most it may together (`uetrace serve --max-conns`): %w", len(s.conns), s.trees, unix.ENFILE)
		case !exempt(u.Uid) && use != nil && use.conns >= s.limits.ConnsPerUID:
			s.count.refusedUID.Add(1)
			refuse = fmt.Errorf("uid %d has %d connections open, the most one user may (`uetrace serve --max-conns-per-uid`): %w", u.Uid, use.conns, unix.EMFILE)
		}
		if refuse != nil {
			s.mu.Unlock()
			s.refuse(c, raw, u, refuse)
			continue
		}
		if use == nil {
			use = &uidUse{}
			s.uids[u.Uid] = use
		}
		use.conns++
		cn := &conn{s: s, c: c, raw: raw, ucred: *u}
		s.conns[cn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go cn.serve()
	}
}

// Close stops accepting, drops every client — releasing their events as
// their exit would — and waits for the connections to finish.
func (s *Server) Close() error {
	s.unhook()
	s.drainers.stop()
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.c.Close()
	}
	fuses := s.fuses
	s.fuses = map[FUSETree]struct{}{}
	s.mu.Unlock()
	for f := range fuses {
		f.Close()
	}
	s.wg.Wait()
	return nil
}

// Conns is the number of connections being served.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// peerCred is perfmon_capable() of the process at the other end of
// socket fd, which connected as u. SO_PEERPIDFD (Linux 6.5) names the
// connecting process itself, so a client that exits and leaves its socket
// to another process cannot lend it the capabilities of whatever process
// takes its pid next; before 6.5 the pid is pinned when the daemon first
// looks at it.
func peerCred(fd int, u unix.Ucred) subsys.Cred {
	if u.Pid <= 0 {
		return subsys.Cred{}
	}
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		return subsys.Cred{PerfmonCapable: caps.PerfmonCapable(int(u.Pid))}
	}
	defer unix.Close(pidfd)
	return subsys.Cred{PerfmonCapable: caps.PerfmonCapablePidfd(pidfd, int(u.Pid))}
}

// join attaches a connection to its process, creating it on first use.
// Connections whose pid the daemon cannot see (another pid namespace) are
// each a process of their own.
func (s *Server) join(pid int32) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pid > 0 {
		if p := s.procs[pid]; p != nil {
			p.conns++
			return p
		}
	}
	mem := &memory{}
	p := &process{pid: pid, p: s.sys.NewProcess(mem), mem: mem, conns: 1}
	if pid > 0 {
		s.procs[pid] = p
	}
	return p
}

// leave detaches a connection; the process's last one going releases its
// enablers, as the exit of its last task does.
func (s *Server) leave(p *process) {
	s.mu.Lock()
	p.conns--
	last := p.conns == 0
	if last && s.procs[p.pid] == p {
		delete(s.procs, p.pid)
	}
	s.mu.Unlock()
	if last {
		p.p.Release()
		for _, r := range p.mem.unmap() {
			s.unshare(r.uid, int64(len(r.mem)))
		}
	}
}

func (s *Server) done(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if u := s.uids[c.ucred.Uid]; u != nil {
		u.conns--
		s.tidy(c.ucred.Uid, u)
	}
	last := len(s.conns) == 0 && !s.closed
	s.mu.Unlock()
	if last {
		s.idle()
	}
	s.wg.Done()
}

// refuse answers a connection the daemon will not serve with err, without
// waiting for it: what it sent already (its Hello, and any descriptors) is
// read and dropped first, so that the client reads the reason rather than
// a reset, and it is closed.
func (s *Server) refuse(c *net.UnixConn, raw syscall.RawConn, u *unix.Ucred, err error) {
	// Refusals come in floods: the first of a burst is logged at Warn,
	// the rest at Debug.
	level := slog.LevelDebug
	if now := time.Now().Unix(); s.lastRefusal.Swap(now) != now {
		level = slog.LevelWarn
	}
	s.log.Log(context.Background(), level, "connection refused", "pid", u.Pid, "uid", u.Uid, "err", err)
	raw.Control(func(fd uintptr) {
		var buf [wire.HelloSize + 1]byte
		var oob [rightsSpace]byte
		for range 4 {
			_, oobn, _, _, rerr := unix.Recvmsg(int(fd), buf[:], oob[:], unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
			if oobn > 0 {
				closeRights(oob[:oobn])
			}
			if rerr != nil {
				break
			}
		}
		unix.Sendmsg(int(fd), wire.AppendResult(nil, 0, err), nil, nil, unix.MSG_DONTWAIT)
	})
	c.Close()
}
