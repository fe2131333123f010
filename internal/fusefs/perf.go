package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/fusefs/fuse"
	"github.com/uetrace/uetrace/internal/perfevent"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/perfdata"
)

// # Perf events of the tree's tracepoints
//
// uetrace run answers a program's perf_event_open(2) of one of the tree's
// event ids (package runguard): it writes the call to the hidden control
// file perfevent.Dir/ControlFile (OpOpen), which makes a perfNode — a
// perfevent.Event and a subsys session attached to the tracepoint, which
// sets its enable bits as the kernel's TRACE_REG_PERF_REGISTER does at the
// open — then opens perfevent.Dir/<id> and installs that file in the
// caller as the call's result (SECCOMP_IOCTL_NOTIF_ADDFD). The file is
// opened with FUSE passthrough to the event's memfd: the caller's mmap
// maps the ring in place, which uetrace writes as the kernel writes its
// own; its read, ioctls and poll reach perfHandle. uetrace run tells the
// size of each mapping before it is made (OpMmap: it sees the caller's
// mmap) and a task's exec (OpExec), which enables enable_on_exec events.
//
// The records reach the node in the writer's goroutine (a session's
// DeliverTo), filtered as the kernel's perf_tp_event filters them for an
// event: by CPU for a per-CPU event, by task — the thread itself, or with
// inherit its process and the processes descended from it — for a
// per-task one.
//
// Linux ends an event at its file's last close, and user_events clears the
// enable bits then; FUSE tells the server of a file's last close only
// afterwards (RELEASE is sent in the background), too late for a program
// that checks its enable word right after close(2), as the kernel's
// perf_test does. So at each close (FLUSH) the node looks for another
// descriptor or mapping of its file in the process that opened it and that
// process's descendants (/proc/<pid>/fd and maps) and, finding none, ends
// there. A descriptor sent elsewhere (SCM_RIGHTS, pidfd_getfd) is not
// looked for: the event ends at the opener's last close, where Linux keeps
// it until that descriptor's close too.

// perfEvents are the tree's perf events, by id.
type perfEvents struct {
	mu        sync.Mutex
	byID      map[uint64]*perfNode
	ringBytes int // the rings' memory, mapped or to be
}

// maxPerfRingBytes bounds the memory of one tree's perf rings, which this
// process holds: a mapping beyond it is EPERM, as perf_mmap answers one
// beyond perf_event_mlock_kb.
const maxPerfRingBytes = 1 << 30

// maxPerfEvents bounds the perf events of one tree: each holds a memfd, a
// session and, for a task's, a pidfd and a goroutine. More is EMFILE, as
// perf_event_open answers when the caller's table is full.
const maxPerfEvents = 4096

// perfNode is one event and what feeds it.
type perfNode struct {
	f  *FS
	ev *perfevent.Event
	tp *subsys.Event
	ss *subsys.Session

	target     int  // the thread it counts, in this process's pid namespace; -1: every task
	targetTGID int  // that thread's process
	inherit    bool // and the processes descended from it
	opener     int  // the process that called perf_event_open

	mu        sync.Mutex
	ringBytes int        // its ring's share of perfEvents.ringBytes
	ctl       *ctlHandle // the control file that made it, until its file is opened
	opened    bool
	ended     bool
	onExec    bool // enable at the target's next exec
	wakes     []func()
	descended map[int]bool // processes found descended from targetTGID, or not
	stopWatch func()
}

// perfStat is Stat of the hidden perf files; ok is false for other paths.
func (f *FS) perfStat(path string) (fuse.Attr, bool, error) {
	if path == perfevent.Dir {
		return f.attr(os.ModeDir | 0o700), true, nil
	}
	name, ok := strings.CutPrefix(path, perfevent.Dir+"/")
	if !ok {
		return fuse.Attr{}, false, nil
	}
	if name == perfevent.ControlFile {
		return f.attr(0o600), true, nil
	}
	if id, err := strconv.ParseUint(name, 10, 64); err == nil && f.perfNode(id) != nil {
		return f.attr(0o600), true, nil
	}
	return fuse.Attr{}, true, unix.ENOENT
}

