package fuse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/uetrace/uetrace/internal/procfs"
	"golang.org/x/sys/unix"
)

// FileSystem is a path-based tree; the server keeps node IDs <-> paths
// itself (lookup counts, FORGET/BATCH_FORGET), paths are '/'-separated
// relative to the root ("" is the root).
//
// Errors are returned to the caller as their errno when they wrap a
// unix.Errno (errors.Is(err, unix.ENOENT)), as EINTR when the request was
// interrupted and the method returned because of it, and as EIO otherwise.
type FileSystem interface {
	// Stat answers LOOKUP and GETATTR.
	Stat(ctx context.Context, path string) (Attr, error)
	// ReadDir answers OPENDIR (and READDIR from offset 0 again); the server
	// adds . and .. An error with no entries fails OPENDIR; entries with
	// an error are a listing that fails after them: READDIR serves them,
	// then answers the error.
	ReadDir(ctx context.Context, path string) ([]DirEntry, error)
	// Open answers OPEN. flags are open(2)'s flags as FUSE gives them:
	// O_ACCMODE, O_APPEND, O_NONBLOCK, and O_TRUNC (FUSE_ATOMIC_O_TRUNC is
	// negotiated, so a truncating open is one OPEN with O_TRUNC and no
	// SETATTR); O_CREAT and O_EXCL are the kernel's business and absent.
	Open(ctx context.Context, r *Request, path string, flags uint32) (Handle, error)
}

// Attr is what Stat tells of a node. Nlink 0 is reported as 1 (2 for a
// directory). The inode number (st_ino) is Ino, or the server's node ID when
// Ino is 0: a node ID changes when the kernel forgets a node and looks its
// path up again, so a file that programs must recognise by what it is —
// st_dev and st_ino, as the interposer recognises user_events_data — gives
// an Ino of its own, fixed for the life of the mount.
type Attr struct {
	Ino      uint64
	Mode     uint32 // S_IFREG|0644 ...
	Size     uint64
	Nlink    uint32
	Uid, Gid uint32
	Mtime    time.Time // also atime and ctime
}

// DirEntry is one name in a directory; Mode's type bits give d_type.
type DirEntry struct {
	Name string
	Mode uint32
}

// Request says who asked.
type Request struct {
	Unique   uint64
	Pid      uint32 // the calling thread's id as FUSE reports it (the tid, in the server's pid namespace)
	Uid, Gid uint32
	// Flags, in a READ, are the file's flags as they are at the read
	// (fuse_read_args_fill passes f_flags): O_NONBLOCK set with fcntl
	// after the open shows here.
	Flags uint32

	// An inline write's claim (see Commit), nil for any other request.
	claim *atomic.Uint64
	seq   uint64
}

// Handle is one open file. Every open gets FOPEN_DIRECT_IO (no page cache:
// each read/write reaches the handle, with the caller's errno returned
// synchronously).
//
// Read returns the bytes read (0 and nil, or io.EOF, at end of file); an
// error with n > 0 is dropped and the n bytes returned. Write returns the
// bytes taken. Release is called once when the last descriptor (and
// mapping) is gone, or when the connection ends.
type Handle interface {
	Read(ctx context.Context, r *Request, dst []byte, off int64) (int, error)
	Write(ctx context.Context, r *Request, data []byte, off int64) (int, error)
	Release() error
}

// Flusher is a Handle told of each close(2) of one of its descriptors
// (FLUSH). A Handle without it is opened FOPEN_NOFLUSH (Linux 5.17): its
// closes cost no round trip, and never wait for the server — not even
// the server's own closes of the mount's files while it exits, which
// would wait for an answer nobody is left to give.
type Flusher interface {
	Flush(ctx context.Context, r *Request) error
}

