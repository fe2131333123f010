package fuse

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// smallBuf: a request this short is copied out of the big read buffer, so a
// blocked handler holds 8 KiB rather than max_write.
const smallBuf = 8192

// midBuf is a READ buffer for cat's 128 KiB reads: a read that blocks (a
// pipe's) holds that, not max_write.
const midBuf = 128 << 10

var midPool = sync.Pool{New: func() any { b := make([]byte, midBuf); return &b }}

// defaultPollMask is what the kernel assumes of a file without poll.
const defaultPollMask = unix.POLLIN | unix.POLLOUT | 0x40 | 0x100 // POLLRDNORM, POLLWRNORM

// node is a path the kernel holds references (lookups) to. typ is its
// S_IFMT: a path whose type changed gets a new node, as the kernel marks an
// inode bad whose type changes under it.
type node struct {
	path    string
	typ     uint32
	nlookup uint64
}

// inflight is a request being handled, for INTERRUPT to find.
type inflight struct {
	cancel context.CancelFunc
}

type fileHandle struct {
	h       Handle
	backing int32 // the backing id of a Backed handle (passthrough), 0 for none
}

type dirHandle struct {
	mu      sync.Mutex
	node    uint64
	path    string
	ents    []dirent
	err     unix.Errno // what READDIR answers past ents: the end of a listing that failed there
	served  bool
	release func() // DirOpener's, or nil
}

// close runs the DirOpener's release, once: the handle is out of the
// handles map (takeHandle) or was never in it.
func (d *dirHandle) close() {
	if d.release != nil {
		d.release()
	}
}

type dirent struct {
	name string
	typ  uint32 // DT_*
	ino  uint64
}

// result is a handler's answer: body after the out header, or errno; after
// (when set) runs once the reply was written (ok) or could not be (the
// kernel no longer waits for it, so what the reply gave must be undone).
type result struct {
	body  [][]byte
	errno unix.Errno
	after func(ok bool)
}

func errResult(e unix.Errno) result { return result{errno: e} }

// serve reads requests until the connection ends, then cancels what is in
// flight, waits for it, releases the handles the kernel never released and
// closes the device.
func (c *Conn) serve() {
	go c.readLoop(c.newReader())
	err := <-c.ended
	c.cancel()
	c.handlers.Wait()
	c.stopWatch()
	c.mu.Lock()
	hs := c.handles
	c.handles = map[uint64]any{}
	c.mu.Unlock()
	for _, h := range hs {
		switch h := h.(type) {
		case *fileHandle:
			c.releaseFile(h)
		case *dirHandle:
			h.close()
		}
	}
	c.dev.Close()
	c.mu.Lock()
	unix.Close(c.wake)
	c.wake = -1
	c.mu.Unlock()
	c.err = err
	close(c.done)
}

// readLoop reads requests until the connection ends — then it says so on
// c.ended — or until r is retired (the watchdog gave the reading to another
// reader while r handled a request inline).
func (c *Conn) readLoop(r *reader) {
	defer c.dropReader(r)
	for {
		bp := c.bigPool.Get().(*[]byte)
		n, waited, err, closed := r.read(*bp)
		if closed {
			c.bigPool.Put(bp)
			c.end(nil)
			return
		}
		if err != nil {
			c.bigPool.Put(bp)
			switch {
			case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EINTR):
				continue // the request was interrupted before we read it
			case errors.Is(err, unix.ENODEV):
				c.end(nil) // unmounted or aborted
				return
			}
			c.end(fmt.Errorf("fuse: read /dev/fuse: %w", err))
			return
		}
		if n == 0 {
			// /dev/fuse never reads 0 bytes; a socket standing in for it
			// does when its peer is gone.
			c.bigPool.Put(bp)
			c.end(nil)
			return
		}
		end, retired, err := c.dispatch(r, (*bp)[:n], bp, waited)
		if end {
			c.end(err)
			return
		}
		if retired {
			return
		}
	}
}