func (f *FS) perfNode(id uint64) *perfNode {
	f.perf.mu.Lock()
	defer f.perf.mu.Unlock()
	return f.perf.byID[id]
}

// perfOpen opens a hidden perf file; ok is false for other paths.
func (f *FS) perfOpen(r *fuse.Request, path string) (fuse.Handle, bool, error) {
	name, ok := strings.CutPrefix(path, perfevent.Dir+"/")
	if !ok {
		if path == perfevent.Dir {
			return nil, true, unix.EISDIR
		}
		return nil, false, nil
	}
	if name == perfevent.ControlFile {
		return &ctlHandle{f: f}, true, nil
	}
	id, err := strconv.ParseUint(name, 10, 64)
	n := f.perfNode(id)
	if err != nil || n == nil {
		return nil, true, unix.ENOENT
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opened || n.ended {
		// An event's file is opened once, by uetrace run, and handed
		// over; reopening it (through /proc/<pid>/fd) is ENXIO, as for
		// the kernel's anonymous perf files.
		return nil, true, unix.ENXIO
	}
	n.opened = true
	n.ctl = nil
	return &perfHandle{n: n}, true, nil
}

// ctlHandle is an open control file: one request per write, its reply on
// the next read.
type ctlHandle struct {
	f     *FS
	mu    sync.Mutex
	reply []byte
	made  []*perfNode // events made here and not opened yet
}

func (h *ctlHandle) Read(ctx context.Context, r *fuse.Request, dst []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off != 0 || h.reply == nil {
		return 0, nil
	}
	n := copy(dst, h.reply)
	h.reply = nil
	return n, nil
}

func (h *ctlHandle) Write(ctx context.Context, r *fuse.Request, data []byte, off int64) (int, error) {
	req, err := perfevent.DecodeRequest(data)
	if err != nil {
		return 0, err
	}
	var v uint64
	switch req.Op {
	case perfevent.OpOpen:
		var n *perfNode
		if n, err = h.f.newPerfNode(&req); err == nil {
			v = n.ev.ID
			h.mu.Lock()
			n.ctl = h
			h.made = append(h.made, n)
			h.mu.Unlock()
		}
	case perfevent.OpMmap:
		err = h.f.perfMmap(&req)
	case perfevent.OpExec:
		h.f.perfExec(&req)
	}
	rep := perfevent.ReplyOf(v, err)
	h.mu.Lock()
	h.reply = rep.Encode()
	h.mu.Unlock()
	return len(data), nil
}

// Release ends the events made here whose files were never opened (uetrace
// run gave up between the two).
func (h *ctlHandle) Release() error {
	h.mu.Lock()
	made := h.made
	h.made = nil
	h.mu.Unlock()
	for _, n := range made {
		n.mu.Lock()
		orphan := !n.opened
		n.mu.Unlock()
		if orphan {
			n.end()
		}
	}
	return nil
}

// newPerfNode makes the event an OpOpen asks for.
func (f *FS) newPerfNode(req *perfevent.Request) (*perfNode, error) {
	ncpu := max(runtime.NumCPU(), f.s.NumCPU())
	attr, err := perfevent.Check(req.Attr, int(req.PID), int(req.CPU), int(req.Flags), ncpu)
	if err != nil {
		return nil, err
	}
	tp := f.s.EventByID(int(attr.Config))
	if tp == nil {
		// perf_trace_init: no tracepoint has the id.
		return nil, fmt.Errorf("perf_event_open: no event of the tree has id %d: %w", attr.Config, unix.EINVAL)
	}
	caller, err := f.pids.TID(int(req.Caller))
	if err != nil {
		return nil, fmt.Errorf("perf_event_open: the caller, thread %d of the tree's pid namespace: %w", req.Caller, unix.ESRCH)
	}
	n := &perfNode{f: f, tp: tp, target: -1, targetTGID: -1, opener: f.tgid(caller), inherit: attr.Flags&perfdata.AttrInherit != 0}
	switch {
	case req.PID == 0:
		n.target = caller
	case req.PID > 0:
		if n.target, err = f.pids.TID(int(req.PID)); err != nil {
			return nil, fmt.Errorf("perf_event_open: no task %d: %w", req.PID, unix.ESRCH)
		}
	}
	if n.target > 0 {
		n.targetTGID = f.tgid(n.target)
		if attr.Flags&perfdata.AttrEnableOnExec != 0 && attr.Flags&perfdata.AttrDisabled != 0 {
			n.onExec = true
		}
	}
	if n.ev, err = perfevent.New(attr, int(req.CPU), f.s.Now, n.wake); err != nil {
		return nil, err
	}
	// The program reads the ring it maps without asking: its records must
	// be there when their writes return (no interposer ring defers them).
	n.ss = f.s.NewSession(subsys.SessionOptions{Synchronous: true})
	if err := n.ss.DeliverTo(n.deliver); err != nil {
		n.ev.Close()
		return nil, err
	}
	// TRACE_REG_PERF_REGISTER: the enable bits are set now, before the
	// call returns, enabled or not.
	if err := n.ss.Attach(tp); err != nil {
		n.ss.Close()
		n.ev.Close()
		return nil, err
	}
	if n.target > 0 {
		n.stopWatch = watchExit(n.target, n.targetTGID, n.ev.HangUp)
	}
	f.perf.mu.Lock()
	if f.perf.byID == nil {
		f.perf.byID = make(map[uint64]*perfNode)
	}
	full := len(f.perf.byID) >= maxPerfEvents
	if !full {
		f.perf.byID[n.ev.ID] = n
	}
	f.perf.mu.Unlock()
	if full {
		n.end()
		return nil, fmt.Errorf("perf_event_open: the tree has %d perf events open, its most: %w", maxPerfEvents, unix.EMFILE)
	}
	return n, nil
}

// deliver takes a record of the tracepoint (perf_tp_event): an event on
// another CPU, or of another task, does not see it.
func (n *perfNode) deliver(_ *subsys.Event, w subsys.Writer, ts uint64, rec []byte) {
	if n.ev.CPU >= 0 && w.CPU != n.ev.CPU {
		return
	}
	if n.target > 0 && int(w.PID) != n.target && (!n.inherit || !n.descends(int(w.TGID))) {
		return
	}
	r := perfevent.Record{PID: uint32(w.TGID), TID: uint32(w.PID), CPU: uint32(w.CPU), Time: ts, Comm: w.Comm, Raw: rec}
	n.ev.Add(&r)
}

// maxDescended bounds the processes a node remembers the ancestry of.
const maxDescended = 4096

// descends reports whether process tgid is the target's process or
// descends from it (inherit: the kernel gives children a copy of the event
// at fork). The answer for a process is found once, from its ancestry in
// /proc at its first record, and kept.
func (n *perfNode) descends(tgid int) bool {
	if tgid == n.targetTGID {
		return true
	}
	n.mu.Lock()
	v, ok := n.descended[tgid]
	n.mu.Unlock()
	if ok {
		return v
	}
	v = false
	for p, depth := tgid, 0; p > 1 && depth < 64; depth++ {
		st, err := procfs.ReadStatus(p)
		if err != nil || !st.Has(procfs.StatusPPid) {
			break
		}
		if st.PPid == n.targetTGID {
			v = true
			break
		}
		p = st.PPid
	}
	n.mu.Lock()
	if n.descended == nil || len(n.descended) >= maxDescended {
		n.descended = make(map[int]bool)
	}
	n.descended[tgid] = v
	n.mu.Unlock()
	return v
}

// wake tells the event's pollers that poll may answer otherwise.
func (n *perfNode) wake() {
	n.mu.Lock()
	w := n.wakes
	n.wakes = nil
	n.mu.Unlock()
	for _, f := range w {
		f()
	}
}

// end detaches the event — its enable bits are cleared as the kernel's
// TRACE_REG_PERF_UNREGISTER clears them — and frees it. Idempotent.
func (n *perfNode) end() {
	n.mu.Lock()
	if n.ended {
		n.mu.Unlock()
		return
	}
	n.ended = true
	stop := n.stopWatch
	n.mu.Unlock()
	if stop != nil {
		stop()
	}
	n.ss.Close()
	n.ev.Close()
	n.f.perf.mu.Lock()
	delete(n.f.perf.byID, n.ev.ID)
	n.f.perf.ringBytes -= n.ringBytes
	n.f.perf.mu.Unlock()
	n.wake()
}

// perfMmap is OpMmap: the caller is about to map an event's file.
func (f *FS) perfMmap(req *perfevent.Request) error {
	n := f.perfNode(req.Event)
	if n == nil {
		return fmt.Errorf("mmap: no perf event %d: %w", req.Event, unix.EBADF)
	}
	if req.Length > 1<<40 {
		return fmt.Errorf("mmap of %d bytes: %w", req.Length, unix.EINVAL)
	}
	// The ring's memory is taken from the tree's budget before the ring
	// is made, and given back if it is not.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ended {
		return fmt.Errorf("mmap: the event has ended: %w", unix.EBADF)
	}
	take := 0
	if n.ringBytes == 0 {
		take = int(req.Length)
		f.perf.mu.Lock()
		over := f.perf.ringBytes+take > maxPerfRingBytes
		if !over {
			f.perf.ringBytes += take
		}
		f.perf.mu.Unlock()
		if over {
			return fmt.Errorf("mmap of %d bytes: the tree's perf rings would hold more than %d: %w", take, maxPerfRingBytes, unix.EPERM)
		}
	}
	err := n.ev.Mmap(int(req.Length), req.Offset, req.Prot&unix.PROT_WRITE != 0)
	if take > 0 {
		if err != nil {
			f.perf.mu.Lock()
			f.perf.ringBytes -= take
			f.perf.mu.Unlock()
		} else {
			n.ringBytes = take
		}
	}
	return err
}

