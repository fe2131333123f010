package runguard

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Guard answers the guarded calls of a command (see the package doc).
type Guard struct {
	// Tracepoint reports whether a PERF_TYPE_TRACEPOINT config is one of
	// the tree's event IDs, and names the event as system:name ("" when it
	// cannot). pid is the caller's, in the supervisor's pid namespace.
	Tracepoint func(pid int, id uint64) (name string, ours bool)
	// Log is where what is refused is said, once per event or file
	// system (nil: nowhere).
	Log io.Writer
	// TreeDirs are the tree's mount points in the command's mount
	// namespace: sendfile(2) and splice(2) from a file under one fail with
	// EINVAL, so that the caller reads it instead (nil: none refused),
	// and a mount of tracefs on one is answered as done (tracing.go).
	TreeDirs []string
	// SpliceIoctl is the ioctl(2) with which the tree gives a page of a
	// trace_pipe_raw as splice(2) takes one (fusefs.IoctlSplicePage): with
	// it the guard splices from those files for the caller (tracing.go).
	// 0: such a splice fails with EINVAL too.
	SpliceIoctl uint32

	mu   sync.Mutex
	said map[string]bool

	perf perfState // perf_event_open answered (perf.go)
}

// struct seccomp_notif and struct seccomp_notif_resp
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// SECCOMP_IOCTL_NOTIF_ID_VALID, SECCOMP_IOW(2, __u64); x/sys has no name
// for it.
const ioctlNotifIDValid = 0x40082102

// Serve answers listener's notifications until stop is called or no
// process of the command is left, then closes listener. It returns at once;
// stop waits until the answering has ended.
func (g *Guard) Serve(listener int) (stop func()) {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	done := make(chan struct{})
	if err != nil {
		// Without a way to wake it, the loop ends when the command's
		// last process does.
		wake = -1
	}
	go func() {
		defer close(done)
		defer unix.Close(listener)
		defer g.closePerf()
		fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != nil {
				if err == unix.EINTR {
					continue
				}
				return
			}
			switch {
			case fds[1].Revents != 0: // stop
				return
			case fds[0].Revents&unix.POLLIN != 0:
				g.answer(listener)
			case fds[0].Revents != 0: // POLLHUP: no process of the command is left
				return
			}
		}
	}()
	return func() {
		if wake >= 0 {
			unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
			<-done
			unix.Close(wake)
		}
	}
}

// answer takes one notification and answers it. A notification whose
// caller is gone (ENOENT) needs no answer.
func (g *Guard) answer(listener int) {
	var n notif
	if err := ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
		return
	}
	if callOf(n.Arch, n.Nr) == callPerfEventOpen {
		if g.perfEventOpen(listener, &n) {
			return
		}
	}
	if g.takeOver(listener, &n) {
		return
	}
	resp := notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	if errno, msg := g.decide(&n); errno != 0 {
		// The caller's memory was read for the decision: it must still
		// be the caller that asked (its pid not reused), or the answer
		// is for nobody.
		if ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&n.ID)) != nil {
			return
		}
		resp = notifResp{ID: n.ID, Error: -int32(errno)}
		if msg != "" {
			g.say(msg)
		}
	}
	ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// decide returns the errno to answer n with and what to say, or 0 to let
