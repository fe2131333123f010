package subsys

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys/ftrace"
	"github.com/uetrace/uetrace/perfdata"
)

// The tree's files, as tables of what each does — Linux's file_operations
// for tracefs (kernel/trace/trace.c, trace_events.c, trace_events_user.c):
// its mode (TRACE_MODE_READ 0440, TRACE_MODE_WRITE 0640), what a read
// shows, what a write does, what opening it with O_TRUNC does, and whether
// reading it reads others' records. The daemon's access rules and the FUSE
// tree take the same tables (Private, the modes through FS.Stat and
// FS.ReadDir), so that one file is described once.

// A file is one tracefs file's operations. A nil read or write is a file
// without that operation: EINVAL, as the VFS gives for a missing one.
type file struct {
	mode fs.FileMode
	// read makes the file's text (a seq_file's, made at the first read and
	// again at a read at offset 0). trace and trace_pipe are read by their
	// own readers (Handle), read here is trace's whole text.
	read func(f *FS, n node) ([]byte, error)
	// write does what a write of p does.
	write func(f *FS, n node, p []byte, cred Cred) (int, error)
	// trunc is what opening the file for writing with O_TRUNC does.
	trunc func(f *FS, n node, cred Cred) error
	// private: reading it reads others' records, which tracefs keeps for
	// root (trace, trace_pipe, trace_pipe_raw).
	private bool
	// whole: a read(2) must take the whole text, or it is EINVAL — a
	// file read with simple_read_from_buffer from a string made for that
	// read (tracing_cpumask_read), not a seq_file.
	whole bool
	// sizes: a write sets the buffer's size (buffer_size_kb), which the
	// daemon limits for tracers without CAP_PERFMON.
	sizes bool
}

// rootFiles are the files of the tracefs root.
var rootFiles = map[string]*file{
	FileREADME:          {mode: 0o440, read: func(*FS, node) ([]byte, error) { return []byte(readme), nil }},
	FileAvailableEvents: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.listEvents(false), nil }},
	FileSetEvent: {mode: 0o640,
		read: func(f *FS, _ node) ([]byte, error) { return f.listEvents(true), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) {
			if err := f.s.trace.ring.Expand(); err != nil {
				return 0, err
			}
			return f.writeSetEvent(p)
		},
		trunc: func(f *FS, _ node, _ Cred) error { f.s.clearEvents(); return nil }},
	FileBufferSizeKB: {mode: 0o640, sizes: true,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendBufferSizeKB(nil, -1), nil },
		write: writeBufferSize},
	FileBufferTotalKB: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendBufferTotalSizeKB(nil), nil }},
	FileDynamicEvents: {mode: 0o640,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.AppendDynamicEvents(nil), nil },
		write: func(f *FS, _ node, p []byte, cred Cred) (int, error) { return f.s.WriteDynamicEvents(p, cred) },
		trunc: func(f *FS, _ node, cred Cred) error { return f.s.TruncateDynamicEvents(cred) }},
	FileTrace: {mode: 0o640, private: true,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.trace.appendTrace(nil), nil },
		write: func(_ *FS, _ node, p []byte, _ Cred) (int, error) { return len(p), nil }, // tracing_write_stub
		trunc: func(f *FS, _ node, _ Cred) error { f.s.trace.reset(); return nil }},
	FileTracePipe: {mode: 0o440, private: true}, // read by its ftrace.Pipe
	FileTracingOn: {mode: 0o640,
		read: func(f *FS, _ node) ([]byte, error) { return boolText(f.s.trace.tracingOn()), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) {
			v, err := kstrtoulFromUser(p)
			if err != nil {
				return 0, err
			}
			f.s.trace.setTracingOn(v != 0)
			return len(p), nil
		}},
	FileData:   {mode: 0o640}, // opened with Subsystem.Open
	FileStatus: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.AppendStatus(nil), nil }},
	FileCounts: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.AppendCounts(nil), nil }},
	FileErrorLog: {mode: 0o640,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.AppendErrorLog(nil), nil },
		write: func(_ *FS, _ node, p []byte, _ Cred) (int, error) { return len(p), nil }, // tracing_err_log_write
		trunc: func(f *FS, _ node, _ Cred) error { f.s.ClearErrorLog(); return nil }},

	// What trace-cmd reads and sets besides (options.go).
	FileTraceClock: {mode: 0o640,
		read:  func(f *FS, _ node) ([]byte, error) { return appendClocks(nil, int(f.s.trace.clock.Load())), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) { return f.s.trace.writeClock(p) }},
	FileTraceOptions: {mode: 0o640,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.trace.appendOptions(nil), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) { return f.s.trace.writeOption(p) }},
	FileCurrentTracer: {mode: 0o640,
		read:  func(*FS, node) ([]byte, error) { return []byte("nop\n"), nil },
		write: func(_ *FS, _ node, p []byte, _ Cred) (int, error) { return writeTracer(p) }},
	FileAvailableTracers: {mode: 0o440, read: func(*FS, node) ([]byte, error) { return []byte("nop\n"), nil }},
	FileBufferPercent: {mode: 0o640,
		read: func(f *FS, _ node) ([]byte, error) {
			return append(strconv.AppendInt(nil, int64(f.s.trace.percent.v.Load()), 10), '\n'), nil
		},
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) { return f.s.trace.percent.write(p) }},
	FileTracingCPUMask: {mode: 0o640, whole: true,
		read: func(f *FS, _ node) ([]byte, error) { return ftrace.AppendCPUMask(nil, f.s.trace.ring.CPUMask()), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) {
			mask, err := ftrace.ParseCPUMask(p, f.s.trace.ring.NumCPU())
			if err != nil {
				return 0, err
			}
			f.s.trace.ring.SetCPUMask(mask)
			return len(p), nil
		}},
	FileSavedCmdlines: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendSavedCmdlines(nil), nil }},
	FileSavedTGIDs:    {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendSavedTGIDs(nil), nil }},
	// The kernel's trace_printk formats: this tree has none.
	FilePrintkFormats: {mode: 0o440, read: func(*FS, node) ([]byte, error) { return nil, nil }},
}

