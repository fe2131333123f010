package subsys

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// rawReader is an open per_cpu/cpuN/trace_pipe_raw (tracing_buffers_open,
// _read, _poll): the CPU's buffer read as the ring buffer's pages, each
// consumed as it is read (ftrace.Ring.ReadRaw), which trace-cmd record
// writes into its trace.dat as they are. Unlike the kernel's, it cannot
// be spliced: through FUSE a splice reads nothing (uetrace run's guard
// does it for the caller with reads, package internal/runguard).
type rawReader struct {
	t   *traceBuffer
	cpu int

	mu   sync.Mutex // one read at a time, as the file's spare page is one
	page []byte     // the page read last (info->spare)
	read int        // how much of page was returned (info->read)

	// The poll waiting for the buffer_percent watermark, if one is: one
	// goroutine per open file, which a poll again points at its wake.
	pollMu   sync.Mutex
	pollWake func()
	stop     context.CancelFunc // ends the poll's goroutine, at close
	closed   bool
}

func newRawReader(t *traceBuffer, cpu int) *rawReader {
	return &rawReader{t: t, cpu: cpu}
}

// readRaw is a read(2) of p's length (tracing_buffers_read): the rest of
// the page a read before left, or the next page of the CPU's buffer —
// waiting for one while the buffer is empty, or EAGAIN with nonblock. A
// read too short for the page header or for the next event returns 0 and
// consumes nothing, as in the kernel.
func (r *rawReader) readRaw(ctx context.Context, p []byte, nonblock bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, wait, err := r.tryRead(p, nonblock)
		if !wait {
			return n, err
		}
		// The wait holds no lock, as tracing_buffers_read waits
		// (wait_on_pipe) holding none: a poll or another reader of the
		// file is not blocked behind a read that waits.
		if err := r.t.ring.WaitRaw(ctx, r.cpu); err != nil {
			return 0, err
		}
	}
}

// tryRead is one pass of readRaw under r.mu: what a read returns now, or
// wait if the buffer is empty and the read blocks.
func (r *rawReader) tryRead(p []byte, nonblock bool) (n int, wait bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ring := r.t.ring
	for {
		if r.read < len(r.page) {
			n := copy(p, r.page[r.read:])
			r.read += n
			return n, false, nil
		}
		if page, ok := ring.ReadRaw(r.page[:0], r.cpu, len(p)); ok {
			r.page, r.read = page, 0
			continue
		}
		if !ring.Empty(r.cpu) {
			return 0, false, io.EOF
		}
		if nonblock {
			return 0, false, fmt.Errorf("trace_pipe_raw of cpu %d is empty: %w", r.cpu, unix.EAGAIN)
		}
		return 0, true, nil
	}
}

// splicePage is the next page of the CPU's buffer as splice(2) takes one
// (tracing_buffers_splice_read): a page the writer has left, EAGAIN when
// there is none.
func (r *rawReader) splicePage() ([]byte, error) {
	page, ok := r.t.ring.SpliceRaw(nil, r.cpu)
	if !ok {
		return nil, fmt.Errorf("trace_pipe_raw of cpu %d has no page the writer has left: %w", r.cpu, unix.EAGAIN)
	}
	return page, nil
}

// wait returns once a read would not wait (what readRaw waits for), with
// ctx's error if ctx is done first.
func (r *rawReader) wait(ctx context.Context, nonblock bool) error {
	r.mu.Lock()
	left := r.read < len(r.page)
	r.mu.Unlock()
	if left || nonblock {
		return nil
	}
	return r.t.ring.WaitRaw(ctx, r.cpu)
}

// poll is tracing_buffers_poll: readable once buffer_percent of the
// CPU's buffer is filled (ftrace.Ring.RawReady; any record at all when it
// is 0). What a read left of a page does not count, as in the kernel. If
// not readable and wake is non-nil, wake is called once, from another
// goroutine, when it is; polling again before then replaces wake, so that
// a caller polling in a loop holds one goroutine.
func (r *rawReader) poll(wake func()) bool {
	ring := r.t.ring
	percent := func() int { return int(r.t.percent.v.Load()) }
	if ring.RawReady(r.cpu, percent()) || wake == nil {
		return ring.RawReady(r.cpu, percent())
	}
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	if r.closed {
		return true
	}
	if r.pollWake != nil {
		r.pollWake = wake
		return false
	}
	r.pollWake = wake
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	go func() {
		err := ring.WaitRawReady(ctx, r.cpu, percent)
		r.pollMu.Lock()
		w := r.pollWake
		r.pollWake = nil
		r.pollMu.Unlock()
		stop()
		if err == nil {
			w()
		}
	}()
	return false
}

// close ends a poll's wait.
func (r *rawReader) close() {
	r.pollMu.Lock()
	defer r.pollMu.Unlock()
	r.closed = true
	if r.stop != nil {
		r.stop()
	}
}