// end says the connection ended, with why (nil: unmounted or aborted): once.
func (c *Conn) end(err error) {
	select {
	case c.ended <- err:
	default:
	}
}

// dispatch answers INIT, INTERRUPT and FORGET at once (they must be seen in
// order), a WRITE that may be answered inline (see reader) at once too, and
// starts a goroutine for anything else; the request is known to INTERRUPT
// before the next one is read. b is in the big buffer *bp, which dispatch
// gives back to the pool once b is no longer used. retired: r handled the
// request inline and lost the reading meanwhile.
func (c *Conn) dispatch(r *reader, b []byte, bp *[]byte, waited bool) (end, retired bool, err error) {
	m, derr := decode(b)
	if derr == errBadHeader {
		c.debugf("fuse: dropped a request with a bad header (%d bytes)", len(b))
		c.bigPool.Put(bp)
		return false, false, nil
	}
	var inline Handle
	if m.op != opInterrupt {
		c.mu.Lock()
		c.maxUnique = max(c.maxUnique, m.unique)
		inited := c.inited
		if m.op == opWrite && derr == nil && r.inline(m.pid, waited) {
			if h, ok := c.handles[m.fh].(*fileHandle); ok {
				if iw, ok := h.h.(InlineWriter); ok && iw.InlineWrites() {
					inline = h.h
				}
			}
		}
		c.mu.Unlock()
		if !inited && m.op != opInit {
			c.reply(m.unique, unix.EIO)
			c.bigPool.Put(bp)
			return false, false, nil
		}
	}
	if derr != nil {
		c.debugf("fuse: malformed %s request %d (%d bytes)", opName(m.op), m.unique, len(b))
		if m.op != opForget && m.op != opBatchForget && m.op != opNotifyReply {
			c.reply(m.unique, unix.EIO)
		}
		c.bigPool.Put(bp)
		return false, false, nil
	}
	if inline != nil {
		retired = r.writeInline(&m, inline)
		c.bigPool.Put(bp)
		return false, retired, nil
	}
	// What is handled in a goroutine may wait, holding its buffer: a
	// short request is copied out of the big one.
	owner, pool := bp, &c.bigPool
	if len(b) <= smallBuf {
		sp := c.smlPool.Get().(*[]byte)
		copy(*sp, b)
		if m.data != nil { // WRITE's and IOCTL's, a slice of b
			off := cap(b) - cap(m.data)
			m.data = (*sp)[off : off+len(m.data)]
		}
		c.bigPool.Put(bp)
		owner, pool = sp, &c.smlPool
	}
	switch m.op {
	case opInit:
		pool.Put(owner)
		end, err := c.init(&m)
		return end, false, err
	case opInterrupt:
		c.interrupt(&m)
		pool.Put(owner)
		return false, false, nil
	case opForget:
		c.mu.Lock()
		c.forget(m.node, m.nlookup)
		c.mu.Unlock()
		pool.Put(owner)
		return false, false, nil
	case opBatchForget:
		c.mu.Lock()
		for _, f := range m.forgets {
			c.forget(f.node, f.nlookup)
		}
		c.mu.Unlock()
		pool.Put(owner)
		return false, false, nil
	case opNotifyReply:
		pool.Put(owner) // we never ask for one; it wants no answer
		return false, false, nil
	case opDestroy:
		c.reply(m.unique, 0)
		pool.Put(owner)
		return false, false, nil // the kernel ends the connection: the next read is ENODEV
	}
	c.spawn(m, owner, pool)
	return false, false, nil
}

