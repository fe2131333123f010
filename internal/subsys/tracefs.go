package subsys

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// The tracefs files this package implements, relative to the tracefs root.
const (
	FileStatus          = "user_events_status"
	FileData            = "user_events_data"
	FileDynamicEvents   = "dynamic_events"
	FileTrace           = "trace"
	FileTracePipe       = "trace_pipe"
	FileTracingOn       = "tracing_on"
	FileAvailableEvents = "available_events"
	FileSetEvent        = "set_event"
	FileBufferSizeKB    = "buffer_size_kb"
	FileBufferTotalKB   = "buffer_total_size_kb"
	// FileREADME is tracefs's mini-HOWTO. Programs test for it to tell a
	// mounted tracefs from an empty directory (the kernel's user_events
	// selftests mount tracefs when it is missing); its text here covers
	// the files this tree has.
	FileREADME = "README"
	// FileCounts is uetrace's own, not Linux's (see AppendCounts).
	FileCounts = "uetrace_event_counts"

	// What trace-cmd reads and sets besides (options.go).
	FileTraceClock       = "trace_clock"
	FileTraceOptions     = "trace_options"
	FileCurrentTracer    = "current_tracer"
	FileAvailableTracers = "available_tracers"
	FileBufferPercent    = "buffer_percent"
	FileTracingCPUMask   = "tracing_cpumask"
	FileSavedCmdlines    = "saved_cmdlines"
	FileSavedTGIDs       = "saved_tgids"
	FilePrintkFormats    = "printk_formats"

	// FilePerCPU is the directory of each CPU's buffer, cpuN/ with the
	// files FileTrace, FileTracePipe, FileTracePipeRaw, FileStats and
	// FileBufferSizeKB of that CPU alone.
	FilePerCPU = "per_cpu"
	// FileTracePipeRaw is a CPU's buffer read as the ring buffer's pages
	// (raw.go).
	FileTracePipeRaw = "trace_pipe_raw"
	// FileStats is a CPU's buffer's counts.
	FileStats = "stats"
)

// readme is FileREADME's text: the lines of Linux 6.12's mini-HOWTO
// (tracing_readme_read, as the test kernel prints it) about the files this
// tree has, in its order and words; the lines about tracers, options,
// triggers and other dynamic events are left out.
const readme = `tracing mini-HOWTO:

By default tracefs removes all OTH file permission bits.
When mounting tracefs an optional group id can be specified
which adds the group to every directory and file in tracefs:

	 e.g. mount -t tracefs [-o [gid=<gid>]] nodev /sys/kernel/tracing

# echo 0 > tracing_on : quick way to disable tracing
# echo 1 > tracing_on : quick way to re-enable tracing

 Important files:
  trace			- The static contents of the buffer
			  To clear the buffer write into this file: echo > trace
  trace_pipe		- A consuming read to see the contents of the buffer
  error_log	- error log for failed commands (that support it)
  buffer_size_kb	- view and modify size of per cpu buffer
  buffer_total_size_kb  - view total size of all cpu buffers
  dynamic_events		- Create/append/remove/show the generic dynamic events
			  Write into this file to define/undefine new trace events.
  events/		- Directory containing all trace event subsystems:
      enable		- Write 0/1 to enable/disable tracing of all events
  events/<system>/	- Directory containing all trace events for <system>:
      enable		- Write 0/1 to enable/disable tracing of all <system>
			  events
      filter		- If set, only events passing filter are traced
  events/<system>/<event>/	- Directory containing control files for
			  <event>:
      enable		- Write 0/1 to enable/disable tracing of <event>
      filter		- If set, only events passing filter are traced
`

// DirEntry is one entry of a tracefs directory.
type DirEntry struct {
	Name string
	Mode fs.FileMode // fs.ModeDir for directories
}

// FS is the subsystem's tracefs tree. Paths are relative to the tracefs
// root ("user_events_status", "events/user_events/x/format"), '/'-separated.
// Files behave as tracefs's do for root: a file without a read operation
// gives EINVAL on read, one without a write operation EINVAL on write.
type FS struct{ s *Subsystem }

