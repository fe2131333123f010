package fusefs

import (
	"context"
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/subsys"
)

// dataHandle is one open user_events_data: a subsys.File of its own.
type dataHandle struct {
	fs    *FS
	f     *subsys.File
	write bool // opened for writing: O_RDONLY writes are the VFS's EBADF
	acct  *account
	id    uint64 // the interposer's name for the open file (share.go)
	// shares are the interposer's, by process (share.go); none are
	// taken once the file is released.
	smu      sync.Mutex
	shares   map[int]*shareEntry
	released bool
	// pieces are the writes FUSE sent in pieces, whose first was taken
	// whole (pieces.go).
	pieces pieces
}

var _ fuse.Ioctler = (*dataHandle)(nil)

func (f *FS) openData(acct *account, flags uint32) fuse.Handle {
	file := f.s.Open()
	if acct != nil && f.o.ChargeRefs != nil {
		file = f.s.OpenCharged(func(n int, force bool) error { return f.o.ChargeRefs(acct.uid, acct.cred, n, force) })
	}
	return &dataHandle{fs: f, f: file, write: flags&unix.O_ACCMODE != unix.O_RDONLY, acct: acct, id: fileIDs.Add(1)}
}

// Read is user_events_data's: it has no read method, so read(2) is EINVAL
// (the VFS's answer when f_op->read is NULL and FMODE_CAN_READ is unset).
func (h *dataHandle) Read(ctx context.Context, r *fuse.Request, dst []byte, off int64) (int, error) {
	return 0, unix.EINVAL
}

var _ fuse.InlineWriter = (*dataHandle)(nil)

// InlineWrites: a write of user_events_data is answered on the goroutine
// that read the request. It reads the caller's /proc files and its iovecs
// and writes the record, none of which waits but for the iovec read of a
// caller that remapped them meanwhile (see iovLen), which the fuse server
// bounds.
func (h *dataHandle) InlineWrites() bool { return true }

// Write is write(2), pwrite(2), writev(2) or pwritev(2) of
// [write_index][payload]. The request has the bytes and an offset; which call
// it was, and how many bytes the caller asked to write, are read from the
// blocked caller's /proc/<tid>/syscall:
//   - FUSE moves the file position after a write(2), so the offset of a
//     write(2) means nothing, while a pwrite(2) at a non-zero offset is
//     user_events' EFAULT (pwritev's offset is never looked at);
//   - FUSE sends only the pages it could pin: a buffer that runs into an
//     unmapped page arrives short, and is answered as user_events_write
//     answers a fault (subsys.File.WriteFaulted);
//   - FUSE sends a write of more pages than a request carries in pieces:
//     the first arrives short too, and is made whole from the caller's
//     memory (pieces.go).
//
// Nothing in the request tells any of these, so the call is read at every
// write: it is what is left of a write's cost here besides the round trip
// itself (BENCHMARKS.md, "FUSE write path"). Where the call cannot be read (no
// right to ptrace the caller) the request is taken as a complete write(2).
// A caller that cannot be found in this process's /proc (Options.PIDs)
// writes as thread 0.
func (h *dataHandle) Write(ctx context.Context, r *fuse.Request, data []byte, off int64) (int, error) {
	if !h.write {
		return 0, unix.EBADF
	}
	total, pos, positioned := len(data), int64(0), false
	c, _ := h.fs.threads.look(int(r.Pid), h.fs.resolve)
	tid := c.tid
	if c.first && c.callOK {
		// Its process is known from its thread's first write on (a
		// fork's child gets its parent's enablers, package callers),
		// as from its first ioctl: once per thread, not per write.
		h.fs.callers.GetKnown(tid, c.tgid)
	}
	if c.callOK && h.pieces.take(tid, c.call, off, len(data)) {
		if !r.Commit() {
			return 0, unix.EFAULT
		}
		return len(data), nil
	}
	if c.callOK {
		switch call := c.call; call.Nr {
		case unix.SYS_WRITE:
			total = int(call.Args[2])
		case unix.SYS_PWRITE64:
			total, pos, positioned = int(call.Args[2]), int64(call.Args[3]), true
		case unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2:
			if n, ok := iovLen(tid, call.Args[1], call.Args[2]); ok && tid > 0 {
				total = n
			}
			// pwritev's offset is not checked: the kernel's write_iter
			// path (user_events_write_iter) ignores it, unlike
			// user_events_write's *ppos check for write and pwrite.
		}
	}
	var all []byte // a write FUSE cut, made whole
	if total > len(data) && total <= maxWhole && !(positioned && pos != 0) && tid > 0 {
		if pc, err := h.fs.callers.GetKnown(tid, c.tgid); err == nil {
			if b, ok := whole(pc.Mem, c.call, total); ok {
				all = b
			}
		}
	}
	if !r.Commit() {
		// The server answered the write itself: it took too long
		// (fuse.InlineWriter).
		return 0, unix.EFAULT
	}
	w := subsys.Writer{PID: int32(tid), TGID: int32(c.tgid), Comm: c.comm, CPU: c.cpu}
	if positioned && pos != 0 {
		return h.f.Write(w, data, pos)
	}
	if total > len(data) {
		if all == nil {
			return h.f.WriteFaulted(w, data, total)
		}
		if _, err := h.f.Write(w, all, 0); err != nil {
			return 0, err
		}
		// This piece is answered whole, so that FUSE sends the next.
		h.pieces.expect(tid, c.call, off+int64(len(data)), total-len(data))
		return len(data), nil
	}
	return h.f.Write(w, data, 0)
}

