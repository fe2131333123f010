package fusefs

import (
	"context"
	"errors"
	"io"
	"path"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/preload"
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
	_ fuse.Ioctler    = (*fileHandle)(nil)
)

// IoctlSplicePage asks an open per_cpu/cpuN/trace_pipe_raw of the tree for
// its CPU's next page as splice(2) takes one — a page the writer has left
// (ring_buffer_read_page with full set): ioctl(2) copies its 4096 bytes to
// the argument and returns 0, or fails with EAGAIN when there is no such
// page. Through FUSE a splice reads nothing (the package doc says why), so
// uetrace run's guard splices for the command with it (package
// internal/runguard). It is uetrace's own, _IOR('U', 0xe0, char[4096]);
// tracefs, and the tree's other files, answer it ENOTTY.
const IoctlSplicePage = 2<<30 | 4096<<16 | 'U'<<8 | 0xe0

// Ioctl is IOCTL: IoctlSplicePage on trace_pipe_raw, the interposer's
// UET_IOC_STATUS on user_events_status (v10.go); anything else is ENOTTY,
// as tracefs's files answer what they do not know.
func (h *fileHandle) Ioctl(ctx context.Context, r *fuse.Request, cmd uint32, arg uint64, in []byte, outSize uint32) (int32, []byte, error) {
	if cmd == preload.IocStatus {
		return h.statusPageIoctl(r, in)
	}
	if cmd != IoctlSplicePage || outSize != 4096 {
		return 0, nil, unix.ENOTTY
	}
	if h.fs.o.Flush != nil {
		h.fs.o.Flush()
	}
	page, err := h.h.SplicePage()
	if err != nil {
		return 0, nil, errnoOf(err)
	}
	return 0, page, nil
}

// nonblock reports whether a READ is made with O_NONBLOCK on the file now.
func nonblock(r *fuse.Request) bool { return r.Flags&unix.O_NONBLOCK != 0 }

// WaitRead waits until a read of trace_pipe or trace_pipe_raw would not
// block, so that a read waiting for records holds no buffer in the server
// (fuse.ReadWaiter).
func (h *fileHandle) WaitRead(ctx context.Context, r *fuse.Request) error {
	if !h.h.Pipe() {
		return nil
	}
	if h.fs.o.Flush != nil {
		h.fs.o.Flush()
	}
	return errnoOf(h.h.WaitRead(ctx, nonblock(r)))
}

// Stream makes trace_pipe and trace_pipe_raw streams (FOPEN_STREAM): no
// file position, as a pipe, reads consuming what they return.
func (h *fileHandle) Stream() bool { return h.h.Pipe() }

func (h *fileHandle) flushFirst(off int64) {
	// The records clients published into shared memory belong in the
	// buffer before its text is made: trace (all CPUs' or one's) and the
	// CPUs' stats at their first read, trace_pipe and trace_pipe_raw at
	// every read.
	if h.fs.o.Flush == nil {
		return
	}
	if base := path.Base(h.path); h.h.Pipe() || off == 0 && (base == subsys.FileTrace || base == subsys.FileStats) {
		h.fs.o.Flush()
	}
}

// Read is READ: at offset off of the text (made anew at 0), or on from
// trace_pipe or trace_pipe_raw, which block until a record arrives or the
// request is interrupted — unless the file is O_NONBLOCK now.
func (h *fileHandle) Read(ctx context.Context, r *fuse.Request, dst []byte, off int64) (int, error) {
	h.flushFirst(off)
	if h.h.Pipe() {
		n, err := h.h.ReadStream(ctx, dst, nonblock(r))
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
// offset (tracefs's write handlers ignore it). What programs published
// into shared memory before it is delivered first by the subsystem's sync
// hooks, which a write runs.
func (h *fileHandle) Write(ctx context.Context, r *fuse.Request, data []byte, off int64) (int, error) {
	n, err := h.h.Write(data)
	return n, errnoOf(err)
}

// Poll is POLL: trace_pipe is readable when it has text (tracing_poll_pipe,
// which never says writable), trace_pipe_raw at buffer_percent
// (tracing_buffers_poll); every other tracefs file has no poll method and
// is DEFAULT_POLLMASK, readable and writable.
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

// Release closes the handle; a trace_pipe read still blocked returns.
func (h *fileHandle) Release() error {
	h.acct.release()
	return h.h.Close()
}
