package record

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// fileWriter writes a recording's file in chunks of chunkSize bytes from a
// goroutine of its own, so that a recording keeps draining its rings (or
// its daemon's session) while the disk is slow: a write that blocks for a
// moment — writeback, a busy device — is absorbed here instead of filling
// the buffers the records come from. Like perf record's own writing, it
// gives up nothing when the disk stays too slow: once maxQueuedChunks
// chunks wait, Write waits as well.
//
// A Write copies its bytes once, into the chunk being filled: a page-aligned
// buffer of its own. A full chunk — chunkSize bytes at a file offset that
// is a multiple of chunkSize — is written with O_DIRECT when the file is a
// regular file whose file system takes it (through a second descriptor of
// the file, opened with O_DIRECT): straight from the chunk to the device,
// with no copy into the page cache, which on this kind of machine costs as
// much CPU as everything else a record costs its reader (1.15 ns a byte
// buffered against 0.11–0.15 ns with O_DIRECT, measured with dd here). A
// file system that refuses O_DIRECT — at open, or at the first write —
// gets buffered writes of the same chunks. The last, partial chunk, and
// whatever comes after the first Seek that moves (perfdata's header
// rewrite), are written buffered: a mix of the two on one file is what the
// kernel keeps coherent (a buffered write of pages written with O_DIRECT
// reads them back first).
//
// Writes are in order; Seek and Close wait for every queued write first.
type fileWriter struct {
	ws     io.WriteSeeker
	f      *os.File // ws, when it is an *os.File: written positionally
	direct int      // an O_DIRECT descriptor of the file; -1 when none

	cur     []byte // the chunk being filled
	base    int64  // the file offset of cur[0]
	staging bool   // writes are staged in chunks; false after a Seek that moved

	queue chan chunk
	free  chan []byte // spent chunks, reused
	idle  sync.WaitGroup
	done  chan struct{}

	mu  sync.Mutex
	err error // the first write error

	directBytes, bufferedBytes atomic.Uint64
}

// chunk is a chunk queued for writing at off.
type chunk struct {
	b   []byte
	off int64
	// partial: not chunkSize bytes, or not at an aligned offset: written
	// buffered.
	partial bool
}

// chunkSize is the size of a write: large enough that the system call and
// the device's request cost little per record, a multiple of every page
// size and logical block size O_DIRECT can ask for.
const chunkSize = 1 << 20

// maxQueuedChunks bounds the chunks waiting to be written.
const maxQueuedChunks = 16

// openDirect opens f again for writing with O_DIRECT, or says why not:
// the test of the fallbacks replaces it.
var openDirect = func(f *os.File) (int, error) {
	return unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
}

func newFileWriter(ws io.WriteSeeker) *fileWriter {
	fw := &fileWriter{
		ws:      ws,
		direct:  -1,
		staging: true,
		queue:   make(chan chunk, maxQueuedChunks),
		free:    make(chan []byte, maxQueuedChunks+1),
		done:    make(chan struct{}),
	}
	// A regular file is written positionally, and with O_DIRECT if it
	// takes it; anything else in order.
	var st unix.Stat_t
	if f, ok := ws.(*os.File); ok && unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		fw.f = f
		if fd, err := openDirect(f); err == nil {
			fw.direct = fd
		}
	}
	go fw.run()
	return fw
}

func (fw *fileWriter) run() {
	defer close(fw.done)
	for c := range fw.queue {
		if fw.error() == nil {
			fw.setErr(fw.write(c))
		}
		select {
		case fw.free <- c.b[:0]:
		default:
			unix.Munmap(c.b[:cap(c.b)])
		}
		fw.idle.Done()
	}
}

