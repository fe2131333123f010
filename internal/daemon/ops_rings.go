package daemon

// The requests of the shared rings a client writes through (ring.go,
// merger.go) and the FUSE tree handed over (fuse.go).

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// opRing takes a client's ring: a sealed memfd and an eventfd, one per
// connection.
func (c *conn) opRing(h wire.Header, body []byte) bool {
	fds := c.takeFDs()
	err := c.takeRing(fds, body)
	// The descriptors are closed before the reply: a client that counts
	// its peer's descriptors once answered finds none parked.
	for _, fd := range fds {
		unix.Close(fd)
	}
	return c.result(0, err)
}

// takeRing maps the ring of a Ring request; the caller closes fds.
func (c *conn) takeRing(fds []int, body []byte) error {
	switch {
	case len(fds) != 2 || len(body) != 0:
		return fmt.Errorf("ring: expected a memfd, an eventfd and no body, got %d descriptors and %d bytes: %w", len(fds), len(body), unix.EINVAL)
	case c.ring != nil:
		return fmt.Errorf("ring: this connection already shared one: %w", unix.EBUSY)
	}
	if err := c.attachRing(fds[0], fds[1]); err != nil {
		c.log.Warn("ring refused", "err", err)
		return err
	}
	return nil
}

// opRingFlush returns once what the connection's ring holds is delivered.
func (c *conn) opRingFlush(h wire.Header, body []byte) bool {
	if c.ring == nil {
		return c.result(0, fmt.Errorf("ring flush: this connection shared no ring: %w", unix.EINVAL))
	}
	c.s.Flush()
	return c.result(0, nil)
}
