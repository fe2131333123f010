package fusefs

// The interposer's side of user_events_data (package preload): the private
// ioctls with which a process preloaded with libuetrace-preload.so learns
// which open file a descriptor is and how many rings a share's set has
// (UET_IOC_ID) and hands the daemon a ring set and a validation table for
// it (UET_IOC_SHARE), and the shares' lives —
// until the process exits or execs, or the file's release.

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/procmem"
	"github.com/uetrace/uetrace/internal/subsys"
)

// ShareRequest is a share a process set up on an open user_events_data, as
// the FUSE server found it: whose it is is the FUSE request's caller —
// found in the mount's pid namespace, pinned by its pidfd, reached only
// where the user the tree is served for could ptrace it (as every ioctl's
// caller) — never anything the process said.
type ShareRequest struct {
	// File is the open user_events_data: its write indexes are the only
	// ones the rings' records can reach.
	File *subsys.File
	// Writer is the calling process: TGID and Comm.
	Writer subsys.Writer
	// UID and Cred are whose limits the share counts in (the caller's
	// effective uid as this process sees it, and its privilege).
	UID  uint32
	Cred subsys.Cred
	// Set, Table and Wake are this process's descriptors for the ring
	// set's memfd (of Options.Rings rings), the table's memfd and the
	// set's wake eventfd, taken from the caller with pidfd_getfd:
	// Options.Share takes them over (closes them), whatever it answers.
	Set, Table, Wake int
}

// Share is a share Options.Share took (daemon.Share).
type Share interface {
	// Slots is the number of write indexes the table describes.
	Slots() uint32
	// Wake has the rings drained now (the process lost its eventfd).
	Wake()
	// Close delivers what the process published and releases the share.
	Close()
}

// shareEntry is a share of a dataHandle's file, by one process.
type shareEntry struct {
	sh     Share
	mem    *procmem.Mem  // the caller's when it shared: callers makes another after an exec
	closed chan struct{} // closed by whoever takes it out of the map
}

// fileIDs name the open user_events_data files for the interposer
// (UET_IOC_ID): unique in this process, across every tree it serves, so
// that a process writing to files of two trees never takes one for the
// other (it also tells them apart by st_dev).
var fileIDs atomic.Uint64

// interposerIoctl answers the interposer's ioctls: ENOTTY, as a kernel's
// user_events_data does, when the tree takes no shares (Options.Share).
func (h *dataHandle) interposerIoctl(r *fuse.Request, cmd uint32, in []byte, outSize uint32) (int32, []byte, error) {
	if h.fs.o.Share == nil {
		return 0, nil, unix.ENOTTY
	}
	switch cmd {
	case preload.IocID:
		if outSize != preload.IDSize {
			return 0, nil, unix.EINVAL
		}
		out := make([]byte, preload.IDSize)
		binary.NativeEndian.PutUint64(out, h.id)
		binary.NativeEndian.PutUint32(out[8:], preload.ABIVersion)
		binary.NativeEndian.PutUint32(out[preload.IDOffRings:], uint32(h.fs.o.Rings))
		return 0, out, nil
	case preload.IocShare:
		return h.share(r, in, outSize)
	case preload.IocWake:
		h.smu.Lock()
		for _, e := range h.shares {
			e.sh.Wake()
			break // one nudge wakes every drainer
		}
		h.smu.Unlock()
		return 0, nil, nil
	case preload.IocFlush:
		if h.fs.o.Flush != nil {
			h.fs.o.Flush()
		}
		return 0, nil, nil
	}
	return 0, nil, unix.ENOTTY
}

