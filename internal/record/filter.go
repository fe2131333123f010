package record

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// taskFilter keeps the samples of some processes and task names
// (Options.PIDs, Options.Comms). Used by the draining goroutine only.
type taskFilter struct {
	pids  []uint32
	comms []string
	// names are task names by tid: from the source's name records as they
	// come, else read from /proc when the task is first seen.
	names map[uint32]string
	// parents are the threads that made threads (PERF_RECORD_FORK): a
	// new thread has its parent's name, and the kernel names it in no
	// COMM record.
	parents map[uint32]uint32
	// The decision for the last task: most samples come in runs of one
	// task's.
	lastTID   uint32
	lastKeep  bool
	lastValid bool
}

func newTaskFilter(pids []int, comms []string) *taskFilter {
	if len(pids) == 0 && len(comms) == 0 {
		return nil
	}
	f := &taskFilter{comms: comms, names: make(map[uint32]string), parents: make(map[uint32]uint32)}
	for _, p := range pids {
		f.pids = append(f.pids, uint32(p))
	}
	return f
}

// match reports whether a sample of task tid of process pid is kept;
// decided is false, unless final, when that takes the name of a task that
// is gone from /proc and was not named by the source: on the kernel its
// name (a COMM record of its exec) can be in another CPU's ring, read
// later in the same drain — and the name its forebears had, which a
// forked process keeps until it execs, would be the wrong one then.
func (f *taskFilter) match(pid, tid uint32, final bool) (keep, decided bool) {
	if f.lastValid && tid == f.lastTID {
		return f.lastKeep, true
	}
	keep = true
	switch {
	case len(f.pids) > 0 && !slices.Contains(f.pids, pid):
		keep = false
	case len(f.comms) > 0:
		name, ok := f.name(pid, tid, final)
		if !ok {
			return false, false
		}
		keep = slices.Contains(f.comms, name)
	}
	f.lastTID, f.lastKeep, f.lastValid = tid, keep, true
	return keep, true
}

// name is a task's name: as the source named it, else as /proc has it,
// else — with inherit — as the source named its forebears (a new thread,
// which the kernel names in no COMM record; a forked process that has not
// exec'd).
func (f *taskFilter) name(pid, tid uint32, inherit bool) (string, bool) {
	if n, ok := f.names[tid]; ok {
		return n, true
	}
	if n, ok := taskComm(int32(pid), int32(tid)); ok {
		f.names[tid] = n
		return n, true
	}
	if !inherit {
		return "", false
	}
	t := tid
	for range 16 { // a bounded walk: a pid reused can make a loop
		p, ok := f.parents[t]
		if !ok {
			break
		}
		t = p
		if n, ok := f.names[t]; ok {
			f.names[tid] = n
			return n, true
		}
	}
	return "", false
}

// fork notes that thread ptid made thread tid.
func (f *taskFilter) fork(tid, ptid uint32) {
	if tid != ptid {
		f.parents[tid] = ptid
	}
	if tid == f.lastTID {
		f.lastValid = false
	}
}

// nameless notes that task tid was never named: it matches no --comm, as
// perf has no name for it either.
func (f *taskFilter) nameless(tid uint32) {
	f.names[tid] = ""
}

// rename notes a task's new name.
func (f *taskFilter) rename(tid uint32, name string) {
	f.names[tid] = name
	if tid == f.lastTID {
		f.lastValid = false
	}
}

// wanted reports whether a sample of task tid of process pid is recorded,
// counting those left out. A task not named yet counts as unnamed: the
// daemon names every task before its first record.
func (r *Recorder) wanted(pid, tid uint32) bool {
	if r.filter == nil {
		return true
	}
	keep, decided := r.filter.match(pid, tid, true)
	if !decided {
		r.filter.nameless(tid)
	}
	if !keep {
		r.filtered.Add(1)
	}
	return keep
}

// wantedRecord is wanted for a sample from a kernel ring: one of a task not
// named yet waits, copied, for the end of the drain (flushPending), by
// when every ring has given the names it had.
func (r *Recorder) wantedRecord(rec []byte, pid, tid uint32) bool {
	if r.filter == nil {
		return true
	}
	keep, decided := r.filter.match(pid, tid, false)
	switch {
	case !decided:
		r.pending = append(r.pending, bytes.Clone(rec))
	case !keep:
		r.filtered.Add(1)
	}
	return keep
}

// flushPending records the waiting samples that the filter keeps, now that
// the names the rings had are known.
func (r *Recorder) flushPending() {
	pending := r.pending
	r.pending = nil
	for _, rec := range pending {
		pid, tid := ne.Uint32(rec[16:]), ne.Uint32(rec[20:])
		if !r.wanted(pid, tid) {
			continue
		}
		r.seen(ne.Uint64(rec[8:]), pid, tid)
		r.sinkRecord(rec)
		if r.w != nil {
			r.check(r.w.WriteRecord(rec))
		}
	}
}

// renamed notes a task's name given by the source (a COMM record).
func (r *Recorder) renamed(pid, tid uint32, name string) {
	if r.sinking {
		r.comms.SetComm(tid, name)
	}
	if r.filter != nil {
		r.filter.rename(tid, name)
	}
	if r.procs != nil {
		r.procs.rename(pid, tid, name)
	}
}

// readLost updates the events' lost counts, where the source counts them
// per event. Called by the goroutine that runs the recording, while the
// source is open.
func (r *Recorder) readLost() {
	k, ok := r.src.(*kernelSource)
	if !ok {
		return
	}
	for _, ev := range r.events {
		ev.lost.Store(k.eventLost(ev))
	}
}

// processCounts are the samples per process (Options.ByProcess). add is
// called by the draining goroutine; snapshot by any.
type processCounts struct {
	mu    sync.Mutex
	byPID map[uint32]*procCount
	// The last process added to, for the draining goroutine only.
	last    *procCount
	lastPID uint32
}

type procCount struct {
	samples atomic.Uint64
	comm    string // under processCounts.mu
}

func newProcessCounts() *processCounts {
	return &processCounts{byPID: make(map[uint32]*procCount)}
}

func (p *processCounts) get(pid uint32) *procCount {
	pc := p.byPID[pid]
	if pc == nil {
		pc = &procCount{}
		p.byPID[pid] = pc
	}
	return pc
}

func (p *processCounts) add(pid, tid uint32) {
	if p.last != nil && p.lastPID == pid {
		p.last.samples.Add(1)
		return
	}
	p.mu.Lock()
	pc := p.get(pid)
	p.mu.Unlock()
	p.last, p.lastPID = pc, pid
	pc.samples.Add(1)
}

// rename names a process after its main thread, or after another of its
// threads until the main thread's name is known.
func (p *processCounts) rename(pid, tid uint32, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.get(pid)
	if tid == pid || pc.comm == "" {
		pc.comm = name
	}
}

// snapshot returns the counts by process id.
func (p *processCounts) snapshot() []ProcessStats {
	p.mu.Lock()
	out := make([]ProcessStats, 0, len(p.byPID))
	for pid, pc := range p.byPID {
		out = append(out, ProcessStats{PID: pid, Comm: pc.comm, Samples: pc.samples.Load()})
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b ProcessStats) int { return cmp.Compare(a.PID, b.PID) })
	return out
}
