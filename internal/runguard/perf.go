package runguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/perfevent"
)

// perfState is what the guard keeps to answer perf_event_open: the tree's
// control file (perfevent.ControlFile), opened at the first call, and
// whether an event waits for an exec.
type perfState struct {
	mu     sync.Mutex
	ctl    int // -1 or 0 before the first open: see control
	ctlErr error
	opened bool
	onExec bool
}

// struct seccomp_notif_addfd, and SECCOMP_IOCTL_NOTIF_ADDFD,
// SECCOMP_IOW(3, struct seccomp_notif_addfd).
type notifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

const (
	ioctlNotifAddfd = 0x40182103
	addfdFlagSend   = 1 << 1 // SECCOMP_ADDFD_FLAG_SEND: the new descriptor is the call's result
)

// perfEventOpen answers a perf_event_open of one of the tree's tracepoints
// (see the package doc) and reports whether it did; other calls go on to
// decide and the kernel. The tree makes the event (perfevent.OpOpen) and
// the guard installs the event's file, opened through the caller's root,
// in the caller as the call's result.
func (g *Guard) perfEventOpen(listener int, n *notif) bool {
	pid := int(n.Pid)
	// struct perf_event_attr: u32 type, u32 size, u64 config.
	var hdr [16]byte
	if g.Tracepoint == nil || !readFull(pid, n.Args[0], hdr[:]) {
		return false // the kernel's answer, EFAULT among them
	}
	typ, size, config := binary.NativeEndian.Uint32(hdr[0:]), binary.NativeEndian.Uint32(hdr[4:]), binary.NativeEndian.Uint64(hdr[8:])
	if typ != unix.PERF_TYPE_TRACEPOINT {
		return false
	}
	name, ours := g.Tracepoint(pid, config)
	if !ours {
		return false
	}
	what := fmt.Sprintf("tracepoint id %d", config)
	if name != "" {
		what = fmt.Sprintf("%s (tracepoint id %d)", name, config)
	}
	fail := func(errno unix.Errno, why string) bool {
		// The caller's memory was read: it must still be the caller
		// that asked (its pid not reused).
		if ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&n.ID)) != nil {
			return true
		}
		resp := notifResp{ID: n.ID, Error: -int32(errno)}
		ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
		if why != "" {
			g.say(fmt.Sprintf("uetrace run: perf_event_open of %s refused (%s): %s", what, errnoName(errno), why))
		}
		return true
	}
	// perf_copy_attr: size 0 is VER0; out of range is E2BIG, and the
	// kernel writes the size it knows back into the caller's attr.
	if size == 0 {
		size = perfevent.MinAttrSize
	}
	if size < perfevent.MinAttrSize || size > perfevent.MaxAttrSize {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], perfevent.AttrSize)
		writeFull(pid, n.Args[0]+4, b[:])
		return fail(unix.E2BIG, "")
	}
	raw := make([]byte, size)
	if !readFull(pid, n.Args[0], raw) {
		return fail(unix.EFAULT, "")
	}
	if int32(n.Args[3]) != -1 {
		return fail(unix.EOPNOTSUPP, "uetrace's events cannot be put in an event group (group_fd); open them alone, or record them with uetrace record")
	}
	root, ctl, err := g.control(pid)
	if err != nil {
		return fail(unix.EOPNOTSUPP, fmt.Sprintf("the tree answers no perf events here (%v); record them with uetrace record", err))
	}
	flags := n.Args[4]
	rep, err := g.request(ctl, &perfevent.Request{Op: perfevent.OpOpen, PID: int32(n.Args[1]), CPU: int32(n.Args[2]),
		Flags: int32(flags), Caller: n.Pid, Attr: raw})
	if err != nil {
		return fail(unix.EIO, fmt.Sprintf("asking the tree: %v", err))
	}
	if rep.Errno != 0 {
		why := ""
		if rep.Errno == unix.EOPNOTSUPP {
			words := strings.TrimSuffix(strings.TrimPrefix(rep.Why, "perf_event_open: "), ": "+rep.Errno.Error())
			why = "uetrace cannot give " + words + "; record them with uetrace record"
		}
		return fail(rep.Errno, why)
	}
	fd, err := unix.Open(root+"/"+perfevent.Path(rep.Value), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		errno := errnoOf(err)
		switch errno {
		case unix.EPERM, unix.EOPNOTSUPP, unix.EIO, unix.EINVAL:
			return fail(unix.EOPNOTSUPP, fmt.Sprintf("its ring would be shared memory through FUSE passthrough, which the server of the tree cannot use here (%v: it needs Linux 6.9 or later and CAP_SYS_ADMIN: uetrace run as root, or a daemon running as root); record them with uetrace record", err))
		}
		return fail(errno, "")
	}
	// The tree has made the event: whatever happens now, this descriptor's
	// close tells it whether the caller got it.
	defer unix.Close(fd)
	add := notifAddfd{ID: n.ID, Flags: addfdFlagSend, Srcfd: uint32(fd)}
	if flags&perfevent.FlagFDCloexec != 0 {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), ioctlNotifAddfd, uintptr(unsafe.Pointer(&add))); errno != 0 && errno != unix.ENOENT {
		// No room in the caller's table (EMFILE), say: the call fails
		// so. ENOENT: the caller is gone.
		return fail(errno, "")
	}
	if binary.NativeEndian.Uint64(raw[40:])&(1<<12) != 0 { // enable_on_exec
		g.perf.mu.Lock()
		g.perf.onExec = true
		g.perf.mu.Unlock()
	}
	return true
}