// Ioctler is a Handle with restricted (non-CUSE) ioctls. A Handle without
// it answers every ioctl ENOTTY.
type Ioctler interface {
	// in is what FUSE copied from the caller: _IOC_SIZE(cmd) bytes at arg
	// when _IOC_WRITE. outSize is what the kernel copies back to arg when
	// _IOC_READ: the returned out must be exactly that long, or nil to copy
	// nothing back (any other length is answered EIO). The kernel writes
	// out over the caller's memory at arg, so e.g. for an argument that is
	// a pointer the reply must echo the input bytes. result is ioctl(2)'s
	// return value.
	Ioctl(ctx context.Context, r *Request, cmd uint32, arg uint64, in []byte, outSize uint32) (result int32, out []byte, err error)
}

// Poller is a Handle that poll(2), select(2) and epoll see. A Handle
// without it is always readable and writable.
type Poller interface {
	// Poll returns the ready events (POLLIN...). When wake is non-nil
	// (FUSE_POLL_SCHEDULE_NOTIFY), the handle must call wake() once when
	// readiness may have changed (the server turns it into FUSE_NOTIFY_POLL
	// with the kernel's kh). wake may be called from any goroutine, more
	// than once, and after the connection ended; it does not block on the
	// caller of poll.
	Poll(ctx context.Context, r *Request, events uint32, wake func()) (revents uint32, err error)
}

// ReadWaiter is a Handle whose reads may wait (a pipe's): WaitRead returns
// once a Read would not wait, or with an error that answers the READ
// (ctx's when it is interrupted), and only then is the read's buffer —
// up to max_read, 1 MiB — taken, so that a caller's threads blocked in
// reads cost the server a goroutine each and no buffer.
type ReadWaiter interface {
	WaitRead(ctx context.Context, r *Request) error
}

// DirOpener is a FileSystem told of each OPENDIR, so that it can count
// what its callers hold open: a non-nil error refuses it (its errno
// answers), and release, when not nil, is called once when the directory
// handle goes (RELEASEDIR, the opener gone before the reply, or the
// connection's end).
type DirOpener interface {
	OpenDir(ctx context.Context, r *Request, path string) (release func(), err error)
}

// Streamer is a Handle that may say it is a stream (a pipe or a trace_pipe):
// Stream true opens it FOPEN_STREAM|FOPEN_NONSEEKABLE, so lseek fails with
// ESPIPE and reads and writes get offset 0.
type Streamer interface {
	Stream() bool
}

// Backed is a Handle whose mmap(2) is another file's: a memfd the server
// shares with the callers, mapped in place (FUSE passthrough, Linux 6.9 and
// later). Its reads, writes, ioctls and polls still reach the Handle
// (FOPEN_DIRECT_IO overrides passthrough for read and write); only mmap goes
// to the backing file, as a mapping of that file. It needs
// Options.Passthrough, and CAP_SYS_ADMIN in the initial user namespace
// (the kernel's FUSE_DEV_IOC_BACKING_OPEN); without either the open fails
// (EOPNOTSUPP, EPERM) and the Handle is released.
//
// Linux keeps one backing file per inode: every open of a path whose
// handles are Backed must give the same file, or the open fails (EIO), so
// a server gives each backing file a path of its own.
type Backed interface {
	// Backing returns the descriptor of the file mmap maps (it stays the
	// handle's; the server duplicates what it needs).
	Backing() int
}

// Options of a connection.
type Options struct {
	FSName     string // shown in mountinfo's source field; "uetrace" when empty
	AllowOther bool   // let users other than the mounter in (Mount only)
	MaxWrite   uint32 // largest WRITE; 0: 1 MiB (uses FUSE_MAX_PAGES)
	// Dev, for Serve, is the st_dev of the mount the descriptor serves, as
	// its mounter read it from its own mount table (MountDev): the
	// connection's name in fusectl, for Abort. 0: unknown, and Abort
	// cannot abort (Unmount still ends the connection by closing the
	// device). Mount learns it itself.
	Dev uint64
	// Passthrough asks the kernel for FUSE passthrough at INIT, so that
	// Backed handles can be opened (Conn.Passthrough says whether it was
	// granted). It makes the mount's stacking depth 1 (another stacked
	// file system may still sit on it, as on any FUSE mount).
	Passthrough bool
	Debug       func(format string, args ...any)
}

