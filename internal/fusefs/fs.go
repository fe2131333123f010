package fusefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/perfevent"
	"github.com/uetrace/uetrace/internal/pidns"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Options configure an FS.
type Options struct {
	// Flush, if set, is called before the trace buffer's text is made and
	// before trace_pipe is read, so that records writers published into
	// shared memory are in it (daemon.Server.Flush).
	Flush func()
	// Callers reaches the calling processes and their memory. nil: New
	// makes one, following forks and execs through the proc connector
	// where it may (root) and noticing them lazily otherwise. Either way
	// New gives it the check of For (callers.SetAccess): one Callers
	// serves one tree.
	Callers *callers.Callers
	// Cred is a calling process's privilege (nil: perfmon_capable() of
	// its process, from procfs).
	Cred func(tgid int) subsys.Cred
	// GID, with SetGID, is the group of every file and directory, as
	// tracefs's gid= mount option makes it: its members get the group's
	// permission bits (read, and search of the directories) — on tracefs
	// as here, writing stays root's.
	GID    uint32
	SetGID bool
	// Charge, if set, accounts to a caller's uid what it makes the tree
	// hold, and may refuse more unless force (daemon.Server.FUSECharge):
	// files open (files: its error, EMFILE, is the open's; directories
	// count) and enablers registered (regs: its error, ENOMEM, is
	// DIAG_IOCSREG's), more or, negative, fewer. The uid is the caller's
	// effective uid as this process's user namespace sees it (its
	// /proc/<tid>/status, as SO_PEERCRED gives a socket client's), not the
	// FUSE header's, which is in the mount's user namespace — root, in the
	// one uetrace run makes. cred is the caller's (Cred).
	Charge func(uid uint32, cred subsys.Cred, files, regs int, force bool) error
	// ChargeRefs, if set with Charge, accounts to a caller's uid the
	// events its open user_events_data refer to — those a failed
	// registration left there, as Linux leaves them, included — more or,
	// negative, fewer, and may refuse more unless force
	// (daemon.Server.FUSEChargeRefs): its error, ENOMEM, is DIAG_IOCSREG's
	// (subsys.OpenCharged).
	ChargeRefs func(uid uint32, cred subsys.Cred, n int, force bool) error
	// PIDs is the pid namespace of whoever mounted the tree: FUSE gives
	// each caller's thread id in it (the kernel's fuse_conn keeps the
	// mounter's), and the tree finds the caller among this process's
	// /proc by it. nil: this process's — right for Mount, and for Serve
	// of a descriptor mounted by a process of this one's pid namespace (a
	// helper that made a mount namespace, not a pid namespace). A daemon
	// serving a descriptor a client handed over gives the client's
	// (pidns.OfPidfd of its SO_PEERPIDFD). A namespace /proc cannot see
	// is New's error.
	PIDs *pidns.Map
	// For is whom the tree is served for: a caller's process is reached
	// — its memory read and written, its /proc/<tid>/syscall read — only
	// where For could ptrace it (caps.User), so that a caller's id in the
	// wrong namespace, or reused, can never reach another user's process
	// through this process's privilege. nil: this process's own user. A
	// daemon serving a descriptor a client handed over gives the client's
	// (SO_PEERCRED).
	For *caps.User
	// Dev, for Serve, is the st_dev of the mount the descriptor serves, as
	// the mounter read it in its own mount namespace (MountDev): with it
	// Tree.Close aborts the connection through fusectl; without it, by
	// closing the device.
	Dev uint64
	// Share, if set, takes the shares that processes preloaded with the
	// interposer (package preload) set up on user_events_data: a ring set
	// of Rings rings and a validation table per (open file, process),
	// served by the daemon (daemon.Server.FUSEShare; cmd/uetrace joins
	// them). nil: the interposer's ioctls are ENOTTY, as on a kernel, and
	// its programs write through FUSE.
	Share func(ShareRequest) (Share, error)
	// Rings is R, the rings of the ring set a share is — the daemon's
	// drainers (daemon.Server.Rings) — which UET_IOC_ID tells the
	// interposer before it makes the set. Needed with Share.
	Rings int
	// V10 serves the v10 ABI of user_events besides today's (v10.go): a
	// DIAG_IOCSREG of a 24-byte struct user_reg — EINVAL in today's ABI —
	// gets a status index, and the interposer's status pages are kept
	// written. No Linux release enabled that ABI; uetrace run --abi v10
	// asks for it.
	V10 bool
}