// spawn handles m in a goroutine of its own, then gives its buffer back to
// pool. (A function of its own, so that the message of a request answered
// inline is not moved to the heap for the goroutine's sake.)
func (c *Conn) spawn(m message, owner *[]byte, pool *sync.Pool) {
	ctx, cancel := context.WithCancel(c.ctx)
	inf := &inflight{cancel: cancel}
	c.mu.Lock()
	c.inflight[m.unique] = inf
	c.mu.Unlock()
	c.handlers.Add(1)
	go func() {
		defer c.handlers.Done()
		// An INTERRUPT (a signal to the caller's thread: the Go
		// runtime's preemption SIGURG, for one) cancels ctx; a method
		// that returned because of it answers EINTR (errnoOf), one that
		// finished anyway keeps its own answer — a user_events write that
		// fails with ENOENT fails so in Linux whatever signal arrives.
		r := c.handle(ctx, &m)
		err := c.reply(m.unique, r.errno, r.body...)
		if r.after != nil {
			r.after(err == nil)
		}
		c.mu.Lock()
		delete(c.inflight, m.unique)
		c.mu.Unlock()
		cancel()
		pool.Put(owner)
	}()
}

func (c *Conn) init(m *message) (bool, error) {
	if m.major != kernelMajor || m.minor < minMinor {
		c.reply(m.unique, unix.EPROTO)
		return true, fmt.Errorf("fuse: the kernel speaks FUSE %d.%d; this server needs %d.%d or later: %w", m.major, m.minor, kernelMajor, minMinor, unix.EPROTO)
	}
	const want = initAsyncRead | initAtomicOTrunc | initBigWrites | initMaxPages
	pages := min((c.maxWrite+4095)/4096, math.MaxUint16)
	out := make([]byte, initOutSize)
	le.PutUint32(out[0:], kernelMajor)
	le.PutUint32(out[4:], min(m.minor, ourMinor))
	le.PutUint32(out[8:], m.maxReadahead)
	flags := m.initFlags & want
	// Passthrough (fuse_init_out's flags2 and max_stack_depth, 7.40): a
	// depth of 1 lets the backing files be on any file system that is not
	// itself stacked (a memfd's shmem is not).
	passthru := c.opts.Passthrough && m.initFlags&initInitExt != 0 && m.initFlags2&init2Passthrough != 0
	if passthru {
		flags |= initInitExt
		le.PutUint32(out[32:], init2Passthrough)
		le.PutUint32(out[36:], 1)
	}
	le.PutUint32(out[12:], flags)
	// max_background, congestion_threshold 0: the kernel's defaults.
	le.PutUint32(out[20:], c.maxWrite)
	le.PutUint32(out[24:], 1) // time_gran: nanoseconds
	le.PutUint16(out[28:], uint16(pages))
	if err := c.reply(m.unique, 0, out); err != nil {
		return true, fmt.Errorf("fuse: answering INIT: %w", err)
	}
	c.mu.Lock()
	c.inited = true
	c.passthru = passthru
	c.mu.Unlock()
	c.debugf("fuse: INIT kernel %d.%d flags %#x, max_write %d", m.major, m.minor, m.initFlags, c.maxWrite)
	return false, nil
}

// interrupt cancels the request INTERRUPT names. One not read yet (possible
// only if requests were read by more than one reader) is answered EAGAIN, so
// the kernel sends the INTERRUPT again later; one already answered needs
// nothing.
func (c *Conn) interrupt(m *message) {
	c.mu.Lock()
	inf := c.inflight[m.target]
	seen := m.target <= c.maxUnique
	c.mu.Unlock()
	if inf != nil {
		inf.cancel()
		return
	}
	if !seen {
		c.reply(m.unique, unix.EAGAIN)
	}
}

// forget drops n lookups of node id; c.mu is held.
func (c *Conn) forget(id, n uint64) {
	if id == rootID {
		return
	}
	nd := c.nodes[id]
	if nd == nil {
		return
	}
	if n < nd.nlookup {
		nd.nlookup -= n
		return
	}
	delete(c.nodes, id)
	if c.byPath[nd.path] == id {
		delete(c.byPath, nd.path)
	}
}

// ref takes a lookup reference to path, of type typ.
func (c *Conn) ref(path string, typ uint32) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id := c.byPath[path]; id != 0 {
		if nd := c.nodes[id]; nd.typ == typ {
			nd.nlookup++
			return id
		}
		if id == rootID {
			return id // the root is the root, whatever Stat says
		}
	}
	id := c.nextNode
	c.nextNode++
	c.nodes[id] = &node{path: path, typ: typ, nlookup: 1}
	c.byPath[path] = id
	return id
}