const defaultMaxWrite = 1 << 20

// Conn is one served FUSE connection.
type Conn struct {
	fs   FileSystem
	opts Options
	dev  *os.File
	raw  syscall.RawConn
	dir  string // mount point, "" when served over a descriptor mounted elsewhere

	maxWrite uint32
	bufSize  int
	bigPool  sync.Pool
	smlPool  sync.Pool

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	nodes     map[uint64]*node
	byPath    map[string]uint64
	nextNode  uint64
	handles   map[uint64]any // *fileHandle or *dirHandle
	nextFH    uint64
	inflight  map[uint64]*inflight
	maxUnique uint64
	inited    bool
	passthru  bool // FUSE_PASSTHROUGH granted at INIT

	devNum   atomic.Uint64
	handlers sync.WaitGroup
	ended    chan error // the reader that saw the connection end says why
	done     chan struct{}
	err      error

	// Requests answered inline (inline.go): the readers, under mu;
	// whether the watchdog runs, and its end; the requests being
	// answered, for Stats.
	readers    []*reader
	watching   atomic.Bool
	unwatch    chan struct{}
	inlineBusy atomic.Int64

	// Ending the readers (reader.go): closing, and c.wake (an eventfd,
	// -1 once closed) written, wakes one in ppoll; idle is the device's
	// duplicate one waits on in the poller, closed to wake it.
	closing atomic.Bool
	wake    int
	idle    *os.File
}

// Mount mounts fs on dir and serves it. It needs root (CAP_SYS_ADMIN) and
// /dev/fuse: it opens /dev/fuse and calls mount(2) with fstype
// "fuse.uetrace", data "fd=N,rootmode=40000,user_id=U,group_id=G
// [,allow_other],default_permissions" (so the kernel checks modes itself),
// then serves in goroutines; the INIT handshake happens while serving.
// This process must never access dir's files itself (see the package doc).
func Mount(dir string, fs FileSystem, o Options) (*Conn, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fuse: mount point %q: %w", dir, err)
	}
	// Resolved before mounting: afterwards, a path walk to dir would reach
	// the mount's root and ask this very process.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("fuse: mount point: %w", err)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
			return nil, fmt.Errorf("fuse: open /dev/fuse: %w (this system has no FUSE device: load the module with `modprobe fuse`, or give the container /dev/fuse)", err)
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("fuse: open /dev/fuse: %w (run as root, or mount with a privileged helper and serve its descriptor with Serve)", err)
		}
		return nil, fmt.Errorf("fuse: open /dev/fuse: %w", err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=%o,user_id=%d,group_id=%d", fd, sIFDIR, os.Getuid(), os.Getgid())
	if o.AllowOther {
		data += ",allow_other"
	}
	data += ",default_permissions"
	if err := unix.Mount(fsName(o), real, "fuse.uetrace", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("fuse: mount %s: %w (mounting needs CAP_SYS_ADMIN: run as root)", real, err)
		case errors.Is(err, unix.ENODEV):
			return nil, fmt.Errorf("fuse: mount %s: %w (the kernel has no fuse filesystem type: load it with `modprobe fuse`)", real, err)
		}
		return nil, fmt.Errorf("fuse: mount %s: %w", real, err)
	}
	c, err := newConn(fd, fs, o)
	if err != nil {
		unix.Unmount(real, unix.MNT_DETACH)
		return nil, err
	}
	c.dir = real
	if d, ok := findMount(func(mp, fstype, source string) bool {
		return mp == real && fstype == "fuse.uetrace"
	}); ok {
		c.devNum.Store(d)
	}
	go c.serve()
	return c, nil
}