// perfExec is OpExec: the events of the exec'ing task's process that wait
// for it (enable_on_exec) are enabled.
func (f *FS) perfExec(req *perfevent.Request) {
	tid, err := f.pids.TID(int(req.Caller))
	if err != nil {
		return
	}
	tgid := f.tgid(tid)
	f.perf.mu.Lock()
	var nodes []*perfNode
	for _, n := range f.perf.byID {
		nodes = append(nodes, n)
	}
	f.perf.mu.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		go1 := n.onExec && (n.target == tid || n.targetTGID == tgid)
		if go1 {
			n.onExec = false
		}
		n.mu.Unlock()
		if go1 {
			n.ev.Enable()
		}
	}
}

// watchExit calls gone once thread tid (of process tgid) has exited, until
// stop is called.
func watchExit(tid, tgid int, gone func()) (stop func()) {
	flags := 0
	if tid != tgid {
		flags = unix.PIDFD_THREAD
	}
	pfd, err := unix.PidfdOpen(tid, flags)
	if err != nil {
		return func() {}
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(pfd)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(pfd)
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == unix.EINTR {
				continue
			}
			if fds[0].Revents != 0 {
				gone()
			}
			return
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			unix.Write(wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
			<-done
			unix.Close(wake)
		})
	}
}

// perfHandle is the open file of an event: perf's fd.
type perfHandle struct{ n *perfNode }