// FS returns the tracefs tree.
func (s *Subsystem) FS() *FS { return &FS{s} }

// The directories' modes, as 6.12.117 shows them (stat in the VM): the
// tracefs root TRACE_MODE's 0700, eventfs's directories — events/ and
// everything under it — 0755, and per_cpu/ and its cpuN/ 0750.
const (
	rootDirMode   = 0o700
	eventDirMode  = 0o755
	perCPUDirMode = 0o750
)

// node is what a path names.
type node struct {
	dir    bool
	mode   fs.FileMode
	f      *file  // what the file does (files.go); nil for directories
	name   string // root file name, or the file name inside an event, system or CPU dir
	system string // for events/<system>[/<tp>]/...
	ev     *Event // for events/<system>/<tp>/...
	ftrace string // for events/ftrace/<ftrace>[/...]
	perCPU bool   // for per_cpu/cpu<cpu>[/...]
	cpu    int
}

// scope is what a write to n may change: the event whose file it is, the
// events of the system whose file it is, or any.
func (n node) scope() Scope {
	switch {
	case n.ev != nil:
		return eventScope(n.ev)
	case n.system != "":
		sys := n.system
		return Scope{func(e *Event) bool { return e.System() == sys }}
	}
	return AnyEvent
}

// lookup resolves a path as the VFS walks it: "//" and "." are nothing,
// ".." is the parent — so an event named "", "." or ".." (which
// DIAG_IOCSREG accepts) has no path, as on Linux. Called with s.mu held.
func (f *FS) lookup(name string) (node, error) {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" || name == "." {
		return node{dir: true, mode: fs.ModeDir | rootDirMode}, nil
	}
	parts := strings.Split(name, "/")
	switch parts[0] {
	case "events":
		return f.lookupEvents(name, parts[1:])
	case FilePerCPU:
		return f.lookupPerCPU(name, parts[1:])
	}
	if fl, ok := rootFiles[parts[0]]; ok && len(parts) == 1 {
		return node{mode: fl.mode, f: fl, name: parts[0]}, nil
	}
	return node{}, notExist(name)
}

// lookupEvents resolves events/<parts...>.
func (f *FS) lookupEvents(name string, parts []string) (node, error) {
	if len(parts) == 0 {
		return node{dir: true, mode: fs.ModeDir | eventDirMode, name: "events"}, nil
	}
	if parts[0] == "ftrace" {
		return lookupFtrace(name, parts[1:])
	}
	if fl, ok := eventsFiles[parts[0]]; ok && len(parts) == 1 {
		return node{mode: fl.mode, f: fl, name: parts[0]}, nil
	}
	sys := parts[0]
	if !f.systemExists(sys) {
		return node{}, notExist(name)
	}
	if len(parts) == 1 {
		return node{dir: true, mode: fs.ModeDir | eventDirMode, system: sys}, nil
	}
	if len(parts) == 2 {
		if fl, ok := systemFiles[parts[1]]; ok {
			return node{mode: fl.mode, f: fl, name: parts[1], system: sys}, nil
		}
		if ev := f.s.lookupLocked(sys, parts[1]); ev != nil && ev.tp != "." && ev.tp != ".." {
			return node{dir: true, mode: fs.ModeDir | eventDirMode, system: sys, ev: ev}, nil
		}
		return node{}, notExist(name)
	}
	ev := f.s.lookupLocked(sys, parts[1])
	if len(parts) != 3 || ev == nil {
		return node{}, notExist(name)
	}
	if fl, ok := eventFiles[parts[2]]; ok {
		return node{mode: fl.mode, f: fl, name: parts[2], system: sys, ev: ev}, nil
	}
	return node{}, notExist(name)
}