// Serve serves fs over dev, an already-mounted /dev/fuse descriptor (e.g.
// mounted by a helper inside a user namespace and passed over SCM_RIGHTS).
// The INIT handshake happens in serving. Serve takes dev over: it closes
// it, keeping a duplicate that is closed when the connection ends (closing
// the last descriptor of a connection aborts it). The mount's st_dev (for
// Abort) is o.Dev: nothing about the descriptor tells which mount it
// serves, and a mount made in another mount namespace — as uetrace run's
// is — is not in this process's table, where another fuse.uetrace mount of
// the same name may well be (aborting that one instead would end someone
// else's tree).
func Serve(dev *os.File, fs FileSystem, o Options) (*Conn, error) {
	rc, err := dev.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("fuse: serve: %w", err)
	}
	nfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) {
		nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("fuse: serve: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("fuse: serve: dup: %w", derr)
	}
	dev.Close()
	if err := unix.SetNonblock(nfd, true); err != nil {
		unix.Close(nfd)
		return nil, fmt.Errorf("fuse: serve: %w", err)
	}
	c, err := newConn(nfd, fs, o)
	if err != nil {
		return nil, err
	}
	c.devNum.Store(o.Dev)
	go c.serve()
	return c, nil
}

func fsName(o Options) string {
	if o.FSName == "" {
		return "uetrace"
	}
	return o.FSName
}

func newConn(fd int, fs FileSystem, o Options) (*Conn, error) {
	// The device is kept out of the runtime's poller (see reader): an
	// os.File of a blocking descriptor is not added to it, and the
	// descriptor is made non-blocking again for the readers' reads.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fuse: %w", err)
	}
	f := os.NewFile(uintptr(fd), "/dev/fuse")
	if err := unix.SetNonblock(fd, true); err != nil {
		f.Close()
		return nil, fmt.Errorf("fuse: %w", err)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fuse: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fuse: eventfd: %w", err)
	}
	mw := o.MaxWrite
	if mw == 0 {
		mw = defaultMaxWrite
	}
	mw = max(mw, 4096)
	c := &Conn{
		fs: fs, opts: o, dev: f, raw: raw, wake: wake,
		maxWrite: mw,
		bufSize:  int(mw) + 4096,
		nodes:    map[uint64]*node{rootID: {path: "", typ: sIFDIR, nlookup: 1}},
		byPath:   map[string]uint64{"": rootID},
		nextNode: rootID + 1,
		handles:  map[uint64]any{},
		nextFH:   1,
		inflight: map[uint64]*inflight{},
		ended:    make(chan error, 1),
		done:     make(chan struct{}),
		unwatch:  make(chan struct{}),
	}
	c.bigPool.New = func() any { b := make([]byte, c.bufSize); return &b }
	c.smlPool.New = func() any { b := make([]byte, smallBuf); return &b }
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Wait returns when the connection ends (unmounted, aborted, DESTROY) and
// every request being handled has returned; the error says why it ended
// when that was not an unmount or abort.
func (c *Conn) Wait() error {
	<-c.done
	return c.err
}

// unmountWait bounds Unmount's Wait.
const unmountWait = 10 * time.Second

// Unmount ends the connection without ever blocking on the kernel: it
// aborts the connection through fusectl (when its number is known and
// fusectl is mounted), detaches the mount (MNT_DETACH, when Mount made it),
// stops the readers, which closes the device once the requests being
// handled have returned (the last descriptor's close aborts the connection
// as well, so this ends it even without fusectl), and then waits, bounded,
// for the serving to end.
func (c *Conn) Unmount() error {
	select {
	case <-c.done:
		// Served to its end: the kernel ended the connection (its mount
		// was unmounted), and its device number may already be another
		// mount's — whose callers an abort by that number would fail
		// with ENOTCONN.
	default:
		if err := c.Abort(); err != nil {
			c.debugf("%v (closing the device instead)", err)
		}
	}
	var errs []error
	if c.dir != "" {
		if err := unix.Unmount(c.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("fuse: umount %s: %w", c.dir, err))
		}
	}
	c.stopReading()
	t := time.NewTimer(unmountWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		errs = append(errs, fmt.Errorf("fuse: the connection's requests did not return within %v of the unmount (a Handle ignores its ctx)", unmountWait))
	}
	return errors.Join(errs...)
}

