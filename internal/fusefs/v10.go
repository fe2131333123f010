package fusefs

// The v10 ABI of user_events (subsys.RegisterV10), which a tree serves
// beside today's where Options.V10 asks: DIAG_IOCSREG of a 24-byte struct
// user_reg gives a status index, and user_events_status mapped shared is a
// page with every event's status byte at its index. A FUSE file read with
// direct I/O cannot be mapped, so the interposer makes the page: it maps a
// memfd of its own in place of the file and hands it over
// (UET_IOC_STATUS), and the tree keeps it written, one page per process,
// until the process exits or execs. A program the interposer is not in (a
// static binary) gets mmap's ENODEV, as from any direct-I/O file.

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/subsys"
)

// statusPages are the v10 status pages of the tree's callers, by process.
type statusPages struct {
	mu    sync.Mutex
	pages map[int]*statusPage
}

// statusPage is one process's page: the memfd mapped here, written by a
// subsys.WatchStatus until stopped.
type statusPage struct {
	mem  []byte
	stop func()
	once sync.Once
}

func (p *statusPage) release() {
	p.once.Do(func() {
		p.stop()
		unix.Munmap(p.mem)
	})
}

// statusPageIoctl is UET_IOC_STATUS on user_events_status of a tree
// serving the v10 ABI (fileHandle.Ioctl); ENOTTY anywhere else, as tracefs
// answers.
func (h *fileHandle) statusPageIoctl(r *fuse.Request, in []byte) (int32, []byte, error) {
	if !h.fs.o.V10 || h.path != subsys.FileStatus {
		return 0, nil, unix.ENOTTY
	}
	ne := binary.NativeEndian
	if len(in) != preload.StatusSize || ne.Uint32(in) != preload.StatusSize || int32(ne.Uint32(in[4:])) < 0 {
		return 0, nil, unix.EINVAL
	}
	c, err := h.fs.caller(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.fs.statusPage(c, int(int32(ne.Uint32(in[4:])))); err != nil {
		return 0, nil, errnoOf(err)
	}
	return 0, nil, nil
}

// statusPage takes caller c's page, its descriptor pageFD, and keeps it
// written: every event's status byte at its status index, now and at every
// change. A page the process handed over before is let go.
func (f *FS) statusPage(c *callers.Caller, pageFD int) error {
	fd, err := c.Mem.GetFD(pageFD)
	if err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	defer unix.Close(fd)
	size, err := preload.SharedMemfd(fd, "the status page")
	if err != nil {
		return err
	}
	if size != subsys.V10StatusPage {
		return fmt.Errorf("the status page's memfd has %d bytes, not a page (%d): %w", size, subsys.V10StatusPage, unix.EINVAL)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("status page: mmap: %w", err)
	}
	p := &statusPage{mem: mem}
	// Stores of single bytes, each the event's status: a reader sees
	// one value or the other, and the page cannot fault (sealed).
	p.stop = f.s.WatchStatus(func(i int, st uint32) { mem[i] = byte(st) })
	f.pages.mu.Lock()
	if f.pages.pages == nil {
		f.pages.pages = map[int]*statusPage{}
	}
	old := f.pages.pages[c.TGID]
	f.pages.pages[c.TGID] = p
	f.pages.mu.Unlock()
	if old != nil {
		old.release()
	}
	go func() {
		<-c.Mem.Done() // exit, exec: the process's address space is gone
		f.pages.mu.Lock()
		if f.pages.pages[c.TGID] == p {
			delete(f.pages.pages, c.TGID)
		}
		f.pages.mu.Unlock()
		p.release()
	}()
	return nil
}

// closePages releases every page: the tree's end.
func (f *FS) closePages() {
	f.pages.mu.Lock()
	ps := f.pages.pages
	f.pages.pages = nil
	f.pages.mu.Unlock()
	for _, p := range ps {
		p.release()
	}
}