// lookupFtrace resolves events/ftrace/<parts...>.
func lookupFtrace(name string, parts []string) (node, error) {
	switch {
	case len(parts) == 0:
		return node{dir: true, mode: fs.ModeDir | eventDirMode, name: "ftrace"}, nil
	case !ftraceEvent(parts[0]):
	case len(parts) == 1:
		return node{dir: true, mode: fs.ModeDir | eventDirMode, ftrace: parts[0]}, nil
	case len(parts) == 2:
		if fl, ok := ftraceEventFiles(parts[0])[parts[1]]; ok {
			return node{mode: fl.mode, f: fl, name: parts[1], ftrace: parts[0]}, nil
		}
	}
	return node{}, notExist(name)
}

// lookupPerCPU resolves per_cpu/<parts...>: cpuN for each CPU of the
// buffer, N in decimal as the kernel names it.
func (f *FS) lookupPerCPU(name string, parts []string) (node, error) {
	if len(parts) == 0 {
		return node{dir: true, mode: fs.ModeDir | perCPUDirMode, name: FilePerCPU}, nil
	}
	n, ok := strings.CutPrefix(parts[0], "cpu")
	cpu, err := strconv.Atoi(n)
	if !ok || err != nil || cpu < 0 || cpu >= f.s.trace.ring.NumCPU() || strconv.Itoa(cpu) != n || len(parts) > 2 {
		return node{}, notExist(name)
	}
	if len(parts) == 1 {
		return node{dir: true, mode: fs.ModeDir | perCPUDirMode, perCPU: true, cpu: cpu}, nil
	}
	if fl, ok := perCPUFiles[parts[1]]; ok {
		return node{mode: fl.mode, f: fl, name: parts[1], perCPU: true, cpu: cpu}, nil
	}
	return node{}, notExist(name)
}

func notExist(name string) error {
	return &fs.PathError{Op: "open", Path: name, Err: unix.ENOENT}
}

// systemExists reports whether events/<sys> exists: a system directory
// lives while it has events. Called with s.mu held.
func (f *FS) systemExists(sys string) bool {
	for _, ev := range f.s.created {
		if ev.System() == sys {
			return true
		}
	}
	return false
}

// ReadDir lists a directory. A system's directory is listed as eventfs
// lists it (eventfs_iterate, Linux 6.12): filter, enable, then its events
// in the order they were created — up to the first event whose name no
// directory entry can have (empty or with a '/': filldir64's
// verify_dirent_name refuses it with EIO). That listing is returned with
// an EIO error, as getdents64 returns the entries before it and then
// fails; the events after it are not listed, though each can be opened by
// its path (the kernel's own listing is not complete here either: use
// available_events). Other directories are sorted by name.
func (f *FS) ReadDir(name string) ([]DirEntry, error) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	n, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: unix.ENOTDIR}
	}
	var out []DirEntry
	switch {
	case n.ev != nil:
		out = entries(eventFiles)
	case n.system != "":
		// eventfs lists a system's own files first, filter then enable.
		out = append(out, DirEntry{"filter", systemFiles["filter"].mode}, DirEntry{"enable", systemFiles["enable"].mode})
		for _, ev := range s.created {
			if ev.System() != n.system {
				continue
			}
			if !Listable(ev.tp) {
				return out, &fs.PathError{Op: "readdir", Path: name, Err: unix.EIO}
			}
			if ev.tp == "." || ev.tp == ".." {
				continue
			}
			out = append(out, DirEntry{ev.tp, fs.ModeDir | eventDirMode})
		}
		return out, nil
	case n.ftrace != "":
		out = entries(ftraceEventFiles(n.ftrace))
	case n.name == "ftrace":
		for _, ev := range ftraceEvents() {
			out = append(out, DirEntry{ev, fs.ModeDir | eventDirMode})
		}
	case n.perCPU:
		out = entries(perCPUFiles)
	case n.name == FilePerCPU:
		for cpu := range s.trace.ring.NumCPU() {
			out = append(out, DirEntry{"cpu" + strconv.Itoa(cpu), fs.ModeDir | perCPUDirMode})
		}
	case n.name == "events":
		out = append(entries(eventsFiles), DirEntry{"ftrace", fs.ModeDir | eventDirMode})
		for _, sys := range []string{eventdef.System, eventdef.MultiSystem} {
			if f.systemExists(sys) {
				out = append(out, DirEntry{sys, fs.ModeDir | eventDirMode})
			}
		}
	default:
		out = append(entries(rootFiles), DirEntry{"events", fs.ModeDir | eventDirMode}, DirEntry{FilePerCPU, fs.ModeDir | perCPUDirMode})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Listable reports whether a directory entry can be named tp: Linux's
// filldir64 refuses an empty name and one with a '/' (verify_dirent_name),
// which user_events accepts through DIAG_IOCSREG (" u32 a" is an event
// whose name is empty) — a directory listing stops there with EIO.
func Listable(tp string) bool {
	return tp != "" && !strings.Contains(tp, "/")
}

// Stat returns the mode of a path.
func (f *FS) Stat(name string) (DirEntry, error) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	n, err := f.lookup(name)
	if err != nil {
		return DirEntry{}, err
	}
	base := name[strings.LastIndexByte(name, '/')+1:]
	return DirEntry{base, n.mode}, nil
}

