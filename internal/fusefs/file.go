package fusefs

import (
	"context"
	"errors"
	"io"

	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/subsys"
)

// fileHandle is an open tracefs file other than user_events_data.
type fileHandle struct {
	fs   *FS
	h    *subsys.Handle
	path string
	acct *account
}

var (
	_ fuse.Poller     = (*fileHandle)(nil)
	_ fuse.Streamer   = (*fileHandle)(nil)
	_ fuse.ReadWaiter = (*fileHandle)(nil)
)

// WaitRead waits until a read of trace_pipe would not block, so that a
// read waiting for records holds no buffer in the server (fuse.ReadWaiter).
func (h *fileHandle) WaitRead(ctx context.Context, r *fuse.Request) error {
	if !h.h.Pipe() {
		return nil
	}
	if h.fs.o.Flush != nil {
		h.fs.o.Flush()
	}
	return errnoOf(h.h.WaitRead(ctx))
}

// Stream makes trace_pipe a stream (FOPEN_STREAM): no file position, as a
// pipe, reads consuming what they return.
func (h *fileHandle) Stream() bool { return h.h.Pipe() }

func (h *fileHandle) flushFirst(off int64) {
	// The records clients published into shared memory belong in the
	// buffer before its text is made: trace at its first read, trace_pipe
	// at every read.
	if h.fs.o.Flush != nil && (h.h.Pipe() || (h.path == subsys.FileTrace && off == 0)) {
		h.fs.o.Flush()
	}
}

// Read is READ: at offset off of the text (made anew at 0), or on from
// trace_pipe, which blocks until a record arrives or the request is
// interrupted.
func (h *fileHandle) Read(ctx context.Context, r *fuse.Request, dst []byte, off int64) (int, error) {
	h.flushFirst(off)
	if h.h.Pipe() {
		n, err := h.h.ReadContext(ctx, dst)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		return n, errnoOf(err)
	}
	n, err := h.h.ReadAt(dst, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, errnoOf(err)
}

// Write is WRITE: the whole buffer is one write to the file, at whatever
// offset (tracefs's write handlers ignore it).
func (h *fileHandle) Write(ctx context.Context, r *fuse.Request, data []byte, off int64) (int, error) {
	n, err := h.h.Write(data)
	return n, errnoOf(err)
}

// Poll is POLL: trace_pipe is readable when it has text (tracing_poll_pipe,
// which never says writable); every other tracefs file has no poll method
// and is DEFAULT_POLLMASK, readable and writable.
func (h *fileHandle) Poll(ctx context.Context, r *fuse.Request, events uint32, wake func()) (uint32, error) {
	const (
		pollIn  = 0x1 | 0x40  // EPOLLIN | EPOLLRDNORM
		pollOut = 0x4 | 0x100 // EPOLLOUT | EPOLLWRNORM
	)
	if !h.h.Pipe() {
		return pollIn | pollOut, nil
	}
	if h.fs.o.Flush != nil {
		h.fs.o.Flush()
	}
	if h.h.Poll(wake) {
		return pollIn, nil
	}
	return 0, nil
}

func (h *fileHandle) Flush(ctx context.Context, r *fuse.Request) error { return nil }

// Release closes the handle; a trace_pipe read still blocked returns.
func (h *fileHandle) Release() error {
	h.acct.release()
	return h.h.Close()
}