// the call through.
func (g *Guard) decide(n *notif) (unix.Errno, string) {
	pid := int(n.Pid)
	switch call := callOf(n.Arch, n.Nr); call {
	case callMmap:
		return g.mmap(n)
	case callExecve, callExecveat:
		g.exec(n)
		return 0, ""
	case callMount:
		fstype, ok := readString(pid, n.Args[2])
		if !ok || !hidesTree(fstype) {
			return 0, ""
		}
		target, _ := readString(pid, n.Args[1])
		return unix.EPERM, fmt.Sprintf("uetrace run: mount of %s on %s refused (EPERM): it would hide uetrace's tracefs tree, whose events perf records through it (perf_event_open of them is uetrace's); record them with perf or uetrace record", fstype, target)
	case callFsopen:
		fstype, ok := readString(pid, n.Args[0])
		if !ok || !hidesTree(fstype) {
			return 0, ""
		}
		return unix.EPERM, fmt.Sprintf("uetrace run: fsopen of %s refused (EPERM): a new %s would hide uetrace's tracefs tree, whose events perf records through it (perf_event_open of them is uetrace's); record them with perf or uetrace record", fstype, fstype)
	case callSendfile, callSendfile64, callSplice:
		// sendfile(out_fd, in_fd, ...), splice(fd_in, ...)
		in := n.Args[0]
		if call != callSplice {
			in = n.Args[1]
		}
		if !g.inTree(pid, int32(in)) {
			return 0, ""
		}
		// Nothing said: the callers that matter (busybox's cat, Python's
		// shutil) read the file when the copy fails, and get every byte.
		return unix.EINVAL, ""
	}
	return 0, ""
}

// inTree reports whether pid's descriptor fd is a file of the tree. Linux's
// FUSE splices a FOPEN_DIRECT_IO file through the page cache, up to the
// file's size, since 6.5 (commit 2cb1e08985e3; "fuse: use
// copy_splice_read() for FOPEN_DIRECT_IO splice read" fixes it), and the
// tree's files have size 0, as tracefs's do: sendfile and splice from them
// succeed with 0 bytes, and busybox's cat printed nothing. Failing them
// with EINVAL, the kernel's answer for a file that cannot be spliced, makes
// the callers read. The descriptor's path, as /proc shows it, is in the
// command's mount namespace, where the tree is mounted on TreeDirs.
func (g *Guard) inTree(pid int, fd int32) bool {
	_, ok := g.treePath(pid, fd)
	return ok
}

// treePath is the path of pid's descriptor fd, as /proc shows it, if it is
// a file of the tree.
func (g *Guard) treePath(pid int, fd int32) (string, bool) {
	if len(g.TreeDirs) == 0 || fd < 0 {
		return "", false
	}
	path, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return "", false
	}
	for _, dir := range g.TreeDirs {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return path, true
		}
	}
	return "", false
}

// hidesTree reports whether a file system of this type is the kernel's
// tracing tree: tracefs itself, or debugfs, which has it at tracing/.
func hidesTree(fstype string) bool { return fstype == "tracefs" || fstype == "debugfs" }

// say writes msg once.
func (g *Guard) say(msg string) {
	if g.Log == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.said[msg] {
		return
	}
	if g.said == nil {
		g.said = make(map[string]bool)
	}
	g.said[msg] = true
	fmt.Fprintln(g.Log, msg)
}

// readFull reads len(b) bytes at addr of pid's memory.
func readFull(pid int, addr uint64, b []byte) bool {
	if addr == 0 {
		return false
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	return err == nil && n == len(b)
}

// readString reads a NUL-terminated string of at most 255 bytes at addr of
// pid's memory: file system types and paths the guard looks at. A string
// that ends at an unmapped page reads up to it.
func readString(pid int, addr uint64) (string, bool) {
	if addr == 0 {
		return "", false
	}
	var b [256]byte
	// Up to the end of addr's page first, so that a string near the end
	// of the mapping reads.
	first := min(len(b), int(4096-addr%4096))
	n := 0
	for n < len(b) {
		want := first
		if n > 0 {
			want = len(b) - n
		}
		local := []unix.Iovec{{Base: &b[n]}}
		local[0].SetLen(want)
		remote := []unix.RemoteIovec{{Base: uintptr(addr) + uintptr(n), Len: want}}
		got, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if err != nil || got == 0 {
			break
		}
		if i := bytes.IndexByte(b[n:n+got], 0); i >= 0 {
			return string(b[:n+i]), true
		}
		n += got
	}
	return "", false
}