// Handle is an open tracefs file.
type Handle struct {
	f     *FS
	path  string
	n     node
	flags int
	cred  Cred

	mu      sync.Mutex
	content []byte // a seq file's text, made at the first read
	made    bool
	off     int
	closed  bool
	text    *ftrace.TextReader // trace's text, made as it is read; its iterator makes resizing EBUSY while trace is open
	pipe    *ftrace.Pipe       // trace_pipe's reader
	raw     *rawReader         // trace_pipe_raw's reader
}

// Open opens a tracefs file with os.O_RDONLY, O_WRONLY or O_RDWR, and
// optionally O_TRUNC and O_APPEND. O_TRUNC does what it does on tracefs:
// on trace it clears the buffer, on set_event it disables every event, on
// dynamic_events it deletes every event — failing the open with EBUSY if
// any is in use. Recording goes on while trace is open (the pause-on-trace
// option is off by default on Linux 6.12), but the buffer cannot be resized
// (EBUSY). trace_pipe has one reader at a time: a second open is EBUSY.
// O_NONBLOCK makes an empty trace_pipe read EAGAIN.
func (f *FS) Open(name string, flags int, cred Cred) (*Handle, error) {
	s := f.s
	s.mu.Lock()
	n, err := f.lookup(name)
	s.unlock()
	if err != nil {
		return nil, err
	}
	write := flags&(os.O_WRONLY|os.O_RDWR) != 0
	if n.dir && write {
		return nil, &fs.PathError{Op: "open", Path: name, Err: unix.EISDIR}
	}
	if n.name == FileData {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("user_events_data is opened with Subsystem.Open: %w", unix.EOPNOTSUPP)}
	}
	h := &Handle{f: f, path: name, n: n, flags: flags, cred: cred}
	if write && flags&os.O_TRUNC != 0 && n.f != nil && n.f.trunc != nil {
		// It changes state as a write does (it clears the buffer, or
		// disables every event): what processes published before it
		// is delivered first.
		s.syncProcesses(n.scope())
		if err := n.f.trunc(f, n, cred); err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	read := flags&(os.O_WRONLY|os.O_RDWR) != os.O_WRONLY
	cpu := -1
	if n.perCPU {
		cpu = n.cpu
	}
	switch {
	case n.name == FileTrace && read:
		h.text = s.trace.ring.NewTextReader(cpu)
	case n.name == FileTracePipe:
		pipe, err := s.trace.ring.OpenPipe(cpu, flags&unix.O_NONBLOCK != 0)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		h.pipe = pipe
	case n.name == FileTracePipeRaw:
		h.raw = newRawReader(s.trace, cpu)
	}
	return h, nil
}

// ReadFile reads a whole file.
func (f *FS) ReadFile(name string, cred Cred) ([]byte, error) {
	h, err := f.Open(name, os.O_RDONLY, cred)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return io.ReadAll(h)
}

// WriteFile writes data to a file in one write, opened with O_WRONLY plus
// extra flags (os.O_TRUNC for the shell's '>', os.O_APPEND for '>>').
func (f *FS) WriteFile(name string, data []byte, extra int, cred Cred) error {
	h, err := f.Open(name, os.O_WRONLY|extra, cred)
	if err != nil {
		return err
	}
	defer h.Close()
	_, err = h.Write(data)
	return err
}