func (c *Conn) node(id uint64) (node, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[id]
	if nd == nil {
		return node{}, false
	}
	return *nd, true
}

func (c *Conn) fileHandle(fh uint64) (Handle, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.handles[fh].(*fileHandle)
	if !ok {
		return nil, false
	}
	return h.h, true
}

func (c *Conn) addHandle(h any) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	fh := c.nextFH
	c.nextFH++
	c.handles[fh] = h
	return fh
}

func (c *Conn) takeHandle(fh uint64) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.handles[fh]
	delete(c.handles, fh)
	return h
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// errnoOf is the errno an error from the FileSystem is answered with.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) && e > 0 && e < 512 {
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return unix.EINTR
	}
	return unix.EIO
}

func (c *Conn) handle(ctx context.Context, m *message) result {
	req := &Request{Unique: m.unique, Pid: m.pid, Uid: m.uid, Gid: m.gid}
	switch m.op {
	case opLookup:
		return c.lookup(ctx, m)
	case opGetattr:
		return c.getattr(ctx, m)
	case opSetattr:
		return c.setattr(ctx, m)
	case opOpen:
		return c.open(ctx, req, m)
	case opRead:
		return c.readFile(ctx, req, m)
	case opWrite:
		h, ok := c.fileHandle(m.fh)
		if !ok {
			return errResult(unix.EBADF)
		}
		n, e := c.writeOp(ctx, req, h, m)
		if e != 0 {
			return errResult(e)
		}
		out := make([]byte, writeOutSize)
		le.PutUint32(out, n)
		return result{body: [][]byte{out}}
	case opFlush:
		h, ok := c.fileHandle(m.fh)
		if !ok {
			return errResult(unix.EBADF)
		}
		// A kernel before 5.17 flushes a FOPEN_NOFLUSH file too.
		if f, ok := h.(Flusher); ok {
			if err := f.Flush(ctx, req); err != nil {
				return errResult(errnoOf(err))
			}
		}
		return result{}
	case opRelease, opReleasedir:
		switch h := c.takeHandle(m.fh).(type) {
		case *fileHandle:
			c.releaseFile(h)
		case *dirHandle:
			h.close()
		}
		return result{}
	case opOpendir:
		return c.opendir(ctx, req, m)
	case opReaddir:
		return c.readdir(ctx, m)
	case opStatfs:
		out := make([]byte, statfsOutSize)
		le.PutUint32(out[40:], 4096) // bsize
		le.PutUint32(out[44:], 255)  // namelen
		le.PutUint32(out[48:], 4096) // frsize
		return result{body: [][]byte{out}}
	case opIoctl:
		return c.ioctl(ctx, req, m)
	case opPoll:
		return c.poll(ctx, req, m)
	}
	// ACCESS (default_permissions makes the kernel check itself), the
	// xattrs, and everything that would change the tree: ENOSYS, which the
	// kernel remembers for most of them and stops asking.
	return errResult(unix.ENOSYS)
}

// writeOp is WRITE's answer from h: the count the caller's write returns, or
// its errno.
func (c *Conn) writeOp(ctx context.Context, req *Request, h Handle, m *message) (uint32, unix.Errno) {
	if m.offset > math.MaxInt64 {
		return 0, unix.EINVAL
	}
	n, err := h.Write(ctx, req, m.data, int64(m.offset))
	if n < 0 || n > len(m.data) {
		c.debugf("fuse: Write returned %d of %d bytes", n, len(m.data))
		return 0, unix.EIO
	}
	if err != nil && n == 0 {
		return 0, errnoOf(err)
	}
	return uint32(n), 0
}