// FS is a Subsystem's tracefs tree as a fuse.FileSystem.
type FS struct {
	s           *subsys.Subsystem
	tree        *subsys.FS
	o           Options
	callers     *callers.Callers
	ownsCallers bool
	mtime       time.Time
	threads     threads // the callers' open /proc files, for writes
	pids        *pidns.Map
	user        caps.User
	pages       statusPages // the v10 ABI's (v10.go)
	perf        perfEvents  // perf_event_open's events of the tree (perf.go)
}

var (
	_ fuse.FileSystem = (*FS)(nil)
	_ fuse.DirOpener  = (*FS)(nil)
)

// New returns the tree of s. Its error is that of the pid namespace: this
// process's, when Options.PIDs is nil, cannot be seen in its /proc.
func New(s *subsys.Subsystem, o Options) (*FS, error) {
	f := &FS{s: s, tree: s.FS(), o: o, callers: o.Callers, mtime: time.Now(), pids: o.PIDs}
	if f.pids == nil {
		m, err := pidns.Self()
		if err != nil {
			return nil, fmt.Errorf("fusefs: the callers' pid namespace: %w", err)
		}
		f.pids = m
	}
	if o.For != nil {
		f.user = *o.For
	} else {
		f.user = caps.Self()
	}
	if f.callers == nil {
		f.callers = callers.New(s)
		f.ownsCallers = true
		// Without the proc connector (not root) callers are checked when
		// next seen instead: Follow's error only says which.
		_ = f.callers.Follow()
	}
	if !f.user.Privileged {
		f.callers.SetAccess(f.user.Check)
	}
	if f.o.Cred == nil {
		f.o.Cred = func(tgid int) subsys.Cred { return subsys.Cred{PerfmonCapable: tgid > 0 && caps.PerfmonCapable(tgid)} }
	}
	return f, nil
}

// Close releases what New made.
func (f *FS) Close() error {
	f.closePages()
	f.threads.Close()
	if f.ownsCallers {
		return f.callers.Close()
	}
	return nil
}

// Tree is a subsystem's tree being served on a FUSE mount.
type Tree struct {
	conn *fuse.Conn
	fs   *FS
	done chan struct{}
}

func newTree(conn *fuse.Conn, f *FS) *Tree {
	t := &Tree{conn: conn, fs: f, done: make(chan struct{})}
	go func() {
		conn.Wait()
		f.Close()
		close(t.done)
	}()
	return t
}

// Close stops serving: the connection is aborted — a program still holding
// a file of the tree gets ENOTCONN, never a hang — and the mount detached.
func (t *Tree) Close() error {
	err := t.conn.Unmount()
	<-t.done
	return err
}

// Done is closed when serving has ended: by Close, or because the mount went
// away (unmounted, or its mount namespace ended with its last process).
func (t *Tree) Done() <-chan struct{} { return t.done }

// Mount mounts the tree of s on dir (as root; see fuse.Mount) and serves it
// until the mount goes or Close.
func Mount(dir string, s *subsys.Subsystem, o Options) (*Tree, error) {
	f, err := New(s, o)
	if err != nil {
		return nil, err
	}
	c, err := fuse.Mount(dir, f, fuse.Options{FSName: "uetrace", AllowOther: true, Passthrough: true})
	if err != nil {
		f.Close()
		return nil, err
	}
	return newTree(c, f), nil
}

// Serve serves the tree of s on dev, a /dev/fuse descriptor already mounted
// (by a helper in a user namespace, say), which it takes over. Any other
// descriptor is EINVAL: a pipe or socket handed over instead would be read
// for requests that never come, held with its goroutine for the server's
// life.
func Serve(dev *os.File, s *subsys.Subsystem, o Options) (*Tree, error) {
	if err := isFUSEDevice(dev); err != nil {
		return nil, err
	}
	f, err := New(s, o)
	if err != nil {
		return nil, err
	}
	c, err := fuse.Serve(dev, f, fuse.Options{FSName: "uetrace", AllowOther: true, Dev: o.Dev, Passthrough: true})
	if err != nil {
		f.Close()
		return nil, err
	}
	return newTree(c, f), nil
}