var (
	_ fuse.Backed  = (*perfHandle)(nil)
	_ fuse.Ioctler = (*perfHandle)(nil)
	_ fuse.Poller  = (*perfHandle)(nil)
)

func (h *perfHandle) Backing() int { return h.n.ev.Memfd() }

// Read is perf_read: the count in read_format.
func (h *perfHandle) Read(ctx context.Context, r *fuse.Request, dst []byte, off int64) (int, error) {
	return h.n.ev.Read(dst)
}

// Write is EINVAL: a perf file has no write.
func (h *perfHandle) Write(ctx context.Context, r *fuse.Request, data []byte, off int64) (int, error) {
	return 0, unix.EINVAL
}

// Flush is a close(2) of one of the file's descriptors: the event ends
// when its opener and the processes descended from it have no descriptor
// or mapping of the file left (see "Perf events" above).
func (h *perfHandle) Flush(ctx context.Context, r *fuse.Request) error {
	n := h.n
	closer := -1
	if tid, err := n.f.tid(r); err == nil {
		closer = n.f.tgid(tid)
	}
	if !holdsFile(n.opener, closer, perfevent.Path(n.ev.ID)) {
		n.end()
	}
	return nil
}

// Release is the file's last close.
func (h *perfHandle) Release() error {
	h.n.end()
	return nil
}

