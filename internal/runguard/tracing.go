package runguard

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// What the guard does for trace-cmd and libtracefs, besides refusing:
//
//   - libtracefs finds tracefs by its type in /proc/mounts, where the tree
//     is fuse.uetrace; finding none, it mounts tracefs on
//     /sys/kernel/tracing and uses that directory. That mount is answered
//     as done, doing nothing: the directory is the tree.
//   - trace-cmd record splices per_cpu/cpuN/trace_pipe_raw into a pipe and
//     has no other way (a failed splice ends its recorder, with nothing
//     recorded), while through FUSE a splice reads nothing. The guard
//     splices for it: it takes the caller's two descriptors
//     (pidfd_getfd: the same open files), asks the tree for the pages as
//     the kernel's splice takes them (SpliceIoctl), writes them into the
//     caller's pipe and answers with their length.

// takeOver answers n itself when it is a call the guard does for the
// caller (above), and reports whether it did.
func (g *Guard) takeOver(listener int, n *notif) bool {
	switch callOf(n.Arch, n.Nr) {
	case callMount:
		if !g.treeMount(n) {
			return false
		}
		g.send(listener, notifResp{ID: n.ID})
		return true
	case callSplice:
		if g.SpliceIoctl == 0 || !g.rawFile(int(n.Pid), int32(n.Args[0])) {
			return false
		}
		go g.splice(listener, *n)
		return true
	}
	return false
}

// send answers a notification whose caller must still be waiting for it.
func (g *Guard) send(listener int, resp notifResp) error {
	if err := ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&resp.ID)); err != nil {
		return err
	}
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

// treeMount reports whether n is mount(2) of a new tracefs on a directory
// of the tree, which is there already: mount("nodev", dir, "tracefs", 0,
// ...) as libtracefs makes it. A remount, a bind or a move is not.
func (g *Guard) treeMount(n *notif) bool {
	pid := int(n.Pid)
	if fstype, ok := readString(pid, n.Args[2]); !ok || fstype != "tracefs" {
		return false
	}
	const changes = unix.MS_REMOUNT | unix.MS_BIND | unix.MS_MOVE | unix.MS_SHARED | unix.MS_PRIVATE | unix.MS_SLAVE | unix.MS_UNBINDABLE
	if n.Args[3]&changes != 0 {
		return false
	}
	target, ok := readString(pid, n.Args[1])
	if !ok || target == "" {
		return false
	}
	if !path.IsAbs(target) {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err != nil {
			return false
		}
		target = path.Join(cwd, target)
	}
	target = path.Clean(target)
	for _, dir := range g.TreeDirs {
		if target == path.Clean(dir) {
			return true
		}
	}
	return false
}

// rawFile reports whether pid's descriptor fd is a trace_pipe_raw of the
// tree.
func (g *Guard) rawFile(pid int, fd int32) bool {
	p, ok := g.treePath(pid, fd)
	return ok && path.Base(p) == "trace_pipe_raw"
}

const (
	spliceFNonblock = 0x02 // SPLICE_F_NONBLOCK
	spliceFAll      = 0x0f // SPLICE_F_MOVE | NONBLOCK | MORE | GIFT
	rawPage         = 4096 // a page of trace_pipe_raw
	// waitSlice is how long a splice waits in one poll before it checks
	// that its caller still waits and has no signal to take: nothing
	// tells the guard of either.
	waitSlice = 20 // ms
)

