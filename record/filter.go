package record

import (
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
	f := &taskFilter{comms: comms, names: make(map[uint32]string)}
	for _, p := range pids {
		f.pids = append(f.pids, uint32(p))
	}
	return f
}

// match reports whether a sample of task tid of process pid is kept.
func (f *taskFilter) match(pid, tid uint32) bool {
	if f.lastValid && tid == f.lastTID {
		return f.lastKeep
	}
	keep := f.decide(pid, tid)
	f.lastTID, f.lastKeep, f.lastValid = tid, keep, true
	return keep
}

func (f *taskFilter) decide(pid, tid uint32) bool {
	if len(f.pids) > 0 && !slices.Contains(f.pids, pid) {
		return false
	}
	if len(f.comms) == 0 {
		return true
	}
	name, ok := f.names[tid]
	if !ok {
		// Gone already: no name, no match, as perf has no name for it
		// either.
		name, _ = taskComm(int32(pid), int32(tid))
		f.names[tid] = name
	}
	return slices.Contains(f.comms, name)
}

// rename notes a task's new name.
func (f *taskFilter) rename(tid uint32, name string) {
	f.names[tid] = name
	if tid == f.lastTID {
		f.lastValid = false
	}
}

// wanted reports whether a sample of task tid of process pid is recorded,
// counting those left out.
func (r *Recorder) wanted(pid, tid uint32) bool {
	if r.filter == nil || r.filter.match(pid, tid) {
		return true
	}
	r.filtered.Add(1)
	return false
}

// renamed notes a task's name given by the source (a COMM record).
func (r *Recorder) renamed(pid, tid uint32, name string) {
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