// Close closes the handle; a blocked trace_pipe read returns.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.text != nil {
		h.text.Close()
	}
	if h.pipe != nil {
		h.pipe.Close()
	}
	if h.raw != nil {
		h.raw.close()
	}
	return nil
}

func (h *Handle) pathErr(op string, err error) error {
	return &fs.PathError{Op: op, Path: h.path, Err: err}
}

// Read reads from the file. trace_pipe and trace_pipe_raw block until a
// record arrives (use ReadContext to give up).
func (h *Handle) Read(p []byte) (int, error) { return h.ReadContext(context.Background(), p) }

// ReadContext is Read that gives up when ctx is done.
func (h *Handle) ReadContext(ctx context.Context, p []byte) (int, error) {
	return h.ReadStream(ctx, p, h.flags&unix.O_NONBLOCK != 0)
}

// ReadStream is ReadContext where nonblock is whether the file is
// O_NONBLOCK now, which trace_pipe_raw asks at each read, as the kernel
// reads f_flags (a caller may set it with fcntl after the open, as
// trace-cmd does before its last reads); trace_pipe keeps what it was
// opened with.
func (h *Handle) ReadStream(ctx context.Context, p []byte, nonblock bool) (int, error) {
	if h.flags&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		return 0, h.pathErr("read", unix.EBADF)
	}
	if h.n.dir {
		return 0, h.pathErr("read", unix.EISDIR)
	}
	if h.pipe != nil || h.raw != nil {
		var n int
		var err error
		if h.pipe != nil {
			n, err = h.pipe.Read(ctx, p)
		} else {
			n, err = h.raw.readRaw(ctx, p, nonblock)
		}
		if err != nil && err != io.EOF {
			err = h.pathErr("read", err)
		}
		return n, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, h.pathErr("read", os.ErrClosed)
	}
	if h.n.name == "filter" {
		// event_filter_read, subsystem_filter_read: one read at offset
		// 0 gets what fits; any read at another offset gets nothing.
		if h.off > 0 {
			return 0, io.EOF
		}
		c, err := h.f.content(h.n)
		if err != nil {
			return 0, h.pathErr("read", err)
		}
		n := copy(p, c)
		h.off += n
		return n, nil
	}
	if h.text != nil {
		n, err := h.text.ReadAt(p, int64(h.off))
		h.off += n
		if n > 0 && err == io.EOF {
			err = nil // the next read says it
		}
		return n, err
	}
	if !h.made {
		c, err := h.f.content(h.n)
		if err != nil {
			return 0, h.pathErr("read", err)
		}
		h.content, h.made = c, true
	}
	if h.off == 0 && h.n.f.whole && len(p) <= len(h.content) {
		return 0, h.pathErr("read", fmt.Errorf("a read of %d bytes cannot take the %d of the text: %w", len(p), len(h.content), unix.EINVAL))
	}
	if h.off >= len(h.content) {
		return 0, io.EOF
	}
	n := copy(p, h.content[h.off:])
	h.off += n
	return n, nil
}