// writeBufferSize is a write to buffer_size_kb, or to a CPU's in per_cpu
// (tracing_entries_write): a size in KiB, not 0.
func writeBufferSize(f *FS, n node, p []byte, _ Cred) (int, error) {
	v, err := kstrtoulFromUser(p)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		return 0, fmt.Errorf("buffer_size_kb must not be 0: %w", unix.EINVAL)
	}
	cpu := -1
	if n.perCPU {
		cpu = n.cpu
	}
	if err := f.s.trace.resize(cpu, int(min(v, 1<<40))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// eventsFiles are the files of events/ itself: the enable of every
// system (a system's enable, node.system ""), and the ring buffer's page
// and event headers (ring_buffer_print_page_header,
// ring_buffer_print_entry_header), which readers of trace_pipe_raw parse.
var eventsFiles = map[string]*file{
	"enable":       systemFiles["enable"],
	"header_page":  {mode: 0o440, read: func(*FS, node) ([]byte, error) { return []byte(perfdata.HeaderPage), nil }},
	"header_event": {mode: 0o440, read: func(*FS, node) ([]byte, error) { return []byte(perfdata.HeaderEvent), nil }},
}

// perCPUFiles are the files of per_cpu/cpuN/ (node.cpu N): the CPU's
// buffer alone.
var perCPUFiles = map[string]*file{
	FileTrace: {mode: 0o640, private: true,
		write: func(_ *FS, _ node, p []byte, _ Cred) (int, error) { return len(p), nil }, // tracing_write_stub
		trunc: func(f *FS, n node, _ Cred) error { f.s.trace.ring.ResetCPU(n.cpu); return nil }},
	FileTracePipe:    {mode: 0o440, private: true}, // read by its ftrace.Pipe
	FileTracePipeRaw: {mode: 0o440, private: true}, // read by its rawReader (raw.go)
	FileStats: {mode: 0o440, read: func(f *FS, n node) ([]byte, error) {
		return ftrace.AppendStats(nil, f.s.trace.ring.Stats(n.cpu)), nil
	}},
	FileBufferSizeKB: {mode: 0o640, sizes: true,
		read:  func(f *FS, n node) ([]byte, error) { return f.s.trace.ring.AppendBufferSizeKB(nil, n.cpu), nil },
		write: writeBufferSize},
}

// ftraceFiles are the files of an event of events/ftrace/ (node.ftrace):
// the ftrace tracers' own events, as the test kernel has them. None ever
// reaches this tree's buffer; trace-cmd record copies their formats into
// its trace.dat, and trace-cmd 3.1.6 crashes (a NULL dereference in
// copy_event_system) where there are none.
var ftraceFiles = map[string]*file{
	"format": {mode: 0o440, read: func(_ *FS, n node) ([]byte, error) {
		return ftraceFormats.ReadFile("ftraceformats/" + n.ftrace + ".format")
	}},
	"id": {mode: 0o440, read: func(_ *FS, n node) ([]byte, error) {
		b, err := ftraceFormats.ReadFile("ftraceformats/" + n.ftrace + ".format")
		if err != nil {
			return nil, err
		}
		_, id, _ := strings.Cut(string(b), "\nID: ")
		id, _, _ = strings.Cut(id, "\n")
		return []byte(id + "\n"), nil
	}},
}

// ftraceFormats holds events/ftrace/<event>/format of each of the test
// kernel's ftrace events, as Linux 6.12.117 prints them on x86-64
// (internal/subsys/testdata/kernel-tracefs-files.json has them).
//
//go:embed ftraceformats
var ftraceFormats embed.FS

// ftraceEventFiles lists the files of events/ftrace/<ev>/: format, and
// id for the events a tracer can enable (function and print: the kernel
// makes id where the event has a type and a reg method).
func ftraceEventFiles(ev string) map[string]*file {
	if ev == "function" || ev == "print" {
		return ftraceFiles
	}
	return map[string]*file{"format": ftraceFiles["format"]}
}

// ftraceEvent reports whether events/ftrace/<ev> exists.
func ftraceEvent(ev string) bool {
	_, err := fs.Stat(ftraceFormats, "ftraceformats/"+ev+".format")
	return err == nil && ev != "" && !strings.ContainsAny(ev, "/.")
}

// ftraceEvents lists events/ftrace/, sorted.
func ftraceEvents() []string {
	ents, _ := ftraceFormats.ReadDir("ftraceformats")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".format"))
	}
	return out
}