// fuseDevice is /dev/fuse's device number: misc (10), FUSE_MINOR (229).
var fuseDevice = unix.Mkdev(10, 229)

// isFUSEDevice says, with EINVAL, why dev is not a FUSE device.
func isFUSEDevice(dev *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(dev.Fd()), &st); err != nil {
		return fmt.Errorf("fusefs: serve: the device handed over: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != fuseDevice {
		return fmt.Errorf("fusefs: serve: the descriptor handed over is not a FUSE device (mode %#o, device %d:%d; want /dev/fuse, 10:229): %w",
			st.Mode&unix.S_IFMT, unix.Major(st.Rdev), unix.Minor(st.Rdev), unix.EINVAL)
	}
	return nil
}

// MountDev is the st_dev of the tree mounted (fstype fuse.uetrace) on top
// at dir in this process's mount table, for Options.Dev: a mounter reads it
// right after mount(2) and hands it over with the descriptor. It asks no
// file system anything.
func MountDev(dir string) (uint64, bool) { return fuse.MountDev(dir) }

func (f *FS) attr(mode fs.FileMode) fuse.Attr {
	a := fuse.Attr{Mode: uint32(mode.Perm()), Nlink: 1, Mtime: f.mtime}
	if f.o.SetGID {
		a.Gid = f.o.GID
	}
	if mode.IsDir() {
		a.Mode |= unix.S_IFDIR
		a.Nlink = 2
	} else {
		a.Mode |= unix.S_IFREG
	}
	return a
}

// Stat is LOOKUP and GETATTR. tracefs files have size 0: their text is made
// when read. user_events_data and user_events_status have fixed inode
// numbers, by which the interposer recognises them (with the mount's
// st_dev): a node ID changes when the kernel forgets the node.
func (f *FS) Stat(ctx context.Context, path string) (fuse.Attr, error) {
	if a, ok, err := f.perfStat(path); ok {
		return a, err
	}
	e, err := f.tree.Stat(path)
	if err != nil {
		return fuse.Attr{}, errnoOf(err)
	}
	a := f.attr(e.Mode)
	switch path {
	case subsys.FileData:
		a.Ino = preload.DataIno
	case subsys.FileStatus:
		a.Ino = preload.StatusIno
	}
	return a, nil
}

// ReadDir is READDIR.
func (f *FS) ReadDir(ctx context.Context, path string) ([]fuse.DirEntry, error) {
	if path == perfevent.Dir {
		return nil, nil // its files are listed nowhere
	}
	list, err := f.tree.ReadDir(path)
	if err != nil && list == nil {
		return nil, errnoOf(err)
	}
	// A system whose listing stops at a name no entry can have: the
	// entries before it, then the error (see subsys.FS.ReadDir).
	out := make([]fuse.DirEntry, len(list))
	for i, e := range list {
		out[i] = fuse.DirEntry{Name: e.Name, Mode: f.attr(e.Mode).Mode}
	}
	if err != nil {
		return out, errnoOf(err)
	}
	return out, nil
}

// Open is OPEN: user_events_data is a fresh subsys.File, every other file
// a subsys.Handle.
func (f *FS) Open(ctx context.Context, r *fuse.Request, path string, flags uint32) (fuse.Handle, error) {
	if h, ok, err := f.perfOpen(r, path); ok {
		return h, err
	}
	if path == subsys.FileData && f.o.Charge == nil {
		return f.openData(nil, flags), nil
	}
	id, cred := f.opener(r)
	acct, err := f.openFile(id, cred)
	if err != nil {
		return nil, err
	}
	if path == subsys.FileData {
		return f.openData(acct, flags), nil
	}
	h, err := f.tree.Open(path, int(flags), cred)
	if err != nil {
		acct.release()
		return nil, errnoOf(err)
	}
	return &fileHandle{fs: f, h: h, path: path, acct: acct}, nil
}

// OpenDir is OPENDIR: an open directory counts as an open file.
func (f *FS) OpenDir(ctx context.Context, r *fuse.Request, path string) (func(), error) {
	if f.o.Charge == nil {
		return nil, nil
	}
	id, cred := f.opener(r)
	acct, err := f.openFile(id, cred)
	if err != nil {
		return nil, err
	}
	return acct.release, nil
}