func (c *Conn) lookup(ctx context.Context, m *message) result {
	if m.name == "" || m.name == "." || m.name == ".." || strings.Contains(m.name, "/") {
		return errResult(unix.ENOENT)
	}
	parent, ok := c.node(m.node)
	if !ok {
		return errResult(unix.ESTALE)
	}
	p := join(parent.path, m.name)
	a, err := c.fs.Stat(ctx, p)
	if err != nil {
		return errResult(errnoOf(err))
	}
	id := c.ref(p, a.Mode&sIFMT)
	out := make([]byte, entryOutSize)
	le.PutUint64(out[0:], id)
	// generation 0 (IDs are never reused); entry and attr timeouts 0: the
	// tree changes under the kernel, so every walk asks again.
	putAttr(out[40:], id, a)
	return result{body: [][]byte{out}, after: func(ok bool) {
		if !ok { // the kernel took no reference
			c.mu.Lock()
			c.forget(id, 1)
			c.mu.Unlock()
		}
	}}
}

func (c *Conn) statNode(ctx context.Context, id uint64) ([]byte, unix.Errno) {
	nd, ok := c.node(id)
	if !ok {
		return nil, unix.ESTALE
	}
	a, err := c.fs.Stat(ctx, nd.path)
	if err != nil {
		return nil, errnoOf(err)
	}
	if a.Mode&sIFMT != nd.typ && id != rootID {
		return nil, unix.ENOENT // the path is another file now
	}
	out := make([]byte, attrOutSize)
	putAttr(out[16:], id, a)
	return out, 0
}

func (c *Conn) getattr(ctx context.Context, m *message) result {
	out, e := c.statNode(ctx, m.node)
	if e != 0 {
		return errResult(e)
	}
	return result{body: [][]byte{out}}
}

// setattr changes nothing: modes and owners are EPERM, a size other than 0
// is EPERM (the files are not storage), and truncating to 0 or setting
// times answers the attributes as they are.
func (c *Conn) setattr(ctx context.Context, m *message) result {
	if m.valid&(fattrMode|fattrUID|fattrGID) != 0 {
		return errResult(unix.EPERM)
	}
	if m.valid&fattrSize != 0 && m.setSize != 0 {
		return errResult(unix.EPERM)
	}
	return c.getattr(ctx, m)
}

func (c *Conn) open(ctx context.Context, req *Request, m *message) result {
	nd, ok := c.node(m.node)
	if !ok {
		return errResult(unix.ESTALE)
	}
	h, err := c.fs.Open(ctx, req, nd.path, m.flags)
	if err != nil {
		return errResult(errnoOf(err))
	}
	if h == nil {
		c.debugf("fuse: Open(%q) returned no Handle and no error", nd.path)
		return errResult(unix.EIO)
	}
	fh := c.addHandle(&fileHandle{h: h})
	flags := uint32(fopenDirectIO)
	if s, ok := h.(Streamer); ok && s.Stream() {
		flags |= fopenStream | fopenNonseekable
	}
	if _, ok := h.(Flusher); !ok {
		flags |= fopenNoflush
	}
	backingID := int32(0)
	if b, ok := h.(Backed); ok {
		id, errno := c.backingOpen(b.Backing())
		if errno != 0 {
			if c.takeHandle(fh) != nil {
				h.Release()
			}
			return errResult(errno)
		}
		backingID = id
		c.setBacking(fh, id)
		// FOPEN_DIRECT_IO overrides passthrough for read and write, so
		// they still reach the handle; mmap maps the backing file.
		flags = flags&fopenNoflush | fopenDirectIO | fopenPassthrough
	}
	out := make([]byte, openOutSize)
	le.PutUint64(out[0:], fh)
	le.PutUint32(out[8:], flags)
	le.PutUint32(out[12:], uint32(backingID))
	return result{body: [][]byte{out}, after: func(ok bool) {
		if !ok { // the opener is gone: no RELEASE will come
			if fh := c.takeHandle(fh); fh != nil {
				c.releaseFile(fh.(*fileHandle))
			}
		}
	}}
}

// FUSE_DEV_IOC_BACKING_OPEN, _IOW(229, 1, struct fuse_backing_map), and
// FUSE_DEV_IOC_BACKING_CLOSE, _IOW(229, 2, uint32_t).
const (
	devIocBackingOpen  = 0x4010e501
	devIocBackingClose = 0x4004e502
)