// systemFiles are the files of a system's directory, events/<system>/, and
// events/enable (the enable of every system, node.system "").
var systemFiles = map[string]*file{
	"enable": {mode: 0o640,
		read:  func(f *FS, n node) ([]byte, error) { return []byte{f.enableState(n.system), '\n'}, nil },
		write: writeEnable},
	"filter": {mode: 0o640,
		read: func(f *FS, n node) ([]byte, error) { return f.s.AppendSystemFilter(nil, n.system), nil },
		write: func(f *FS, n node, p []byte, _ Cred) (int, error) {
			if err := f.s.SetSystemFilter(n.system, p); err != nil {
				return 0, err
			}
			return len(p), nil
		}},
}

// eventFiles are the files of an event's directory,
// events/<system>/<event>/.
var eventFiles = map[string]*file{
	"enable": {mode: 0o640,
		read: func(f *FS, n node) ([]byte, error) {
			s := f.s
			s.mu.Lock()
			defer s.unlock()
			return boolText(n.ev.ftrace.Load()), nil
		},
		write: writeEnable},
	"filter": {mode: 0o640,
		read: func(f *FS, n node) ([]byte, error) {
			s := f.s
			s.mu.Lock()
			defer s.unlock()
			if n.ev.deleted {
				return nil, fmt.Errorf("event %s was deleted: %w", n.ev.tp, unix.ENODEV)
			}
			return n.ev.filterState.AppendFile(nil), nil
		},
		write: func(_ *FS, n node, p []byte, _ Cred) (int, error) {
			if err := n.ev.SetFilter(p); err != nil {
				return 0, err
			}
			return len(p), nil
		}},
	"format": {mode: 0o440, read: func(f *FS, n node) ([]byte, error) {
		s := f.s
		s.mu.Lock()
		defer s.unlock()
		return n.ev.def.AppendFormat(nil, n.ev.tp, n.ev.id), nil
	}},
	"id": {mode: 0o440, read: func(f *FS, n node) ([]byte, error) {
		s := f.s
		s.mu.Lock()
		defer s.unlock()
		// event_id_read: "%llu\n".
		return append(strconv.AppendInt(nil, int64(n.ev.id), 10), '\n'), nil
	}},
}

// writeEnable is a write to an enable file: an event's, a system's, or
// events/enable.
func writeEnable(f *FS, n node, p []byte, _ Cred) (int, error) {
	s := f.s
	v, err := kstrtoulFromUser(p)
	if err != nil {
		return 0, err
	}
	if v > 1 {
		return 0, fmt.Errorf("enable takes 0 or 1, not %d: %w", v, unix.EINVAL)
	}
	// tracing_update_buffers: the first enable expands the buffer.
	if err := s.trace.ring.Expand(); err != nil {
		return 0, err
	}
	if n.ev != nil {
		s.mu.Lock()
		defer s.unlock()
		if n.ev.deleted {
			return 0, fmt.Errorf("event %s was deleted: %w", n.ev.tp, unix.ENODEV)
		}
		s.setFtraceLocked(n.ev, v == 1)
		return len(p), nil
	}
	if err := f.setClr(n.system, "", v == 1); err != nil {
		return 0, err
	}
	return len(p), nil
}

// boolText is what a 0/1 file reads.
func boolText(on bool) []byte {
	if on {
		return []byte("1\n")
	}
	return []byte("0\n")
}

// entries lists a table's files as directory entries.
func entries(files map[string]*file) []DirEntry {
	out := make([]DirEntry, 0, len(files))
	for name, f := range files {
		out = append(out, DirEntry{name, f.mode})
	}
	slices.SortFunc(out, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Private reports whether reading the tracefs file name reads others'
// records — trace, trace_pipe and trace_pipe_raw, of all CPUs or of one,
// which tracefs keeps for root — rather than describing the events: the
// daemon lets only tracers open it.
func Private(name string) bool {
	f := tableFile(name)
	return f != nil && f.private
}

// SizesBuffer reports whether writing the tracefs file name sets the
// trace buffer's size: buffer_size_kb, of all CPUs or of one.
func SizesBuffer(name string) bool {
	f := tableFile(name)
	return f != nil && f.sizes
}

// tableFile is the root's or a CPU's file named by name, nil for any
// other: what Private and SizesBuffer ask about, without the tree.
func tableFile(name string) *file {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if rest, ok := strings.CutPrefix(name, FilePerCPU+"/cpu"); ok {
		if _, f, ok := strings.Cut(rest, "/"); ok {
			return perCPUFiles[f]
		}
		return nil
	}
	return rootFiles[name]
}