// ReadAt reads at offset off, as pread(2) — or read(2) through a file
// system that passes the file position, like FUSE — does on a seq_file:
// reading at 0 makes the text anew, as a fresh open would, and other
// offsets read the text made then. trace_pipe and trace_pipe_raw have no
// offsets: they read on (Pipe says which files are like them).
func (h *Handle) ReadAt(p []byte, off int64) (int, error) {
	if h.pipe != nil || h.raw != nil {
		return h.Read(p)
	}
	if h.flags&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		return 0, h.pathErr("read", unix.EBADF)
	}
	if h.n.dir {
		return 0, h.pathErr("read", unix.EISDIR)
	}
	if off < 0 {
		return 0, h.pathErr("read", unix.EINVAL)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, h.pathErr("read", os.ErrClosed)
	}
	if h.n.name == "filter" {
		if off > 0 {
			return 0, io.EOF
		}
		c, err := h.f.content(h.n)
		if err != nil {
			return 0, h.pathErr("read", err)
		}
		n := copy(p, c)
		h.off = n
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	if h.text != nil {
		n, err := h.text.ReadAt(p, off)
		h.off = int(off) + n
		return n, err
	}
	if !h.made || off == 0 {
		c, err := h.f.content(h.n)
		if err != nil {
			return 0, h.pathErr("read", err)
		}
		h.content, h.made = c, true
	}
	if off == 0 && h.n.f.whole && len(p) <= len(h.content) {
		return 0, h.pathErr("read", fmt.Errorf("a read of %d bytes cannot take the %d of the text: %w", len(p), len(h.content), unix.EINVAL))
	}
	if off >= int64(len(h.content)) {
		return 0, io.EOF
	}
	n := copy(p, h.content[off:])
	h.off = int(off) + n
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// SplicePage returns the next page of trace_pipe_raw's CPU buffer as
// splice(2) takes one: a page the writer has left, never part of the one
// it is on; EAGAIN when there is none. Other files are ENOTTY.
func (h *Handle) SplicePage() ([]byte, error) {
	if h.raw == nil {
		return nil, h.pathErr("splice", unix.ENOTTY)
	}
	page, err := h.raw.splicePage()
	if err != nil {
		return nil, h.pathErr("splice", err)
	}
	return page, nil
}

// Pipe reports whether the file is trace_pipe or trace_pipe_raw, of all
// CPUs or one: read as a stream, each read consuming what it returns, and
// blocking while there is nothing.
func (h *Handle) Pipe() bool { return h.pipe != nil || h.raw != nil }

// WaitRead returns once a read would not block (trace_pipe's: see
// ftrace.Pipe.Wait; trace_pipe_raw's, unless nonblock: a record to read;
// every other file's at once), with ctx's error if ctx is done first, so
// that a server need not hold a buffer for a read that waits.
func (h *Handle) WaitRead(ctx context.Context, nonblock bool) error {
	var err error
	switch {
	case h.pipe != nil:
		err = h.pipe.Wait(ctx)
	case h.raw != nil:
		err = h.raw.wait(ctx, nonblock)
	}
	if err != nil {
		return h.pathErr("read", err)
	}
	return nil
}

// Poll reports whether a read would return without blocking: always, but on
// trace_pipe (tracing_poll_pipe) only when it has something to say, and on
// trace_pipe_raw once buffer_percent of its CPU's buffer is filled
// (tracing_buffers_poll). If it has not and wake is non-nil, wake is called
// once, from another goroutine, when that may have changed.
func (h *Handle) Poll(wake func()) bool {
	switch {
	case h.pipe != nil:
		return h.pipe.Poll(wake)
	case h.raw != nil:
		return h.raw.poll(wake)
	}
	return true
}

// content makes the text of a readable file.
func (f *FS) content(n node) ([]byte, error) {
	if n.f == nil || n.f.read == nil {
		return nil, unix.EINVAL
	}
	return n.f.read(f, n)
}

// enableState is what a system's (or, for "", the top) enable file reads:
// '0' none enabled, '1' all, 'X' a mix, '?' no events (system_enable_read).
func (f *FS) enableState(system string) byte {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	set := 0
	for _, ev := range s.created {
		if system != "" && ev.System() != system {
			continue
		}
		if ev.ftrace.Load() {
			set |= 2
		} else {
			set |= 1
		}
	}
	return "?01X"[set]
}

// listEvents is available_events (all events) or set_event (those whose
// ftrace probe is registered): "system:tracepoint" lines, newest first, as
// the trace array's event list is kept.
func (f *FS) listEvents(enabledOnly bool) []byte {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	var b []byte
	for i := len(s.created) - 1; i >= 0; i-- {
		ev := s.created[i]
		if enabledOnly && !ev.ftrace.Load() {
			continue
		}
		b = append(b, ev.System()...)
		b = append(b, ':')
		b = append(b, ev.tp...)
		b = append(b, '\n')
	}
	return b
}

// Write writes to the file. What a write means depends on the file:
// commands for dynamic_events and set_event, 0 or 1 for enable files and
// tracing_on, a size for buffer_size_kb; a write to trace is accepted and
// ignored. Read-only files give EINVAL.
func (h *Handle) Write(p []byte) (int, error) {
	if h.flags&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, h.pathErr("write", unix.EBADF)
	}
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return 0, h.pathErr("write", os.ErrClosed)
	}
	h.f.s.syncProcesses(h.n.scope()) // a write may change an event's state
	n, err := h.f.write(h.n, p, h.cred)
	if err != nil {
		return n, h.pathErr("write", err)
	}
	return n, nil
}