// share is UET_IOC_SHARE: the calling process's ring set, table and
// eventfd, by their numbers in its descriptor table, for this open file. A
// process has one share of a file: a second is EBUSY, unless the process
// exec'd since (its new program's library starts afresh), when the old
// one is released first.
func (h *dataHandle) share(r *fuse.Request, in []byte, outSize uint32) (int32, []byte, error) {
	if !h.write {
		return 0, nil, unix.EBADF
	}
	fds, err := parseShare(in, outSize, h.id)
	if err != nil {
		return 0, nil, err
	}
	c, err := h.fs.caller(r)
	if err != nil {
		return 0, nil, err
	}
	h.smu.Lock()
	old := h.shares[c.TGID]
	h.smu.Unlock()
	if old != nil {
		if old.mem == c.Mem {
			return 0, nil, unix.EBUSY
		}
		h.dropShare(c.TGID, old) // the process exec'd: the old program's share goes
	}
	comm, err := procfs.Comm(c.TGID)
	if err != nil {
		comm = "<...>" // the trace's name for a task it does not know
	}
	req := ShareRequest{File: h.f, Writer: subsys.Writer{TGID: int32(c.TGID), Comm: comm},
		UID: h.fs.ident(c.TID, nil).uid, Cred: h.fs.o.Cred(c.TGID), Set: -1, Table: -1, Wake: -1}
	for i, dst := range []*int{&req.Set, &req.Table, &req.Wake} {
		fd, err := c.Mem.GetFD(fds[i])
		if err != nil {
			closeFDs(req.Set, req.Table, req.Wake)
			return 0, nil, errnoOf(fmt.Errorf("share: %w", err))
		}
		*dst = fd
	}
	sh, err := h.fs.o.Share(req)
	if err != nil {
		return 0, nil, errnoOf(err)
	}
	e := &shareEntry{sh: sh, mem: c.Mem, closed: make(chan struct{})}
	h.smu.Lock()
	if h.shares == nil {
		h.shares = map[int]*shareEntry{}
	}
	if h.released || h.shares[c.TGID] != nil {
		// The file was released, or another thread of the process
		// shared it, meanwhile.
		h.smu.Unlock()
		sh.Close()
		return 0, nil, unix.EBUSY
	}
	h.shares[c.TGID] = e
	h.smu.Unlock()
	go h.watchShare(c, e)
	out := append([]byte(nil), in...)
	binary.NativeEndian.PutUint32(out[preload.ShareOffNSlots:], sh.Slots())
	return 0, out, nil
}

// parseShare reads struct uet_share as FUSE copied it from the caller (in;
// outSize bytes go back): the size, the ABI version, no flags, the id of
// the file the ioctl was made on (id), and three descriptor numbers —
// set, table, wake — which must be descriptors (not negative) and
// distinct. Anything else is EINVAL.
func parseShare(in []byte, outSize uint32, id uint64) ([3]int, error) {
	ne := binary.NativeEndian
	var fds [3]int
	if len(in) != preload.ShareSize || outSize != preload.ShareSize ||
		ne.Uint32(in[preload.ShareOffSize:]) != preload.ShareSize || ne.Uint32(in[preload.ShareOffABI:]) != preload.ABIVersion ||
		ne.Uint32(in[preload.ShareOffFlags:]) != 0 || ne.Uint64(in[preload.ShareOffFileID:]) != id {
		return fds, unix.EINVAL
	}
	for i, off := range []int{preload.ShareOffSetFD, preload.ShareOffTableFD, preload.ShareOffWakeFD} {
		fds[i] = int(int32(ne.Uint32(in[off:])))
		if fds[i] < 0 {
			return fds, unix.EINVAL
		}
	}
	if fds[0] == fds[1] || fds[0] == fds[2] || fds[1] == fds[2] {
		return fds, unix.EINVAL
	}
	return fds, nil
}

// watchShare releases e when its process exits or execs (the callers' Mem
// of it closes then), unless the handle releases it first.
func (h *dataHandle) watchShare(c *callers.Caller, e *shareEntry) {
	select {
	case <-c.Mem.Done():
		h.dropShare(c.TGID, e)
	case <-e.closed:
	}
}

// dropShare releases e, process tgid's share, if it is still the one held.
// It stays in the map while it is released, so that a release of the file
// meanwhile (closeShares) waits for it to be done before the file is
// closed.
func (h *dataHandle) dropShare(tgid int, e *shareEntry) {
	h.smu.Lock()
	held := h.shares[tgid] == e
	h.smu.Unlock()
	if !held {
		return
	}
	e.sh.Close()
	h.smu.Lock()
	if h.shares[tgid] == e {
		delete(h.shares, tgid)
		close(e.closed)
	}
	h.smu.Unlock()
}

// closeShares releases every share of the file: at its release, before the
// file is closed, so that what the processes published is still its
// events'.
func (h *dataHandle) closeShares() {
	h.smu.Lock()
	es := h.shares
	h.shares = nil
	h.released = true
	for _, e := range es {
		close(e.closed)
	}
	h.smu.Unlock()
	for _, e := range es {
		e.sh.Close()
	}
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
