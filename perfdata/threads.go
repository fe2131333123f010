package perfdata

// Threads are the names of tasks by thread id, as perf's machine keeps
// its threads' comm: a task is named by PERF_RECORD_COMM (the names perf
// record reads from /proc at its start, and exec's and prctl's; uetrace
// record writes those a daemon's session gives as COMMs too), and a new
// thread has the name of the thread that made it (PERF_RECORD_FORK, which
// no COMM follows). A Session keeps them for its samples; a live recording
// keeps its own.
//
// The zero Threads is empty and ready to use. It is not safe for
// concurrent use.
type Threads struct {
	names map[uint32]string
	// cache holds the latest lookups by tid % len(cache), misses too:
	// most samples come from a few threads, and a map lookup costs more
	// than a sample's other work.
	cache [64]threadSlot
}

type threadSlot struct {
	tid   uint32
	valid bool // the slot holds tid's answer
	known bool // tid has a name
	name  string
}

// Comm returns the name of thread tid, and whether it has one.
func (t *Threads) Comm(tid uint32) (string, bool) {
	s := &t.cache[tid%uint32(len(t.cache))]
	if s.valid && s.tid == tid {
		return s.name, s.known
	}
	name, known := t.names[tid]
	*s = threadSlot{tid: tid, valid: true, known: known, name: name}
	return name, known
}

// SetComm names thread tid.
func (t *Threads) SetComm(tid uint32, name string) {
	if t.names == nil {
		t.names = make(map[uint32]string)
	}
	t.names[tid] = name
	if s := &t.cache[tid%uint32(len(t.cache))]; s.tid == tid {
		*s = threadSlot{tid: tid, valid: true, known: true, name: name}
	}
}

// Fork notes that thread ptid made thread tid: tid takes ptid's name, if
// it has one that is not empty (perf's thread__fork), which Fork returns.
func (t *Threads) Fork(tid, ptid uint32) (string, bool) {
	name, ok := t.Comm(ptid)
	if !ok || name == "" {
		return "", false
	}
	t.SetComm(tid, name)
	return name, true
}