// splice does splice(fd_in, off_in, fd_out, off_out, len, flags) from a
// trace_pipe_raw of the tree for n's caller and answers it, as
// tracing_buffers_splice_read does: up to len bytes of whole pages the
// writer has left, as many as the pipe has room for (16 in a pipe of the
// default size); with
// none, it waits until the file polls readable (buffer_percent) and takes
// what there is then, which may be nothing (0) — or EAGAIN at once with
// SPLICE_F_NONBLOCK or an O_NONBLOCK file. It runs on a goroutine of its
// own: a splice that waits must not hold up the guard's other answers.
func (g *Guard) splice(listener int, n notif) {
	val, errno := g.doSplice(listener, &n)
	resp := notifResp{ID: n.ID, Val: val}
	if errno != 0 {
		resp = notifResp{ID: n.ID, Error: -int32(errno)}
	}
	if err := g.send(listener, resp); err != nil && val > 0 {
		// The pages are in the caller's pipe, but the caller gave up
		// before it heard how many: killed — or, on a kernel without
		// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (before 5.19), any
		// signal (Install). It reads them with its next splice's
		// count, which leaves as many of the last in the pipe.
		g.say(fmt.Sprintf("uetrace run: %d bytes of a trace_pipe_raw went into process %d's pipe for a splice it had given up (a signal): they stay ahead of the next ones there", val, n.Pid))
	}
}

func (g *Guard) doSplice(listener int, n *notif) (int64, unix.Errno) {
	fdIn, offIn, fdOut, offOut, length, flags := int(n.Args[0]), n.Args[1], int(n.Args[2]), n.Args[3], n.Args[4], n.Args[5]
	// The kernel's checks, in its order (do_splice, splice_file_to_pipe).
	if flags&^spliceFAll != 0 {
		return 0, unix.EINVAL
	}
	if length == 0 {
		return 0, 0
	}
	pidfd, err := callerPidfd(int(n.Pid))
	if err != nil {
		return 0, unix.ESRCH
	}
	defer unix.Close(pidfd)
	in, err := unix.PidfdGetfd(pidfd, fdIn, 0)
	if err != nil {
		return 0, unix.EBADF
	}
	defer unix.Close(in)
	out, err := unix.PidfdGetfd(pidfd, fdOut, 0)
	if err != nil {
		return 0, unix.EBADF
	}
	defer unix.Close(out)
	var st unix.Stat_t
	if err := unix.Fstat(out, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return 0, unix.EINVAL // neither end a pipe
	}
	outFlags, _ := unix.FcntlInt(uintptr(out), unix.F_GETFL, 0)
	if outFlags&unix.O_ACCMODE == unix.O_RDONLY {
		return 0, unix.EBADF
	}
	if offOut != 0 {
		return 0, unix.ESPIPE
	}
	if offIn != 0 || length < rawPage {
		return 0, unix.EINVAL // trace_pipe_raw has no position to splice from, and a page is the least
	}
	inFlags, _ := unix.FcntlInt(uintptr(in), unix.F_GETFL, 0)
	nonblock := flags&spliceFNonblock != 0 || inFlags&unix.O_NONBLOCK != 0
	want := int(min(length/rawPage, 1<<20))
	woken := false
	for {
		room, err := pipeRoom(out)
		if err != nil {
			return 0, unix.EBADF
		}
		if room < rawPage {
			// splice_to_pipe waits for room.
			if nonblock || outFlags&unix.O_NONBLOCK != 0 {
				return 0, unix.EAGAIN
			}
			if errno := g.waitFor(listener, n, out, unix.POLLOUT); errno != 0 {
				return 0, errno
			}
			continue
		}
		if ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&n.ID)) != nil {
			return 0, unix.EINTR // the caller is gone: take nothing for it
		}
		pages := make([]byte, 0, min(want, room/rawPage)*rawPage)
		for len(pages) < cap(pages) {
			page := pages[len(pages) : len(pages)+rawPage]
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(in), uintptr(g.SpliceIoctl), uintptr(unsafe.Pointer(&page[0]))); e != 0 {
				if e != unix.EAGAIN && len(pages) == 0 {
					return 0, e
				}
				break
			}
			pages = pages[:len(pages)+rawPage]
		}
		if len(pages) > 0 {
			for w := 0; w < len(pages); {
				k, err := unix.Write(out, pages[w:])
				if err != nil {
					// Room was counted: only another writer of the
					// pipe could take it. What is not written is lost,
					// and said.
					g.say(fmt.Sprintf("uetrace run: splice of a trace_pipe_raw for process %d: %d of %d bytes lost writing its pipe: %v", n.Pid, len(pages)-w, len(pages), err))
					return int64(w), 0
				}
				w += k
			}
			return int64(len(pages)), 0
		}
		if woken {
			return 0, 0
		}
		if nonblock {
			return 0, unix.EAGAIN
		}
		if errno := g.waitFor(listener, n, in, unix.POLLIN); errno != 0 {
			return 0, errno
		}
		woken = true
	}
}

