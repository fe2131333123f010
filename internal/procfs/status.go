package procfs

import (
	"bytes"
	"strconv"
)

// Status is what uetrace reads of /proc/<pid>/status (proc(5); written by
// task_state and task_cap in Linux's fs/proc/array.c, one "Name:\tvalue"
// line each). Ids are shown in the reader's namespaces: pids in the pid
// namespace of the /proc read, uids and gids in the reader's user
// namespace.
type Status struct {
	Tgid int // the thread group: the process's id
	PPid int // the parent process's id; 0 for a task whose parent /proc cannot see
	// Uid and Gid are the real, effective, saved set and filesystem ids.
	Uid, Gid [4]uint32
	CapEff   uint64 // the effective capabilities, bit n for capability n
	// NSpid is the task's id in each pid namespace from that of the /proc
	// read down to its own: NSpid[0] is /proc's, the last the task's own
	// namespace's.
	NSpid []int
	// SigPnd are the signals pending for the thread, ShdPnd those pending
	// for its process (any thread may take them), SigBlk those the thread
	// blocks: bit n-1 for signal n (render_sigset_t).
	SigPnd, ShdPnd, SigBlk uint64
	// Threads is the number of threads of the task's process.
	Threads int
	// Found are the lines that were found and well formed; a field whose
	// line was not is zero. A live task's status has them all (NSpid
	// since Linux 4.1); a file read while its task exits may be cut short.
	Found StatusField
}

// StatusField names lines of a status file, as a set.
type StatusField uint16

const (
	StatusTgid StatusField = 1 << iota
	StatusPPid
	StatusUid
	StatusGid
	StatusCapEff
	StatusNSpid
	StatusSigPnd
	StatusShdPnd
	StatusSigBlk
	StatusThreads
)

// Has reports whether every line of f was found.
func (s *Status) Has(f StatusField) bool { return s.Found&f == f }

// ReadStatus reads /proc/<pid>/status; pid may be a thread's id, of any
// process (/proc resolves every thread id, not only the listed ones).
func ReadStatus(pid int) (Status, error) {
	b, err := ReadFile(pidPath(pid, "status"))
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b), nil
}

// ParseStatus parses the lines of a status file that Status has. A line
// must start with its name: "Name:\tNSpid:\t3" has no NSpid. Where a name
// repeats, the last line counts.
func ParseStatus(b []byte) Status {
	var s Status
	for line := range lines(b) {
		name, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var f StatusField
		good := false
		switch string(name) {
		case "Tgid":
			f = StatusTgid
			s.Tgid, good = decimal(v)
		case "PPid":
			f = StatusPPid
			s.PPid, good = decimal(v)
		case "Uid":
			f = StatusUid
			s.Uid, good = ids4(v)
		case "Gid":
			f = StatusGid
			s.Gid, good = ids4(v)
		case "CapEff":
			f = StatusCapEff
			s.CapEff, good = hex64(v)
		case "Threads":
			f = StatusThreads
			s.Threads, good = decimal(v)
		case "SigPnd":
			f = StatusSigPnd
			s.SigPnd, good = hex64(v)
		case "ShdPnd":
			f = StatusShdPnd
			s.ShdPnd, good = hex64(v)
		case "SigBlk":
			f = StatusSigBlk
			s.SigBlk, good = hex64(v)
		case "NSpid":
			f = StatusNSpid
			s.NSpid, good = decimals(v)
		default:
			continue
		}
		if good {
			s.Found |= f
		} else {
			s.Found &^= f
		}
	}
	return s
}

// lines yields b's lines without their newlines.
func lines(b []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			if !yield(line) {
				return
			}
		}
	}
}

// decimal parses a value that is one decimal number (blanks around it).
func decimal(v []byte) (int, bool) {
	n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
	if err != nil {
		return 0, false
	}
	return n, true
}

// hex64 parses a value that is one hexadecimal number, as CapEff's
// "%016llx" and the signal sets'.
func hex64(v []byte) (uint64, bool) {
	n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// ids4 parses Uid's and Gid's four decimal ids.
func ids4(v []byte) (ids [4]uint32, ok bool) {
	i := 0
	for f := range fields(v) {
		if i == len(ids) {
			return [4]uint32{}, false
		}
		n, err := strconv.ParseUint(string(f), 10, 32)
		if err != nil {
			return [4]uint32{}, false
		}
		ids[i] = uint32(n)
		i++
	}
	if i < len(ids) {
		return [4]uint32{}, false
	}
	return ids, true
}

// decimals parses a value of one or more decimal numbers (NSpid's; -1 in a
// pidfd's fdinfo).
func decimals(v []byte) ([]int, bool) {
	var ns []int
	for f := range fields(v) {
		n, err := strconv.Atoi(string(f))
		if err != nil {
			return nil, false
		}
		ns = append(ns, n)
	}
	return ns, len(ns) > 0
}

// fields yields the blank-separated fields of v.
func fields(v []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for {
			v = bytes.TrimLeft(v, " \t")
			if len(v) == 0 {
				return
			}
			i := bytes.IndexAny(v, " \t")
			if i < 0 {
				i = len(v)
			}
			if !yield(v[:i]) {
				return
			}
			v = v[i:]
		}
	}
}