func (h *perfHandle) Poll(ctx context.Context, r *fuse.Request, events uint32, wake func()) (uint32, error) {
	n := h.n
	if wake != nil {
		n.mu.Lock()
		if len(n.wakes) < 64 {
			n.wakes = append(n.wakes, wake)
		} else {
			n.wakes[len(n.wakes)-1] = wake
		}
		n.mu.Unlock()
	}
	return n.ev.Poll(), nil
}

// The perf ioctls (include/uapi/linux/perf_event.h).
const (
	iocEnable      = 0x2400
	iocDisable     = 0x2401
	iocRefresh     = 0x2402
	iocReset       = 0x2403
	iocPeriod      = 0x40082404
	iocSetOutput   = 0x2405
	iocSetFilter   = 0x40082406
	iocID          = 0x80082407
	iocSetBPF      = 0x40042408
	iocPauseOutput = 0x40042409
	iocQueryBPF    = 0xc008240a
	iocModifyAttrs = 0x4008240b
)

// maxFilter bounds a SET_FILTER string read from the caller (the kernel's
// strndup_user(arg, PAGE_SIZE)).
const maxFilter = 4096

// Ioctl is perf_ioctl. FUSE hands a restricted ioctl's argument as the
// kernel's _IOC direction and size say: PERIOD's u64 and the first 8 bytes
// of SET_FILTER's string come copied; the rest of the string is read from
// the caller. SET_BPF and PAUSE_OUTPUT take their argument as a value, not
// a pointer, but say _IOW: FUSE copies from that value as an address
// first, and fails them with EFAULT before they reach here.
func (h *perfHandle) Ioctl(ctx context.Context, r *fuse.Request, cmd uint32, arg uint64, in []byte, outSize uint32) (int32, []byte, error) {
	n := h.n
	switch cmd {
	case iocEnable:
		n.ev.Enable()
	case iocDisable:
		n.ev.Disable()
	case iocReset:
		n.ev.Reset()
	case iocRefresh:
		// _perf_event_refresh: EINVAL for inherited or counting events;
		// uetrace keeps no overflow limit for the others.
		if n.inherit || n.ev.Attr.SamplePeriod == 0 {
			return 0, nil, unix.EINVAL
		}
		return 0, nil, unix.EOPNOTSUPP
	case iocPeriod:
		if len(in) != 8 {
			return 0, nil, unix.EFAULT
		}
		return 0, nil, errnoOf(n.ev.SetPeriod(binary.NativeEndian.Uint64(in)))
	case iocID:
		return 0, binary.NativeEndian.AppendUint64(nil, n.ev.ID), nil
	case iocSetOutput:
		return 0, nil, errnoOf(n.setOutput(r, arg))
	case iocSetFilter:
		return 0, nil, errnoOf(n.setFilter(r, arg, in))
	case iocPauseOutput:
		return 0, nil, errnoOf(n.ev.PauseOutput(arg != 0))
	case iocQueryBPF:
		// perf_event_query_prog_array of a tracepoint with no program:
		// prog_cnt 0, ids_len as given.
		if len(in) != 8 || outSize != 8 {
			return 0, nil, unix.EFAULT
		}
		out := bytes.Clone(in)
		binary.NativeEndian.PutUint32(out[4:], 0)
		return 0, out, nil
	case iocSetBPF:
		return 0, nil, unix.EOPNOTSUPP
	case iocModifyAttrs:
		// perf_event_modify_attr: only breakpoints' can change.
		return 0, nil, unix.EOPNOTSUPP
	default:
		return 0, nil, unix.ENOTTY
	}
	return 0, nil, nil
}

