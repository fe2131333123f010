package daemon

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// opServeFUSE hands the daemon a /dev/fuse descriptor already mounted
// somewhere (by uetrace run's helper in a mount namespace, or by uetrace
// mount): no body, one descriptor (SCM_RIGHTS). The daemon serves its
// tracefs tree on it through Config.ServeFUSE. Only tracers (policy.go)
// may: the tree is the daemon's whole subsystem, and it will read and
// write the memory of whoever calls into it (EPERM otherwise). Reply: Result,
// once serving has begun.
const opServeFUSE uint16 = 48

// FUSETree is a tracefs tree served on a FUSE mount (Config.ServeFUSE).
type FUSETree interface {
	// Close stops serving: the connection is aborted and unmounted.
	Close() error
	// Done is closed when serving has ended, by Close or because the
	// mount went away (its mount namespace ended with the last program
	// in it).
	Done() <-chan struct{}
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
	dup, err := unix.FcntlInt(uintptr(fds[0]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("serve FUSE: %w", err)
	}
	dev := os.NewFile(uintptr(dup), "/dev/fuse")
	tree, err := c.s.serveFUSE(dev)
	dev.Close()
	if err != nil {
		return fmt.Errorf("serve FUSE: %w", err)
	}
	s := c.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		tree.Close()
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
	}()
	c.log.Info("serving the tracefs tree on a FUSE mount handed over")
	return nil
}

// ServeFUSE asks the daemon to serve its tracefs tree on dev, a /dev/fuse
// descriptor already mounted: the ServeFUSE request. The daemon keeps serving
// after this client goes, until the mount goes or the daemon stops.
func (c *Client) ServeFUSE(dev *os.File) error {
	if err := c.callRights(opServeFUSE, int(dev.Fd())); err != nil {
		return fmt.Errorf("handing the FUSE device to the daemon: %w", err)
	}
	return nil
}
