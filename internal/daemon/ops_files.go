package daemon

// The requests on tracefs files: open, read, write, close, and listing a
// directory, each with the access rules of policy.go.

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
)

// opOpen opens a tracefs file: tracing control and others' records for tracers
// only (policy.go), and no more than the connection's handles.
func (c *conn) opOpen(h wire.Header, body []byte) bool {
	if !c.tracer && openNeedsTracer(string(body), int(h.Arg)) {
		return c.result(0, c.denied(errNotTracer(string(body), int(h.Arg), c.uid)))
	}
	if len(c.handles) >= c.s.limits.Handles {
		return c.result(0, c.overLimit(fmt.Errorf("open %q: this connection holds %d files and sessions open, the most one may (`uetrace serve --max-handles`): %w", body, len(c.handles), unix.EMFILE)))
	}
	fh, err := c.s.sys.FS().Open(string(body), int(h.Arg), c.cred)
	if err != nil {
		return c.result(0, err)
	}
	hn := c.add(fh)
	if subsys.SizesBuffer(string(body)) && int(h.Arg)&(os.O_WRONLY|os.O_RDWR) != 0 {
		c.bufHandles[hn] = true
	}
	return c.result(int64(hn), nil)
}

// opRead reads an open file; a trace_pipe read waits (blocking).
func (c *conn) opRead(h wire.Header, body []byte) bool {
	fh, ok := c.handles[h.Arg].(*subsys.Handle)
	if !ok || len(body) != 4 {
		return c.result(0, fmt.Errorf("read: bad handle %d: %w", h.Arg, unix.EBADF))
	}
	// What clients published into their rings before this read is
	// there to be read, as their writes would be with the kernel.
	c.s.Flush()
	max := min(int(wire.LE.Uint32(body)), wire.MaxMessage-wire.HeaderSize)
	out := wire.AppendHeader(c.out[:0], wire.OpData, 0, 0)
	out = append(out, make([]byte, max)...)
	var n int
	var err error
	// While it waits (trace_pipe), the drainers wake at the first record.
	done := c.s.drainers.readerWaits()
	c.blocking(func(ctx context.Context) { n, err = fh.ReadContext(ctx, out[wire.HeaderSize:]) })
	done()
	c.out = out[:0]
	if err != nil && err != io.EOF {
		return c.result(0, err)
	}
	return c.reply(out[:wire.HeaderSize+n])
}

// opWriteFile writes to an open file.
func (c *conn) opWriteFile(h wire.Header, body []byte) bool {
	fh, ok := c.handles[h.Arg].(*subsys.Handle)
	if !ok {
		return c.result(0, fmt.Errorf("write: bad handle %d: %w", h.Arg, unix.EBADF))
	}
	if c.bufHandles[h.Arg] {
		return c.writeBufferSize(fh, body)
	}
	// A write to tracefs may disable an event or clear the buffer: the
	// subsystem's sync hook (beforeChange) delivers what clients
	// published before it first, as their writes to the kernel would
	// have been.
	n, err := fh.Write(body)
	return c.result(int64(n), err)
}

// opCloseFile closes an open file or session.
func (c *conn) opCloseFile(h wire.Header, body []byte) bool {
	x, ok := c.handles[h.Arg]
	if !ok {
		return c.result(0, fmt.Errorf("close: bad handle %d: %w", h.Arg, unix.EBADF))
	}
	c.s.Flush() // a session closing gets what was published before
	delete(c.handles, h.Arg)
	delete(c.bufHandles, h.Arg)
	c.nhandles.Store(int32(len(c.handles)))
	c.closeHandle(x)
	return c.result(0, nil)
}

// opReadDir lists a directory from the index the client asks, a message's worth
// at a time.
func (c *conn) opReadDir(h wire.Header, body []byte) bool {
	ents, err := c.s.sys.FS().ReadDir(string(body))
	if err != nil && (ents == nil || int(h.Arg) >= len(ents)) {
		return c.result(0, err)
	}
	out := wire.AppendHeader(c.out[:0], wire.OpData, 0, 0)
	for _, e := range ents[min(int(h.Arg), len(ents)):] {
		// A name is at most what a message holds: subsys limits an
		// event's name to MAX_EVENT_DESC.
		if len(out)+4+len(e.Name)+1 > wire.MaxMessage {
			break // the client asks for the rest
		}
		out = wire.LE.AppendUint32(out, uint32(e.Mode))
		out = append(append(out, e.Name...), 0)
	}
	c.out = out[:0]
	return c.reply(out)
}