// backingOpen registers fd as a backing file of the connection and returns
// its id, which an OPEN answer names; the kernel holds the file until
// backingClose.
func (c *Conn) backingOpen(fd int) (int32, unix.Errno) {
	if !c.Passthrough() {
		return 0, unix.EOPNOTSUPP
	}
	// struct fuse_backing_map: s32 fd, u32 flags, u64 padding.
	var m [16]byte
	le.PutUint32(m[0:], uint32(fd))
	var id uintptr
	var errno unix.Errno
	if err := c.raw.Control(func(dev uintptr) {
		id, _, errno = unix.Syscall(unix.SYS_IOCTL, dev, devIocBackingOpen, uintptr(unsafe.Pointer(&m[0])))
	}); err != nil {
		return 0, unix.EIO
	}
	if errno != 0 {
		c.debugf("fuse: FUSE_DEV_IOC_BACKING_OPEN: %v", errno)
		return 0, errno
	}
	return int32(id), 0
}

// backingClose gives the kernel's reference to backing id back. The files
// opened with it keep their own.
func (c *Conn) backingClose(id int32) {
	v := uint32(id)
	c.raw.Control(func(dev uintptr) {
		unix.Syscall(unix.SYS_IOCTL, dev, devIocBackingClose, uintptr(unsafe.Pointer(&v)))
	})
}

// setBacking notes the backing id of handle fh, given back when it goes.
func (c *Conn) setBacking(fh uint64, id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.handles[fh].(*fileHandle); ok {
		h.backing = id
	}
}

// releaseFile releases a file handle and gives its backing id back.
func (c *Conn) releaseFile(h *fileHandle) {
	if h.backing != 0 {
		c.backingClose(h.backing)
	}
	if err := h.h.Release(); err != nil {
		c.debugf("fuse: Release: %v", err)
	}
}

// maxReadAlloc bounds a READ buffer whatever size the request says.
const maxReadAlloc = 64 << 20

func (c *Conn) readFile(ctx context.Context, req *Request, m *message) result {
	req.Flags = m.flags
	h, ok := c.fileHandle(m.fh)
	if !ok {
		return errResult(unix.EBADF)
	}
	if m.offset > math.MaxInt64 {
		return errResult(unix.EINVAL)
	}
	if w, ok := h.(ReadWaiter); ok {
		if err := w.WaitRead(ctx, req); err != nil {
			return errResult(errnoOf(err))
		}
	}
	size := int(min(m.size, maxReadAlloc))
	var dst []byte
	var put func()
	switch {
	case size <= smallBuf:
		bp := c.smlPool.Get().(*[]byte)
		dst, put = (*bp)[:size], func() { c.smlPool.Put(bp) }
	case size <= midBuf:
		bp := midPool.Get().(*[]byte)
		dst, put = (*bp)[:size], func() { midPool.Put(bp) }
	case size <= c.bufSize:
		bp := c.bigPool.Get().(*[]byte)
		dst, put = (*bp)[:size], func() { c.bigPool.Put(bp) }
	default:
		dst, put = make([]byte, size), func() {}
	}
	n, err := h.Read(ctx, req, dst, int64(m.offset))
	if n < 0 || n > size {
		put()
		c.debugf("fuse: Read returned %d of %d bytes", n, size)
		return errResult(unix.EIO)
	}
	if err != nil && n == 0 && !isEOF(err) {
		put()
		return errResult(errnoOf(err))
	}
	return result{body: [][]byte{dst[:n]}, after: func(bool) { put() }}
}