// write writes one chunk: O_DIRECT when it is a whole aligned chunk and
// the file takes it, else buffered.
func (fw *fileWriter) write(c chunk) error {
	if fw.direct >= 0 && !c.partial {
		n, err := unix.Pwrite(fw.direct, c.b, c.off)
		if err == nil && n == len(c.b) {
			fw.directBytes.Add(uint64(n))
			return nil
		}
		// Refused (EINVAL on a file system without O_DIRECT, or any
		// other way): buffered from now on, this chunk included.
		unix.Close(fw.direct)
		fw.direct = -1
	}
	var n int
	var err error
	if fw.f != nil {
		n, err = fw.f.WriteAt(c.b, c.off)
	} else {
		n, err = fw.ws.Write(c.b)
	}
	fw.bufferedBytes.Add(uint64(n))
	if err == nil && n < len(c.b) {
		err = io.ErrShortWrite
	}
	return err
}

func (fw *fileWriter) setErr(err error) {
	if err == nil {
		return
	}
	fw.mu.Lock()
	if fw.err == nil {
		fw.err = err
	}
	fw.mu.Unlock()
}

func (fw *fileWriter) error() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
}

// newChunk is a spent chunk, or a new page-aligned one: mapped, not of the
// Go heap, so that O_DIRECT may take it as it is.
func (fw *fileWriter) newChunk() ([]byte, error) {
	select {
	case b := <-fw.free:
		return b, nil
	default:
	}
	b, err := unix.Mmap(-1, 0, chunkSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("record: a buffer for the file: mmap: %w", err)
	}
	return b[:0], nil
}

// submit queues c for writing.
func (fw *fileWriter) submit(c chunk) {
	fw.idle.Add(1)
	fw.queue <- c
}

// Write stages a copy of p. It returns an earlier write's error, if any.
func (fw *fileWriter) Write(p []byte) (int, error) {
	if err := fw.error(); err != nil {
		return 0, err
	}
	if !fw.staging {
		fw.idle.Wait()
		n, err := fw.ws.Write(p)
		fw.setErr(err)
		return n, err
	}
	n := len(p)
	for len(p) > 0 {
		if fw.cur == nil {
			b, err := fw.newChunk()
			if err != nil {
				return n - len(p), err
			}
			fw.cur = b
		}
		k := copy(fw.cur[len(fw.cur):chunkSize], p)
		fw.cur = fw.cur[:len(fw.cur)+k]
		p = p[k:]
		if len(fw.cur) == chunkSize {
			fw.submit(chunk{b: fw.cur, off: fw.base})
			fw.base += chunkSize
			fw.cur = nil
		}
	}
	return n, nil
}

// flush queues the partial chunk, buffered, and waits for every write.
func (fw *fileWriter) flush() error {
	if len(fw.cur) > 0 {
		fw.submit(chunk{b: fw.cur, off: fw.base, partial: true})
		fw.base += int64(len(fw.cur))
		fw.cur = nil
	}
	fw.idle.Wait()
	return fw.error()
}

// Seek waits for the queued writes, then seeks. A Seek to where the next
// write goes while staging changes nothing; any other ends the staging:
// what follows is written buffered, as it comes.
func (fw *fileWriter) Seek(offset int64, whence int) (int64, error) {
	if fw.staging {
		pos := fw.base + int64(len(fw.cur))
		if whence == io.SeekStart && offset == pos || whence == io.SeekCurrent && offset == 0 {
			return pos, nil
		}
		if err := fw.flush(); err != nil {
			return 0, err
		}
		fw.staging = false
		// The staged chunks were written at their offsets: the file's
		// own position is where staging ended.
		if _, err := fw.ws.Seek(fw.base, io.SeekStart); err != nil {
			return 0, err
		}
	}
	fw.idle.Wait()
	if err := fw.error(); err != nil {
		return 0, err
	}
	return fw.ws.Seek(offset, whence)
}

// Close writes what is staged and stops; it does not close the file. It
// returns the first write error.
func (fw *fileWriter) Close() error {
	err := fw.flush()
	close(fw.queue)
	<-fw.done
	for {
		select {
		case b := <-fw.free:
			unix.Munmap(b[:cap(b)])
			continue
		default:
		}
		break
	}
	if fw.direct >= 0 {
		unix.Close(fw.direct)
		fw.direct = -1
	}
	if err == nil {
		err = fw.error()
	}
	return err
}