// tid is the thread that made request r, as this process's /proc numbers
// it (Options.PIDs), or 0 with the error where it cannot be found: the
// header's id is in the mounter's pid namespace, and means nothing — or
// another task — in this one's.
func (f *FS) tid(r *fuse.Request) (int, error) {
	return f.pids.TID(int(r.Pid))
}

// caller is the thread that made ioctl request r, with its process. The
// header's id is the mounter's namespace's: the caller is found in this
// process's, and its memory is reached only if the user the tree is served
// for may (callers.SetAccess). The error is the errno to answer.
func (f *FS) caller(r *fuse.Request) (*callers.Caller, error) {
	tid, err := f.tid(r)
	if err != nil {
		return nil, errnoOf(err)
	}
	c, err := f.callers.Get(tid)
	if err != nil {
		return nil, errnoOf(err)
	}
	return c, nil
}

// ident is who made a request: its thread's process and effective uid
// (the Tgid and Uid lines of /proc/<tid>/status, as this process's user
// namespace sees them). Where the status cannot be read, the thread is its
// own process and the uid is the kernel's overflowuid, never the FUSE
// header's: that one is in the mount's user namespace, where the caller
// may be root. A caller that could not be found (err, from tid) is process
// -1, which has no privilege, and overflowuid.
type ident struct {
	tgid int
	uid  uint32
}

// overflowUID is the uid Linux reports for one it cannot map (overflowuid).
const overflowUID = 65534

func (f *FS) ident(tid int, err error) ident {
	if err != nil || tid <= 0 {
		return ident{tgid: -1, uid: overflowUID}
	}
	id := ident{tgid: tid, uid: overflowUID}
	st, err := procfs.ReadStatus(tid)
	if err != nil {
		return id
	}
	if st.Has(procfs.StatusTgid) {
		id.tgid = st.Tgid
	}
	if st.Has(procfs.StatusUid) {
		id.uid = st.Uid[1] // real, effective, saved, filesystem
	}
	return id
}

// opener is who opens a file or directory for request r, and its privilege
// (Options.Cred). A caller the user the tree is served for (Options.For)
// could not ptrace is that user's, without privilege: its id may be another
// namespace's taken as this one's (see "Pid namespaces" in the package doc),
// so the process found is not the caller, and lends it neither its
// capabilities (CAP_PERFMON deletes persistent events) nor its uid's
// account (root's, which no limit holds, or another user's, whose limit
// the caller would fill). Root's trees trust what they find.
func (f *FS) opener(r *fuse.Request) (ident, subsys.Cred) {
	id := f.ident(f.tid(r))
	if id.tgid > 0 && !f.user.Privileged && f.user.Check(id.tgid) != nil {
		return ident{tgid: -1, uid: f.user.UID}, subsys.Cred{}
	}
	return id, f.o.Cred(id.tgid)
}

// tgid is the process of thread tid, or tid where it cannot be told.
func (f *FS) tgid(tid int) int { return f.ident(tid, nil).tgid }

// account is what one open file counts in its opener's uid (Options.Charge).
type account struct {
	f    *FS
	uid  uint32
	cred subsys.Cred
}

// openFile charges an open file to id's uid; nil without Options.Charge.
func (f *FS) openFile(id ident, cred subsys.Cred) (*account, error) {
	if f.o.Charge == nil {
		return nil, nil
	}
	if err := f.o.Charge(id.uid, cred, 1, 0, false); err != nil {
		return nil, errnoOf(err)
	}
	return &account{f: f, uid: id.uid, cred: cred}, nil
}

// release gives the file back.
func (a *account) release() {
	if a != nil {
		a.f.o.Charge(a.uid, a.cred, -1, 0, true)
	}
}

// errnoOf turns an error into the errno FUSE sends: the one it wraps, or EIO.
func errnoOf(err error) error {
	if err == nil {
		return nil
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unix.EINTR
	}
	if errors.Is(err, fs.ErrClosed) {
		return unix.EBADF
	}
	return unix.EIO
}

// resolve finds the thread whose id in the mounter's pid namespace is id
// in this process's /proc, with its process, and says whether the user the
// tree is served for may ptrace it (threads.look).
func (f *FS) resolve(id int) (resolved, error) {
	tid, err := f.pids.TID(id)
	if err != nil {
		return resolved{}, err
	}
	tgid := f.tgid(tid)
	return resolved{tid: tid, tgid: tgid, mayTrace: f.user.Privileged || f.user.Check(tgid) == nil}, nil
}