// mmap is a shared mapping of a file: of an event's file, the tree sizes
// the event's ring for it first (perfevent.OpMmap) and answers what
// perf_mmap would refuse; the mapping itself is the kernel's, of the ring's
// memfd (FUSE passthrough).
func (g *Guard) mmap(n *notif) (unix.Errno, string) {
	pid := int(n.Pid)
	fd := int32(n.Args[4])
	if fd < 0 || len(g.TreeDirs) == 0 {
		return 0, ""
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil || !g.underTree(link) {
		return 0, ""
	}
	id, ok := perfevent.IDOfPath(link)
	if !ok {
		return 0, ""
	}
	offset := int64(n.Args[5])
	if n.Arch == unix.AUDIT_ARCH_I386 {
		offset *= 4096 // mmap2's offset is in pages
	}
	_, ctl, err := g.control(pid)
	if err != nil {
		return 0, ""
	}
	rep, err := g.request(ctl, &perfevent.Request{Op: perfevent.OpMmap, Event: id, Length: n.Args[1], Offset: offset, Prot: uint32(n.Args[2])})
	if err != nil {
		return unix.EIO, fmt.Sprintf("uetrace run: mmap of a perf event's ring: asking the tree: %v", err)
	}
	if rep.Errno == unix.EPERM {
		return rep.Errno, "uetrace run: mmap of a perf event's ring refused (EPERM): " + strings.TrimSuffix(rep.Why, ": "+rep.Errno.Error())
	}
	return rep.Errno, ""
}

// exec is an execve: events that wait for an exec of the caller's process
// (enable_on_exec) are enabled first. Only when the guard made such an
// event does it ask the tree.
func (g *Guard) exec(n *notif) {
	g.perf.mu.Lock()
	on := g.perf.onExec
	g.perf.mu.Unlock()
	if !on {
		return
	}
	if _, ctl, err := g.control(int(n.Pid)); err == nil {
		g.request(ctl, &perfevent.Request{Op: perfevent.OpExec, Caller: n.Pid})
	}
}

// underTree reports whether a path of the command's mount namespace is in
// the tree.
func (g *Guard) underTree(path string) bool {
	for _, dir := range g.TreeDirs {
		if strings.HasPrefix(path, dir+"/") {
			return true
		}
	}
	return false
}

// control returns the tree's root as pid sees it, through its /proc root,
// and the control file, opened at the first call and kept: its error
// stays.
func (g *Guard) control(pid int) (string, int, error) {
	if len(g.TreeDirs) == 0 {
		return "", -1, fmt.Errorf("no tree to ask: %w", unix.ENOENT)
	}
	root := fmt.Sprintf("/proc/%d/root%s", pid, g.TreeDirs[0])
	g.perf.mu.Lock()
	defer g.perf.mu.Unlock()
	if !g.perf.opened {
		g.perf.opened = true
		fd, err := unix.Open(root+"/"+perfevent.Dir+"/"+perfevent.ControlFile, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			g.perf.ctl, g.perf.ctlErr = -1, fmt.Errorf("opening its control file: %w", err)
		} else {
			g.perf.ctl = fd
		}
	}
	return root, g.perf.ctl, g.perf.ctlErr
}

// request sends r to the control file and reads the reply.
func (g *Guard) request(ctl int, r *perfevent.Request) (perfevent.Reply, error) {
	g.perf.mu.Lock()
	defer g.perf.mu.Unlock()
	if _, err := unix.Write(ctl, r.Encode()); err != nil {
		return perfevent.Reply{}, err
	}
	var b [1100]byte
	k, err := unix.Pread(ctl, b[:], 0)
	if err != nil {
		return perfevent.Reply{}, err
	}
	return perfevent.DecodeReply(b[:k])
}

// closePerf closes the control file.
func (g *Guard) closePerf() {
	g.perf.mu.Lock()
	defer g.perf.mu.Unlock()
	if g.perf.opened && g.perf.ctl >= 0 {
		unix.Close(g.perf.ctl)
		g.perf.ctl = -1
	}
}

// errnoName names errno as the man pages do (EOPNOTSUPP, not its alias
// ENOTSUP).
func errnoName(e unix.Errno) string {
	if e == unix.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	return unix.ErrnoName(e)
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// writeFull writes b at addr of pid's memory.
func writeFull(pid int, addr uint64, b []byte) bool {
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	n, err := unix.ProcessVMWritev(pid, local, remote, 0)
	return err == nil && n == len(b)
}
