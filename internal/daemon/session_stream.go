package daemon

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Session streams (wire.OpSessionStreams): a session's records handed to
// its reader through shared memory as perf's mmap rings hand the kernel's —
// finished perf.data records, one stream per drainer, which the reader
// writes to its file as they lie (subsys.Session.DeliverToStreams writes
// them). The daemon owns the memfd (sealed against resizing); the reader
// maps it and consumes without a system call per record.

// opSessionStreams serves SessionStreams: makes one stream per drainer,
// makes the session deliver into them, and sends the memfd.
func (c *conn) opSessionStreams(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok {
		return c.result(0, fmt.Errorf("session streams: bad session %d: %w", h.Arg, unix.EBADF))
	}
	if len(body) != 4 {
		return c.result(0, fmt.Errorf("session streams: the body is %d bytes, not a u32 size: %w", len(body), unix.EINVAL))
	}
	size, err := ringSize(wire.LE.Uint32(body))
	if err != nil {
		return c.result(0, err)
	}
	// The streams count with the session's buffer against its uid's
	// Limits.SessionKBPerUID, as perf's mmap pages count against
	// perf_event_mlock_kb: one per drainer.
	total := int64(c.s.drainers.n) * int64(size)
	if err := c.addSession(0, total); err != nil {
		return c.result(0, c.overLimit(err))
	}
	set, err := shmring.CreateStreamSet(c.s.drainers.n, size)
	if err == nil {
		if err = ss.DeliverToStreams(set); err != nil {
			set.Close()
		}
	}
	if err != nil {
		c.addSession(0, -total)
		return c.result(0, err)
	}
	c.sessBytes[ss] += total
	ok = c.replyRights(wire.AppendResult(c.out[:0], 0, nil), set.Fd())
	// The reader has its descriptor, or is gone: the session keeps the
	// mapping, and it goes with the session.
	set.CloseFd()
	return ok
}

// ringSize is each stream's data size a SessionStreams request gets: n rounded up to a
// power of two, at least a page.
func ringSize(n uint32) (int, error) {
	if n > wire.MaxSessionRing {
		return 0, fmt.Errorf("session streams: %d bytes asked, at most %d: %w", n, wire.MaxSessionRing, unix.EINVAL)
	}
	size := os.Getpagesize()
	for size < int(n) {
		size <<= 1
	}
	return size, nil
}

// sessionSync serves SessionSync.
func (c *conn) sessionSync(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok || len(body) != 0 {
		return c.result(0, fmt.Errorf("session sync: bad session %d: %w", h.Arg, unix.EBADF))
	}
	if h.Flags&wire.FlagNoFlush == 0 {
		c.s.Flush()
	}
	lost, big := ss.TakeLost()
	if ss.DeliversToStreams() {
		// Too large records are lost records in the streams, and perf's
		// LOST cannot say why: the reader is given the session's count.
		big = ss.TooLarge()
	}
	out := wire.AppendResult(c.out[:0], 0, nil)
	out = wire.LE.AppendUint64(out, lost)
	out = wire.LE.AppendUint64(out, big)
	c.out = out[:0]
	return c.reply(out)
}

// replyRights is reply with descriptors.
func (c *conn) replyRights(b []byte, fds ...int) bool {
	if now := time.Now(); c.deadline.Sub(now) < c.s.timeout/2 {
		c.deadline = now.Add(c.s.timeout)
		c.c.SetWriteDeadline(c.deadline)
	}
	if _, _, err := c.c.WriteMsgUnix(b, unix.UnixRights(fds...), nil); err != nil {
		c.log.Warn("write", "err", err)
		return false
	}
	return true
}