// setOutput is SET_OUTPUT: arg is the caller's descriptor of the event
// whose ring takes this one's records, or -1. Another of the tree's
// events is found by its file's path; a kernel perf event is EINVAL
// (uetrace cannot write into the kernel's ring); anything else EBADF, as
// perf_fget_light says of a file that is not a perf event.
func (n *perfNode) setOutput(r *fuse.Request, arg uint64) error {
	if int64(arg) == -1 || arg == 0xffffffff {
		return n.ev.SetOutput(nil)
	}
	if arg > 1<<31 {
		return unix.EBADF
	}
	tid, err := n.f.tid(r)
	if err != nil {
		return err
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.FormatUint(arg, 10))
	if err != nil {
		return unix.EBADF
	}
	id, ok := perfevent.IDOfPath(link)
	if !ok {
		if link == "anon_inode:[perf_event]" {
			return fmt.Errorf("SET_OUTPUT to a kernel perf event: uetrace cannot write into the kernel's ring: %w", unix.EINVAL)
		}
		return unix.EBADF
	}
	o := n.f.perfNode(id)
	if o == nil {
		return unix.EBADF
	}
	return n.ev.SetOutput(o.ev)
}

// setFilter is SET_FILTER (ftrace_profile_set_filter): the string at arg
// in the caller's memory, up to a page, compiled as a perf filter.
func (n *perfNode) setFilter(r *fuse.Request, arg uint64, in []byte) error {
	if len(in) == 0 {
		return unix.EFAULT
	}
	tid, err := n.f.tid(r)
	if err != nil {
		return err
	}
	c, err := n.f.callers.Get(tid)
	if err != nil {
		return err
	}
	buf := make([]byte, maxFilter)
	got := 0
	for got < len(buf) {
		// Up to the end of each page, so that a string ending just
		// before an unmapped one reads.
		end := min(len(buf), got+int(4096-(arg+uint64(got))%4096))
		k, err := c.Mem.ReadAt(buf[got:end], arg+uint64(got))
		if i := bytes.IndexByte(buf[got:got+k], 0); i >= 0 {
			return n.ss.SetFilter(n.tp, string(buf[:got+i]))
		}
		got += k
		if err != nil || k == 0 {
			return unix.EFAULT
		}
	}
	return unix.EINVAL // longer than a page: strndup_user's EINVAL
}

// holdsFile reports whether process opener, or a process descended from
// it, or closer, still has a descriptor or a mapping of the tree's file
// name (its path ends so in any mount namespace).
func holdsFile(opener, closer int, name string) bool {
	seen := map[int]bool{}
	var walk func(pid, depth int) bool
	walk = func(pid, depth int) bool {
		if pid <= 0 || seen[pid] || depth > 32 || len(seen) > 4096 {
			return false
		}
		seen[pid] = true
		dir := "/proc/" + strconv.Itoa(pid)
		if fds, err := os.ReadDir(dir + "/fd"); err == nil {
			for _, fd := range fds {
				if l, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && strings.HasSuffix(l, "/"+name) {
					return true
				}
			}
		}
		if maps, err := procfs.ReadFile(dir + "/maps"); err == nil && bytes.Contains(maps, []byte("/"+name+"\n")) {
			return true
		}
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			b, err := procfs.ReadFile(dir + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				if child, err := strconv.Atoi(c); err == nil && walk(child, depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(opener, 0) || walk(closer, 0)
}