func (c *Conn) opendir(ctx context.Context, req *Request, m *message) result {
	nd, ok := c.node(m.node)
	if !ok {
		return errResult(unix.ESTALE)
	}
	d := &dirHandle{node: m.node, path: nd.path}
	if o, ok := c.fs.(DirOpener); ok {
		release, err := o.OpenDir(ctx, req, nd.path)
		if err != nil {
			return errResult(errnoOf(err))
		}
		d.release = release
	}
	if e := c.fillDir(ctx, d); e != 0 {
		d.close()
		return errResult(e)
	}
	fh := c.addHandle(d)
	out := make([]byte, openOutSize)
	le.PutUint64(out[0:], fh)
	return result{body: [][]byte{out}, after: func(ok bool) {
		if !ok { // the opener is gone: no RELEASEDIR will come
			if c.takeHandle(fh) != nil {
				d.close()
			}
		}
	}}
}

// fillDir reads d's entries: ., .., and what ReadDir says, less names the
// kernel would refuse (empty, with '/', over 1024 bytes) and . and .. again.
// A listing that failed part way (entries and an error) is served up to
// there, and READDIR past them answers the error, as getdents does on
// Linux (its directories open, then reading them fails).
func (c *Conn) fillDir(ctx context.Context, d *dirHandle) unix.Errno {
	list, err := c.fs.ReadDir(ctx, d.path)
	d.err = 0
	if err != nil {
		if list == nil {
			return errnoOf(err)
		}
		d.err = errnoOf(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	parent := uint64(rootID)
	if d.path != "" {
		pp := ""
		if i := strings.LastIndexByte(d.path, '/'); i >= 0 {
			pp = d.path[:i]
		}
		if id := c.byPath[pp]; id != 0 {
			parent = id
		}
	}
	ents := make([]dirent, 0, len(list)+2)
	ents = append(ents, dirent{".", 4, d.node}, dirent{"..", 4, parent})
	for _, e := range list {
		if e.Name == "" || e.Name == "." || e.Name == ".." || len(e.Name) > 1024 || strings.ContainsAny(e.Name, "/\x00") {
			continue
		}
		p := join(d.path, e.Name)
		ino := c.byPath[p]
		if ino == 0 {
			h := fnv.New64a()
			h.Write([]byte(p))
			ino = h.Sum64() | 1<<63 // never a node ID
		}
		ents = append(ents, dirent{e.Name, (e.Mode & sIFMT) >> 12, ino})
	}
	d.ents = ents
	return 0
}

func (c *Conn) readdir(ctx context.Context, m *message) result {
	c.mu.Lock()
	d, ok := c.handles[m.fh].(*dirHandle)
	c.mu.Unlock()
	if !ok {
		return errResult(unix.EBADF)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.offset == 0 && d.served { // rewinddir: read the directory again
		if e := c.fillDir(ctx, d); e != 0 {
			return errResult(e)
		}
	}
	d.served = true
	if d.err != 0 && m.offset >= uint64(len(d.ents)) {
		return errResult(d.err)
	}
	return result{body: [][]byte{packDirents(d.ents, m.offset, int(min(m.size, maxReadAlloc)))}}
}

// packDirents packs struct fuse_dirent records of ents from index off on,
// as many as fit in size bytes; each record's off is the next one's index.
func packDirents(ents []dirent, off uint64, size int) []byte {
	out := make([]byte, 0, min(size, 4096))
	for i := off; i < uint64(len(ents)); i++ {
		e := ents[i]
		rec := (direntSize + len(e.name) + 7) &^ 7
		if len(out)+rec > size {
			break
		}
		var h [direntSize]byte
		le.PutUint64(h[0:], e.ino)
		le.PutUint64(h[8:], i+1)
		le.PutUint32(h[16:], uint32(len(e.name)))
		le.PutUint32(h[20:], e.typ)
		out = append(out, h[:]...)
		out = append(out, e.name...)
		for range rec - direntSize - len(e.name) {
			out = append(out, 0)
		}
	}
	return out
}

func (c *Conn) ioctl(ctx context.Context, req *Request, m *message) result {
	if m.flags&ioctlUnrestricted != 0 {
		return errResult(unix.ENOSYS) // CUSE only
	}
	h, ok := c.fileHandle(m.fh)
	if !ok {
		return errResult(unix.ENOTTY) // a directory
	}
	ioc, ok := h.(Ioctler)
	if !ok {
		return errResult(unix.ENOTTY)
	}
	res, out, err := ioc.Ioctl(ctx, req, m.cmd, m.arg, m.data, m.outSize)
	if err != nil {
		return errResult(errnoOf(err))
	}
	if len(out) != 0 && uint32(len(out)) != m.outSize {
		c.debugf("fuse: Ioctl %#x returned %d bytes for the %d the kernel copies back", m.cmd, len(out), m.outSize)
		return errResult(unix.EIO)
	}
	hdr := make([]byte, ioctlOutSize)
	le.PutUint32(hdr[0:], uint32(res))
	return result{body: [][]byte{hdr, out}}
}

func (c *Conn) poll(ctx context.Context, req *Request, m *message) result {
	out := make([]byte, pollOutSize)
	h, ok := c.fileHandle(m.fh)
	var p Poller
	if ok {
		p, ok = h.(Poller)
	}
	if !ok {
		le.PutUint32(out, defaultPollMask)
		return result{body: [][]byte{out}}
	}
	var wake func()
	if m.flags&pollScheduleNotify != 0 {
		kh := m.kh
		wake = func() { c.notifyPoll(kh) }
	}
	rev, err := p.Poll(ctx, req, m.events, wake)
	if err != nil {
		return errResult(errnoOf(err))
	}
	le.PutUint32(out, rev)
	return result{body: [][]byte{out}}
}

// notifyPoll sends FUSE_NOTIFY_POLL for kernel poll handle kh.
func (c *Conn) notifyPoll(kh uint64) {
	var b [outHeaderSize + 8]byte
	le.PutUint32(b[0:], uint32(len(b)))
	le.PutUint32(b[4:], notifyPoll) // a notification's error field is its code
	le.PutUint64(b[16:], kh)
	if err := c.write([][]byte{b[:]}); err != nil {
		c.debugf("fuse: FUSE_NOTIFY_POLL: %v", err)
	}
}

// reply writes the answer to request unique: the out header and body in one
// write(2), or the header alone with -errno.
func (c *Conn) reply(unique uint64, errno unix.Errno, body ...[]byte) error {
	if errno != 0 {
		body = nil
	}
	n := outHeaderSize
	for _, b := range body {
		n += len(b)
	}
	hdr := make([]byte, outHeaderSize)
	le.PutUint32(hdr[0:], uint32(n))
	le.PutUint32(hdr[4:], uint32(-int32(errno)))
	le.PutUint64(hdr[8:], unique)
	iov := make([][]byte, 0, 1+len(body))
	iov = append(iov, hdr)
	for _, b := range body {
		if len(b) > 0 {
			iov = append(iov, b)
		}
	}
	err := c.write(iov)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		c.debugf("fuse: reply to %d: %v", unique, err)
	}
	return err
}

func (c *Conn) write(iov [][]byte) error {
	var err error
	if rerr := c.raw.Write(func(fd uintptr) bool {
		for {
			_, err = unix.Writev(int(fd), iov)
			if err != unix.EINTR {
				return true
			}
		}
	}); rerr != nil {
		return rerr
	}
	return err
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF)
}

var opNames = map[uint32]string{
	opLookup: "LOOKUP", opForget: "FORGET", opGetattr: "GETATTR", opSetattr: "SETATTR",
	opOpen: "OPEN", opRead: "READ", opWrite: "WRITE", opStatfs: "STATFS", opRelease: "RELEASE",
	opFlush: "FLUSH", opInit: "INIT", opOpendir: "OPENDIR", opReaddir: "READDIR",
	opReleasedir: "RELEASEDIR", opAccess: "ACCESS", opInterrupt: "INTERRUPT", opDestroy: "DESTROY",
	opIoctl: "IOCTL", opPoll: "POLL", opBatchForget: "BATCH_FORGET", opGetxattr: "GETXATTR",
	opListxattr: "LISTXATTR",
}

func opName(op uint32) string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("opcode %d", op)
}
