package daemon

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys"
)

// FUSETree is a tracefs tree served on a FUSE mount (Config.ServeFUSE).
type FUSETree interface {
	// Close stops serving: the connection is aborted and unmounted.
	Close() error
	// Done is closed when serving has ended, by Close or because the
	// mount went away (its mount namespace ended with the last program
	// in it).
	Done() <-chan struct{}
}

// FUSEMounter is the client that handed a mounted FUSE descriptor over
// (Config.ServeFUSE).
type FUSEMounter struct {
	// Pidfd names the client's process (SO_PEERPIDFD, or a pidfd_open of
	// its SO_PEERCRED pid before Linux 6.5): the mount's pid namespace is
	// taken to be its. It is open for the call only.
	Pidfd int
	// PID is its id in the daemon's pid namespace.
	PID int32
	// UID and GID are its SO_PEERCRED credentials.
	UID, GID uint32
}

// mounter is the FUSEMounter of c, with a pidfd the caller closes.
func (c *conn) mounter() (FUSEMounter, error) {
	m := FUSEMounter{Pidfd: -1, PID: c.ucred.Pid, UID: c.ucred.Uid, GID: c.ucred.Gid}
	var perr error
	if err := c.raw.Control(func(fd uintptr) {
		m.Pidfd, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return m, err
	}
	if perr != nil {
		// Before Linux 6.5: the pid, pinned now. A client that exited
		// and left its socket to another process could lend it its pid's
		// next owner's namespace: the tree still reaches only what the
		// client's uid could.
		if m.PID <= 0 {
			return m, fmt.Errorf("the client's process is in a pid namespace this daemon cannot see: %w", unix.ESRCH)
		}
		fd, err := unix.PidfdOpen(int(m.PID), 0)
		if err != nil {
			return m, fmt.Errorf("the client's process %d: %w", m.PID, err)
		}
		m.Pidfd = fd
	}
	return m, nil
}

// reserveTree counts a tree about to be served for uid as one of its
// connections, and one of the daemon's: a tree holds its /dev/fuse
// descriptor and its server until its mount goes, past the connection that
// handed it over, so without this one tracer's ServeFUSE requests — one per
// mount of its own, thousands from one connection — would take the daemon
// to RLIMIT_NOFILE. Beyond Limits.ConnsPerUID it is EMFILE, beyond
// Config.MaxConns ENFILE, as for a connection (root and the daemon's user
// are not held to the former).
func (s *Server) reserveTree(uid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.uids[uid]
	switch {
	case s.closed:
		return fmt.Errorf("the daemon is stopping: %w", unix.ESHUTDOWN)
	case len(s.conns)+s.trees >= s.maxConn:
		return fmt.Errorf("the daemon serves %d connections and %d FUSE trees, the most it may together (`uetrace serve --max-conns`): %w", len(s.conns), s.trees, unix.ENFILE)
	case !exempt(uid) && u != nil && u.conns >= s.limits.ConnsPerUID:
		return fmt.Errorf("uid %d has %d connections and FUSE trees open, the most one user may (`uetrace serve --max-conns-per-uid`): %w", uid, u.conns, unix.EMFILE)
	}
	if u == nil {
		u = &uidUse{}
		s.uids[uid] = u
	}
	u.conns++
	s.trees++
	return nil
}

// releaseTree gives back what reserveTree took.
func (s *Server) releaseTree(uid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trees--
	if u := s.uids[uid]; u != nil {
		u.conns--
		s.tidy(uid, u)
	}
}

// serveFUSE is the ServeFUSE request.
func (c *conn) serveFUSE(fds []int, body []byte) error {
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	switch {
	case len(fds) != 1 || len(body) != 0:
		return fmt.Errorf("serve FUSE: expected one /dev/fuse descriptor and no body, got %d descriptors and %d bytes: %w", len(fds), len(body), unix.EINVAL)
	case c.s.serveFUSE == nil:
		return fmt.Errorf("serve FUSE: this daemon was started without FUSE support: %w", unix.EOPNOTSUPP)
	case !c.tracer:
		return c.denied(errNeedsTracer("serve FUSE: the tree is the daemon's whole subsystem, tracing control and everyone's records;", c.uid))
	}
	s, uid := c.s, c.ucred.Uid
	if err := s.reserveTree(uid); err != nil {
		if errors.Is(err, unix.ESHUTDOWN) {
			return fmt.Errorf("serve FUSE: %w", err)
		}
		return c.overLimit(fmt.Errorf("serve FUSE: %w", err))
	}
	dup, err := unix.FcntlInt(uintptr(fds[0]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		s.releaseTree(uid)
		return fmt.Errorf("serve FUSE: %w", err)
	}
	dev := os.NewFile(uintptr(dup), "/dev/fuse")
	from, err := c.mounter()
	if err != nil {
		dev.Close()
		s.releaseTree(uid)
		return fmt.Errorf("serve FUSE: %w", err)
	}
	tree, err := c.s.serveFUSE(dev, from)
	unix.Close(from.Pidfd)
	dev.Close()
	if err != nil {
		s.releaseTree(uid)
		return fmt.Errorf("serve FUSE: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		tree.Close()
		s.releaseTree(uid)
		return fmt.Errorf("serve FUSE: the daemon is stopping: %w", unix.ESHUTDOWN)
	}
	s.fuses[tree] = struct{}{}
	s.mu.Unlock()
	// A tree whose mount went away is forgotten: the set holds only trees
	// being served, whatever clients do.
	go func() {
		<-tree.Done()
		s.mu.Lock()
		delete(s.fuses, tree)
		s.mu.Unlock()
		s.releaseTree(uid)
	}()
	c.log.Info("serving the tracefs tree on a FUSE mount handed over")
	return nil
}

// FUSECharge accounts to uid what a caller of a FUSE tree of this daemon's
// subsystem makes the daemon hold (package fusefs, Options.Charge; cmd/uetrace
// joins them): files open, of Limits.FilesPerUID (EMFILE beyond, as the
// per-user counts of open objects, inotify's max_user_instances), and
// enablers registered, of Limits.RegistrationsPerUID together with those the
// uid registered over the socket (ENOMEM beyond, as the kernel's allocation
// of an enabler would fail) — more when positive, fewer when negative. One
// uid's total is what is bounded, however its programs reach the daemon.
// Root, perfmon-capable callers (cred) and the daemon's own user are counted
// and not held, as on the socket; force takes the charge whatever the
// limits (a fork's copies of its parent's enablers, which cannot be
// refused after the fact). It never calls into the subsystem: it is called
// with the subsystem's lock held.
func (s *Server) FUSECharge(uid uint32, cred subsys.Cred, files, regs int, force bool) error {
	return s.charge(uid, cred, files, regs, 0, force, "fuse")
}

// FUSEChargeRefs accounts to uid the events the user_events_data files a
// caller of a FUSE tree of this daemon opened refer to (fusefs's
// Options.ChargeRefs): n more, or fewer (n < 0), counted with the events
// its connections' files refer to against Limits.RegistrationsPerUID —
// ENOMEM beyond, unless force, or uid is root or the daemon's own, or
// cred is perfmon-capable.
func (s *Server) FUSEChargeRefs(uid uint32, cred subsys.Cred, n int, force bool) error {
	return s.charge(uid, cred, 0, 0, n, force, "fuse")
}

// charge accounts to uid files open through FUSE, enablers (regs) of a
// process served through FUSE or over the socket (via), and events the
// files of its FUSE callers refer to (refs), checking the uid's limits
// unless force.
func (s *Server) charge(uid uint32, cred subsys.Cred, files, regs, refs int, force bool, via string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.uids[uid]
	if u == nil {
		u = &uidUse{}
		s.uids[uid] = u
	}
	var err error
	if !force && !exempt(uid) && !cred.PerfmonCapable {
		switch {
		case files > 0 && u.files+files > s.limits.FilesPerUID:
			err = fmt.Errorf("open: uid %d holds %d files of the FUSE tree open, the most one user may (`uetrace serve --max-fuse-files`): %w", uid, u.files, unix.EMFILE)
		case regs > 0 && u.regs+regs > s.limits.RegistrationsPerUID:
			err = fmt.Errorf("register: uid %d holds %d registrations, the most one user may (`uetrace serve --max-registrations-per-uid`): %w", uid, u.regs, unix.ENOMEM)
		case refs > 0 && u.refs+refs > s.limits.RegistrationsPerUID:
			err = fmt.Errorf("register: uid %d's files refer to %d events, the most one user's may (`uetrace serve --max-registrations-per-uid`): %w", uid, u.refs, unix.ENOMEM)
		}
	}
	if err != nil {
		s.count.overLimit.Add(1)
		s.log.Info("limit reached", "uid", uid, "via", via, "err", err)
		s.tidy(uid, u)
		return err
	}
	u.files += files
	u.regs += regs
	u.refs += refs
	s.tidy(uid, u)
	return nil
}