// iovLen adds up the lengths of the caller's iovecs; false where they cannot
// be read (the caller's own EFAULT would have come before FUSE's request).
//
// One process_vm_readv, on this goroutine, without what procmem puts
// around every other access to a caller's memory: a check that the process
// did not exec since it was first seen (AT_RANDOM), and a goroutine and a
// timer that give the access up after procmem.StallLimit. They are not
// needed here:
//   - The check keeps an enable bit, whose address was given by a program,
//     from being written into the program it exec'd. Here the address is the
//     one the thread's current system call passes, read from its
//     /proc/<tid>/syscall just now, and the thread is blocked in that call
//     until this request is answered — even a SIGKILL waits for the answer
//     (FUSE's request_wait_answer), unless the connection is aborted — so
//     tid is still that thread and its memory the call's.
//   - The stall guard is for memory whose page fault nobody serves: a
//     userfaultfd, a file on a FUSE mount that does not answer. The kernel
//     read this very iovec array in the caller's context (import_iovec)
//     before it sent the request, so the read finds it in memory — unless
//     another thread of the caller unmapped it and mapped such memory in its
//     place meanwhile, or evicted a file-backed page of it. That can only be
//     done on purpose, and stalls only the writer's own request: the fuse
//     server hands the reading to another goroutine within milliseconds and
//     answers the write EFAULT after fuse.StallLimit (fuse.InlineWriter),
//     which also frees a writer killed meanwhile.
//
// Like the /proc reads, it reaches only callers whose syscall file this
// server may read: callOK is false for any other (threads.look).
func iovLen(tid int, iov, cnt uint64) (int, bool) {
	if cnt == 0 || cnt > 1024 { // UIO_MAXIOV
		return 0, false
	}
	var small [16 * 8]byte
	buf := small[:]
	if cnt > 8 {
		buf = make([]byte, 16*cnt)
	}
	buf = buf[:16*cnt]
	local := [1]unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := [1]unix.RemoteIovec{{Base: uintptr(iov), Len: len(buf)}}
	// Not a raw system call (unlike the /proc reads): it may wait for a
	// page fault, and a raw one would hold its P, and the garbage
	// collector's stop of the world, for as long.
	if n, err := unix.ProcessVMReadv(tid, local[:], remote[:], 0); err != nil || n != len(buf) {
		return 0, false
	}
	total := uint64(0)
	for i := uint64(0); i < cnt; i++ {
		total += binary.NativeEndian.Uint64(buf[16*i+8:])
	}
	if total > 1<<31 {
		return 0, false
	}
	return int(total), true
}

// Ioctl is DIAG_IOCSREG, DIAG_IOCSUNREG and DIAG_IOCSDEL (any other command
// is ENOTTY, as user_events_ioctl's default). FUSE copied the 8-byte pointer
// the caller passed; the struct behind it is read, and write_index written,
// in the caller's memory. Nothing is answered for FUSE to copy back over
// the caller's argument: it would be a write Linux does not make, and would
// fail where the struct is read-only, which Linux's DIAG_IOCSREG ignores.
func (h *dataHandle) Ioctl(ctx context.Context, r *fuse.Request, cmd uint32, arg uint64, in []byte, outSize uint32) (int32, []byte, error) {
	switch uintptr(cmd) {
	case abi.IocSReg, abi.IocSUnreg, abi.IocSDel:
	case preload.IocID, preload.IocShare, preload.IocWake, preload.IocFlush:
		return h.interposerIoctl(r, cmd, in, outSize)
	default:
		return 0, nil, unix.ENOTTY
	}
	c, err := h.fs.caller(r)
	if err != nil {
		return 0, nil, err
	}
	switch uintptr(cmd) {
	case abi.IocSReg:
		cred := h.fs.o.Cred(c.TGID)
		h.fs.charge(c, cred)
		v10 := false
		if h.fs.o.V10 {
			v10, err = callers.RegisterV10(h.f, c, cred, arg)
		}
		if !v10 {
			_, err = callers.Register(h.f, c, cred, arg)
		}
	case abi.IocSUnreg:
		err = callers.Unregister(h.f, c, arg)
	case abi.IocSDel:
		err = callers.Delete(h.f, c, h.fs.o.Cred(c.TGID), arg)
	}
	if err != nil {
		return 0, nil, errnoOf(err)
	}
	return 0, nil, nil
}

// Release is the last close: the interposer's shares of the file deliver
// what their processes published, then the file's events lose its
// references.
func (h *dataHandle) Release() error {
	h.closeShares()
	h.acct.release()
	return h.f.Close()
}

// charge gives caller c's process its account (Options.Charge) at its first
// registration: the enablers it holds count in its uid's registrations
// until it unregisters them, exits or execs, and a fork's copies count in
// its parent's uid (subsys.Charge), wherever the process registered them.
func (f *FS) charge(c *callers.Caller, cred subsys.Cred) {
	if f.o.Charge == nil || c.Process.Charged() {
		return
	}
	uid := f.ident(c.TID, nil).uid
	c.Process.SetCharge(func(n int, force bool) error {
		return f.o.Charge(uid, cred, 0, n, force)
	})
}