// fusectl is where the kernel lists FUSE connections, when fusectl is
// mounted there.
const (
	fusectl      = "/sys/fs/fuse/connections"
	fusectlMagic = 0x65735543 // FUSE_CTL_SUPER_MAGIC
)

// Abort aborts the connection through fusectl only: every request waiting
// fails with ECONNABORTED (or ENOTCONN) and every later one with ENOTCONN.
// A connection already gone is no error.
func (c *Conn) Abort() error {
	d := c.Dev()
	if d == 0 {
		return errors.New("fuse: abort: the connection's number is unknown (Serve was not given Options.Dev)")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(fusectl, &st); err != nil || st.Type != fusectlMagic {
		return fmt.Errorf("fuse: abort: fusectl is not mounted at %s (mount -t fusectl none %s)", fusectl, fusectl)
	}
	// fusectl names a connection by the kernel's dev_t: MAJOR<<20|MINOR,
	// and anonymous devices have major 0.
	kdev := uint64(unix.Major(d))<<20 | uint64(unix.Minor(d))
	p := fusectl + "/" + strconv.FormatUint(kdev, 10) + "/abort"
	if err := os.WriteFile(p, []byte("1"), 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // the connection is already gone
		}
		return fmt.Errorf("fuse: abort: %w", err)
	}
	return nil
}

// Passthrough reports whether the kernel granted FUSE passthrough at INIT
// (Options.Passthrough, a kernel with CONFIG_FUSE_PASSTHROUGH, 6.9 or
// later): whether Backed handles can be opened at all.
func (c *Conn) Passthrough() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passthru
}

// Dev is the mount's st_dev (its minor is the connection number): found by
// Mount, given to Serve as Options.Dev, else 0.
func (c *Conn) Dev() uint64 { return c.devNum.Load() }

// MountDev is the st_dev of the fuse.uetrace mount on top at dir (an
// absolute path without symbolic links) in this process's mount table, for
// a mounter to pass on with the descriptor (Options.Dev). Reading the table
// asks no file system anything, so a mounter may call it before the mount
// is served.
func MountDev(dir string) (uint64, bool) {
	return findMount(func(mp, fstype, source string) bool {
		return mp == dir && fstype == "fuse.uetrace"
	})
}

func (c *Conn) debugf(format string, args ...any) {
	if c.opts.Debug != nil {
		c.opts.Debug(format, args...)
	}
}

// findMount is the device of the last mount (the one on top) that match
// accepts. Reading mountinfo asks no filesystem anything (a FUSE
// superblock's options come from the kernel's own copy).
func findMount(match func(mp, fstype, source string) bool) (uint64, bool) {
	ms, _ := procfs.Mounts()
	var d uint64
	ok := false
	for _, m := range ms {
		if match(m.MountPoint, m.FSType, m.Source) {
			d, ok = m.Dev, true
		}
	}
	return d, ok
}

// Stats is what a connection holds at one moment: a server's way to see
// that what callers opened and asked for is let go again.
type Stats struct {
	Handles  int // open files and directories the kernel has not released
	Nodes    int // nodes the kernel holds lookups of, the root included
	InFlight int // requests being handled (a blocked trace_pipe read is one)
}

// Stats returns what the connection holds now.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Handles: len(c.handles), Nodes: len(c.nodes), InFlight: len(c.inflight) + int(c.inlineBusy.Load())}
}