func (f *FS) write(n node, p []byte, cred Cred) (int, error) {
	if n.f == nil || n.f.write == nil {
		return 0, fmt.Errorf("%s is not writable: %w", n.name, unix.EINVAL)
	}
	return n.f.write(f, n, p, cred)
}

// setClr is __ftrace_set_clr_event over user events: enable or disable
// every event of system (all systems if ""), or those named name. Nothing
// matching is EINVAL.
func (f *FS) setClr(system, name string, on bool) error {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	return s.setClrLocked("", system, name, on)
}

// setClrLocked matches like __ftrace_set_clr_event_nolock: match (a bare
// word) is either a system or an event name; sub and event restrict by
// system and event name. All comparisons are exact.
func (s *Subsystem) setClrLocked(match, sub, event string, on bool) error {
	found := false
	for _, ev := range append([]*Event(nil), s.created...) {
		if match != "" && match != ev.tp && match != ev.System() {
			continue
		}
		if sub != "" && sub != ev.System() {
			continue
		}
		if event != "" && event != ev.tp {
			continue
		}
		s.setFtraceLocked(ev, on)
		found = true
	}
	if !found {
		return fmt.Errorf("no event matches %q: %w", strings.Trim(sub+":"+event+match, ":"), unix.EINVAL)
	}
	return nil
}

// clearEvents disables every event (ftrace_clear_events): O_TRUNC on
// set_event.
func (s *Subsystem) clearEvents() {
	s.mu.Lock()
	defer s.unlock()
	for _, ev := range append([]*Event(nil), s.created...) {
		s.setFtraceLocked(ev, false)
	}
}

// writeSetEvent runs set_event words (ftrace_event_write →
// ftrace_set_clr_event): white-space separated; "!" in front disables;
// "system:event", "system:" or "system:*" (the whole system), ":event" or
// "*:event" (that event in any system), or a bare word naming a system or
// an event. Names are exact — no globs. A word that matches nothing is
// EINVAL, and the words before it stay applied.
func (f *FS) writeSetEvent(p []byte) (int, error) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	for _, word := range eventdef.ArgvSplit(string(p)) {
		on := true
		if strings.HasPrefix(word, "!") {
			word, on = word[1:], false
		}
		match, sub, event := word, "", ""
		if a, b, ok := strings.Cut(word, ":"); ok {
			match, sub, event = "", a, b
			if sub == "*" {
				sub = ""
			}
			if event == "*" {
				event = ""
			}
		}
		if err := s.setClrLocked(match, sub, event, on); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// kstrtoulFromUser is kstrtoul_from_user with base 10: at most 66 bytes
// are read, the text ends at a NUL, and it must be digits with an optional
// '+' and one trailing newline.
func kstrtoulFromUser(p []byte) (uint64, error) {
	p = p[:min(len(p), 66)]
	if i := slices.Index(p, 0); i >= 0 {
		p = p[:i]
	}
	t := string(p)
	t = strings.TrimPrefix(t, "+")
	t = strings.TrimSuffix(t, "\n")
	if t == "" || strings.ContainsAny(t[:1], "+-") {
		return 0, fmt.Errorf("%q is not a number: %w", p, unix.EINVAL)
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%q is out of range: %w", p, unix.ERANGE)
		}
		return 0, fmt.Errorf("%q is not a number: %w", p, unix.EINVAL)
	}
	return v, nil
}
