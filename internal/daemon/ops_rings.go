package daemon

// The requests of the shared rings a client writes through (ring.go,
// merger.go, drainer.go) and the FUSE tree handed over (fuse.go).

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// opRing takes a client's ring — a sealed memfd and an eventfd, one per
// connection — of the version its arg says: 0 or wire.RingV1, one ring
// (the merger drains it); wire.RingSet, a ring set of the daemon's ring
// count (the drainers do).
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

// takeRing maps the ring or ring set of a Ring request; the caller closes
// fds.
func (c *conn) takeRing(h wire.Header, fds []int, body []byte) error {
	switch {
	case len(fds) != 2 || len(body) != 0:
		return fmt.Errorf("ring: expected a memfd, an eventfd and no body, got %d descriptors and %d bytes: %w", len(fds), len(body), unix.EINVAL)
	case c.ring != nil || c.set != nil:
		return fmt.Errorf("ring: this connection already shared one: %w", unix.EBUSY)
	case h.Arg > wire.RingSet:
		return fmt.Errorf("ring: version %d; this daemon takes versions 1 (a ring) and 2 (a ring set): %w", h.Arg, unix.EPROTONOSUPPORT)
	}
	attach := c.attachRing
	if h.Arg == wire.RingSet {
		attach = c.attachSet
	}
	if err := attach(fds[0], fds[1]); err != nil {
		c.log.Warn("ring refused", "err", err)
		return err
	}
	return nil
}

// opRingFlush returns once what the connection's ring holds is delivered.
func (c *conn) opRingFlush(h wire.Header, body []byte) bool {
	if c.ring == nil && c.set == nil {
		return c.result(0, fmt.Errorf("ring flush: this connection shared no ring: %w", unix.EINVAL))
	}
	if c.set != nil {
		c.s.flushHanded(c.set)
	}
	c.s.Flush()
	return c.result(0, nil)
}
