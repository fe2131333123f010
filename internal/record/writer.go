package record

import (
	"io"
	"sync"
)

// backgroundWriter writes to a file from its own goroutine, so that a
// recording keeps draining its rings (or its daemon session) while the
// disk is slow: a write that blocks for a moment — writeback, a busy
// device — is absorbed here instead of filling the buffers the records
// come from. Like perf record's own writing, it gives up nothing when the
// disk stays too slow: once maxQueued bytes wait, Write waits as well.
//
// Writes are copied (perfdata's Writer reuses its buffer) and done in
// order; Seek and Close wait for every queued write first.
type backgroundWriter struct {
	ws    io.WriteSeeker
	queue chan []byte
	free  chan []byte // spent chunks, reused
	idle  sync.WaitGroup
	done  chan struct{}

	mu  sync.Mutex
	err error // the first write error
}

// maxQueued bounds the bytes waiting to be written: 16 chunks of perfdata's
// 1 MiB buffer.
const maxQueuedChunks = 16

func newBackgroundWriter(ws io.WriteSeeker) *backgroundWriter {
	bw := &backgroundWriter{
		ws:    ws,
		queue: make(chan []byte, maxQueuedChunks),
		free:  make(chan []byte, maxQueuedChunks),
		done:  make(chan struct{}),
	}
	go bw.run()
	return bw
}

func (bw *backgroundWriter) run() {
	defer close(bw.done)
	for b := range bw.queue {
		if bw.error() == nil {
			if n, err := bw.ws.Write(b); err != nil || n < len(b) {
				if err == nil {
					err = io.ErrShortWrite
				}
				bw.mu.Lock()
				bw.err = err
				bw.mu.Unlock()
			}
		}
		select {
		case bw.free <- b[:0]:
		default:
		}
		bw.idle.Done()
	}
}

func (bw *backgroundWriter) error() error {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	return bw.err
}

// Write queues a copy of p. It returns an earlier write's error, if any.
func (bw *backgroundWriter) Write(p []byte) (int, error) {
	if err := bw.error(); err != nil {
		return 0, err
	}
	var b []byte
	select {
	case b = <-bw.free:
	default:
	}
	b = append(b, p...)
	bw.idle.Add(1)
	bw.queue <- b
	return len(p), nil
}

// Seek waits for the queued writes, then seeks.
func (bw *backgroundWriter) Seek(offset int64, whence int) (int64, error) {
	bw.idle.Wait()
	if err := bw.error(); err != nil {
		return 0, err
	}
	return bw.ws.Seek(offset, whence)
}

// Close waits for the queued writes and stops; it does not close the
// file. It returns the first write error.
func (bw *backgroundWriter) Close() error {
	bw.idle.Wait()
	close(bw.queue)
	<-bw.done
	return bw.error()
}
