package daemon

// The requests of perf-like sessions: make one, attach it to events, set
// an event's filter, read records (SessionRead here; the session streams' in
// session_stream.go). All are for tracers.

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
)

// opSession makes a session, as perf_event_open of tracepoints does: tracers only,
// its buffer counted in the uid's.
func (c *conn) opSession(h wire.Header, body []byte) bool {
	if !c.tracer {
		return c.result(0, c.denied(errNeedsTracer("session: events' records, which perf gives only with CAP_PERFMON while perf_event_paranoid > -1;", c.uid)))
	}
	if len(c.handles) >= c.s.limits.Handles {
		return c.result(0, c.overLimit(fmt.Errorf("session: this connection holds %d files and sessions open, the most one may (`uetrace serve --max-handles`): %w", len(c.handles), unix.EMFILE)))
	}
	if len(body) != 4 || wire.LE.Uint32(body) > maxSessionBuffer {
		return c.result(0, fmt.Errorf("session: buffer size missing or over %d bytes: %w", maxSessionBuffer, unix.EINVAL))
	}
	bytes := sessionBytes(wire.LE.Uint32(body))
	if err := c.addSession(1, bytes); err != nil {
		return c.result(0, c.overLimit(err))
	}
	ss := c.s.sys.NewSession(subsys.SessionOptions{
		BufferBytes: int(wire.LE.Uint32(body)), Other: h.Flags&wire.FlagOther != 0, Comm: h.Flags&wire.FlagComm != 0,
	})
	c.sessBytes[ss] = bytes
	return c.result(int64(c.add(ss)), nil)
}

// opAttach attaches a session to the events a pattern matches.
func (c *conn) opAttach(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok {
		return c.result(0, fmt.Errorf("attach: bad session %d: %w", h.Arg, unix.EBADF))
	}
	c.s.Flush() // records published before the attach are not the session's
	evs, err := ss.AttachMatching(string(body), h.Flags&wire.FlagFollow != 0)
	if err != nil {
		return c.result(0, err)
	}
	out := wire.AppendHeader(c.out[:0], wire.OpData, 0, 0)
	for _, ev := range evs {
		if len(out)+len(ev.System())+len(ev.Tracepoint())+2 > wire.MaxMessage {
			break // attached all the same; the list is informational
		}
		out = append(append(append(append(out, ev.System()...), ':'), ev.Tracepoint()...), 0)
	}
	c.out = out[:0]
	return c.reply(out)
}

// opSetFilter sets a session's filter for one event, as PERF_EVENT_IOC_SET_FILTER.
func (c *conn) opSetFilter(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok {
		return c.result(0, fmt.Errorf("set filter: bad session %d: %w", h.Arg, unix.EBADF))
	}
	name, text, ok := strings.Cut(string(body), "\x00")
	sys, tp, ok2 := strings.Cut(name, ":")
	if !ok || !ok2 {
		return c.result(0, fmt.Errorf("set filter: want system:tracepoint, NUL, filter: %w", unix.EINVAL))
	}
	ev := c.s.sys.Lookup(sys, tp)
	if ev == nil {
		return c.result(0, fmt.Errorf("set filter: no event %s: %w", name, unix.ENOENT))
	}
	c.s.Flush() // records published before the filter are not filtered
	return c.result(0, ss.SetFilter(ev, text))
}

// opSessionRead reads a session's records into the reply.
func (c *conn) opSessionRead(h wire.Header, body []byte) bool {
	ss, ok := c.handles[h.Arg].(*subsys.Session)
	if !ok || len(body) != 4 {
		return c.result(0, fmt.Errorf("session read: bad session %d: %w", h.Arg, unix.EBADF))
	}
	c.s.Flush()
	return c.sessionRead(ss, int(wire.LE.Uint32(body)), h.Flags&wire.FlagNoWait != 0)
}
