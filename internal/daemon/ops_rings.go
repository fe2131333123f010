package daemon

// The requests of the shared ring sets a client writes through (ring.go,
// drainer.go) and the FUSE tree handed over (fuse.go).

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// opRing takes a client's ring set — a sealed memfd of the daemon's ring
// count and an eventfd, one per connection; its arg, wire.RingSet, says
// so — which the drainers drain.
func (c *conn) opRing(h wire.Header, body []byte) bool {
	fds := c.takeFDs()
	err := c.takeRing(h, fds, body)
	// The descriptors are closed before the reply (attach keeps
	// duplicates): a client that counts its peer's descriptors once
	// answered finds none parked.
	for _, fd := range fds {
		unix.Close(fd)
	}
	return c.result(0, err)
}

// takeRing maps the ring set of a Ring request; the caller closes fds.
func (c *conn) takeRing(h wire.Header, fds []int, body []byte) error {
	switch {
	case len(fds) != 2 || len(body) != 0:
		return fmt.Errorf("ring: expected a memfd, an eventfd and no body, got %d descriptors and %d bytes: %w", len(fds), len(body), unix.EINVAL)
	case c.set != nil:
		return fmt.Errorf("ring: this connection already shared one: %w", unix.EBUSY)
	case h.Arg != wire.RingSet:
		return fmt.Errorf("ring: version %d; this daemon takes version 2 only (a ring set of the Hello reply's ring count; version 1, one ring per producer, is no longer taken): %w", h.Arg, unix.EPROTONOSUPPORT)
	}
	if err := c.attachSet(fds[0], fds[1]); err != nil {
		c.log.Warn("ring refused", "err", err)
		return err
	}
	return nil
}

// opRingFlush returns once what the connection's ring set holds is
// delivered.
func (c *conn) opRingFlush(h wire.Header, body []byte) bool {
	if c.set == nil {
		return c.result(0, fmt.Errorf("ring flush: this connection shared no ring: %w", unix.EINVAL))
	}
	c.s.flushHanded(c.set)
	c.s.Flush()
	return c.result(0, nil)
}