// callerPidfd is a pidfd of the thread tid, whose descriptors pidfd_getfd
// takes: the thread's own (PIDFD_THREAD, Linux 6.9), or its process's
// before 6.9, where a pidfd names a process only — the same descriptors
// but for a thread made without CLONE_FILES.
func callerPidfd(tid int) (int, error) {
	fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD)
	if err != unix.EINVAL {
		return fd, err
	}
	st, err := procfs.ReadStatus(tid)
	if err != nil || !st.Has(procfs.StatusTgid) {
		return -1, unix.ESRCH
	}
	return unix.PidfdOpen(st.Tgid, 0)
}

// errRestartSys is ERESTARTSYS (include/linux/errno.h), what Linux's
// interruptible waits return on a signal: never seen by a program, the
// kernel turns it, on the way out, into EINTR for a handler without
// SA_RESTART and into the call again otherwise (arch_do_signal_or_restart).
const errRestartSys = unix.Errno(512)

// waitFor waits until fd polls ev. It ends early with the answer the
// caller's splice is to have: ERESTARTSYS when the caller has a signal to
// take, as the kernel's splice waits end (wait_on_pipe,
// pipe_wait_writable) — the caller's own wait for the guard does not end
// on one once the guard has its call (Install) — and EINTR when the
// caller has stopped waiting (killed, or on a kernel without
// WAIT_KILLABLE_RECV a signal: the answer is then no one's).
func (g *Guard) waitFor(listener int, n *notif, fd int, ev int16) unix.Errno {
	held := false // a signal for the caller's process was pending at the last look
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: ev}}
		k, err := unix.Poll(fds, waitSlice)
		if err == nil && k > 0 {
			return 0
		}
		if err != nil && err != unix.EINTR {
			return unix.EINTR
		}
		if ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&n.ID)) != nil {
			return unix.EINTR
		}
		switch signalFor(int(n.Pid)) {
		case signalOwn:
			return errRestartSys
		case signalProcess:
			// Linux gives it to a thread that does not block it and
			// wakes that one; a thread waiting for the guard is one
			// it may choose, and then nothing else takes it. Still
			// there a slice later, it is taken to be the caller's:
			// EINTR, which needs no signal on the way out.
			if held {
				return unix.EINTR
			}
			held = true
		default:
			held = false
		}
	}
}

// What signalFor finds.
const (
	signalNone    = iota
	signalOwn     // the thread's to take
	signalProcess // its process's, for one of its threads to take
)

// signalFor says whether thread tid has a signal to take, one that would
// end an interruptible wait of its: pending for the thread and not
// blocked by it, or for its process and not blocked — the thread's own
// if the process has no other thread. ERESTARTSYS is answered only for
// the thread's own: the caller takes it on its way out of the call;
// without one, the number would reach the program. Signals a thread
// ignores are never pending: Linux drops them when they are sent
// (sig_ignored).
func signalFor(tid int) int {
	st, err := procfs.ReadStatus(tid)
	if err != nil || !st.Has(procfs.StatusSigPnd|procfs.StatusShdPnd|procfs.StatusSigBlk|procfs.StatusThreads) {
		return signalNone // gone: the notification's ID says so
	}
	switch {
	case st.SigPnd&^st.SigBlk != 0, st.Threads == 1 && st.ShdPnd&^st.SigBlk != 0:
		return signalOwn
	case st.ShdPnd&^st.SigBlk != 0:
		return signalProcess
	}
	return signalNone
}

// pipeRoom is how many bytes a write to the pipe takes without waiting.
func pipeRoom(fd int) (int, error) {
	size, err := unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return 0, err
	}
	used, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
	if err != nil {
		return 0, err
	}
	return size - used, nil
}
