package subsys

import (
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
	trunc func(s *Subsystem, cred Cred) error
	// private: reading it reads others' records, which tracefs keeps for
	// root (trace, trace_pipe).
	private bool
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
		trunc: func(s *Subsystem, _ Cred) error { s.clearEvents(); return nil }},
	FileBufferSizeKB: {mode: 0o640,
		read: func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendBufferSizeKB(nil, -1), nil },
		write: func(f *FS, _ node, p []byte, _ Cred) (int, error) {
			v, err := kstrtoulFromUser(p)
			if err != nil {
				return 0, err
			}
			if v == 0 {
				return 0, fmt.Errorf("buffer_size_kb must not be 0: %w", unix.EINVAL)
			}
			if err := f.s.trace.resize(int(min(v, 1<<40))); err != nil {
				return 0, err
			}
			return len(p), nil
		}},
	FileBufferTotalKB: {mode: 0o440, read: func(f *FS, _ node) ([]byte, error) { return f.s.trace.ring.AppendBufferTotalSizeKB(nil), nil }},
	FileDynamicEvents: {mode: 0o640,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.AppendDynamicEvents(nil), nil },
		write: func(f *FS, _ node, p []byte, cred Cred) (int, error) { return f.s.WriteDynamicEvents(p, cred) },
		trunc: func(s *Subsystem, cred Cred) error { return s.TruncateDynamicEvents(cred) }},
	FileTrace: {mode: 0o640, private: true,
		read:  func(f *FS, _ node) ([]byte, error) { return f.s.trace.appendTrace(nil), nil },
		write: func(_ *FS, _ node, p []byte, _ Cred) (int, error) { return len(p), nil }, // tracing_write_stub
		trunc: func(s *Subsystem, _ Cred) error { s.trace.reset(); return nil }},
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
		trunc: func(s *Subsystem, _ Cred) error { s.ClearErrorLog(); return nil }},
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
// records — trace and trace_pipe, which tracefs keeps for root — rather
// than describing the events: the daemon lets only tracers open it.
func Private(name string) bool {
	f, ok := rootFiles[strings.Trim(name, "/")]
	return ok && f.private
}
