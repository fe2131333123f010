package fusefs

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/procmem"
)

// A write that FUSE sends in pieces.
//
// FUSE carries a write's bytes in WRITE requests of at most max_write bytes
// (1 MiB here) and max_pages pages (256 in Linux 6.12: FUSE_MAX_MAX_PAGES,
// whatever the server asks), and pins the pages of one iovec at a time, so
// that each non-empty iovec takes a page at least (fuse_get_user_pages): a
// writev(2) of more than 256 non-empty iovecs, or a buffer over 256 pages,
// reaches the server as several requests at successive offsets, each sent
// once the one before is answered with its full length (fuse_direct_io).
// user_events_write takes the whole as one record. So the first piece, short
// of what the call asked (read from /proc/<tid>/syscall), is made whole
// from the caller's memory — the thread is blocked in that call — and
// written as one record, and the pieces that follow are answered their
// lengths without a record. Where the rest cannot be read, the buffer did
// fault, and the write is user_events' EFAULT (subsys.File.WriteFaulted).
//
// A write longer than maxWhole is not made whole: the server would hold as
// much for it. It stays EFAULT here, where the kernel takes it and drops the
// record, larger than any trace buffer page (fusefs' package doc,
// "Differences from Linux").
const maxWhole = 1 << 20

// pieces are the writes of a file whose first piece was taken whole, by
// calling thread: what is still to come.
type pieces struct {
	// waiting is len(m): a write looks no further while it is 0, as it
	// nearly always is.
	waiting atomic.Int32
	mu      sync.Mutex
	m       map[int]rest
}

// rest is what is still to come of a write taken whole: the call (a piece
// of another call is no piece of this one), the offset FUSE sends the next
// piece at, and how many bytes.
type rest struct {
	call procfs.Syscall
	next int64
	left int
	at   time.Time
}

const (
	// maxRests bounds the writes a file waits the pieces of: one for each
	// of its threads in the middle of such a write. Past it, the oldest
	// waits are forgotten, and a later piece of theirs is taken for a
	// write of its own (its bytes as a write index and payload: an
	// error, or a record of those bytes), which only a process with more
	// threads writing at once than this can cause itself.
	maxRests = 64
	// restFor is how long the pieces of a write are waited for: FUSE sends
	// each at once when the one before is answered, and a thread killed
	// between two sends none. Past it, a thread of the same id making the
	// same call at the same offset is not taken for the dead one.
	restFor = 10 * time.Second
)

// take reports whether a request of n bytes at off from thread tid in call
// is the next piece of a write taken whole, and takes it.
func (p *pieces) take(tid int, call procfs.Syscall, off int64, n int) bool {
	if p.waiting.Load() == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() { p.waiting.Store(int32(len(p.m))) }()
	r, ok := p.m[tid]
	if !ok {
		return false
	}
	delete(p.m, tid)
	if r.call != call || r.next != off || n > r.left || time.Since(r.at) > restFor {
		return false
	}
	if r.left -= n; r.left > 0 {
		r.next += int64(n)
		p.m[tid] = r
	}
	return true
}

// expect records that thread tid's call has left bytes still to come, the
// next piece at offset next.
func (p *pieces) expect(tid int, call procfs.Syscall, next int64, left int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[int]rest)
	}
	if len(p.m) >= maxRests {
		oldest := -1
		for id, r := range p.m {
			if oldest < 0 || r.at.Before(p.m[oldest].at) {
				oldest = id
			}
		}
		delete(p.m, oldest)
	}
	p.m[tid] = rest{call: call, next: next, left: left, at: time.Now()}
	p.waiting.Store(int32(len(p.m)))
}

// whole reads the total bytes a write(2), pwrite(2), writev(2) or
// pwritev(2) asked to write from the memory of its process, blocked in the
// call; false where they cannot all be read (a buffer faulted), or total is
// over maxWhole. Unlike iovLen's read of the iovec array, which the kernel
// has just read itself, the bytes past the first piece were not touched by
// the call yet: they may be memory whose fault nobody serves, so they are
// read through procmem, whose accesses are given up after its StallLimit
// and refused while one of the process's stalls.
func whole(mem *procmem.Mem, call procfs.Syscall, total int) ([]byte, bool) {
	if total <= 0 || total > maxWhole {
		return nil, false
	}
	var remote []unix.RemoteIovec
	switch call.Nr {
	case unix.SYS_WRITE, unix.SYS_PWRITE64:
		remote = []unix.RemoteIovec{{Base: uintptr(call.Args[1]), Len: total}}
	case unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2:
		cnt := call.Args[2]
		if cnt == 0 || cnt > 1024 { // UIO_MAXIOV
			return nil, false
		}
		arr := make([]byte, 16*cnt)
		if _, err := mem.ReadAt(arr, call.Args[1]); err != nil {
			return nil, false
		}
		for i := range cnt {
			base, n := binary.NativeEndian.Uint64(arr[16*i:]), binary.NativeEndian.Uint64(arr[16*i+8:])
			if n > 0 {
				remote = append(remote, unix.RemoteIovec{Base: uintptr(base), Len: int(min(n, maxWhole))})
			}
		}
		if len(remote) == 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	buf := make([]byte, total)
	if n, err := mem.ReadV(buf, remote); err != nil || n != total {
		return nil, false
	}
	return buf, true
}
