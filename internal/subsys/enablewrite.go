package subsys

import (
	"maps"
	"slices"
	"sync"
)

// Enable bits are written into a process's memory outside the Subsystem's
// lock. The kernel writes them under event_mutex, but it never waits there
// for a page: user_event_enabler_write pins without faulting and, when the
// page is not present, hands the write to a worker (user_event_enabler_fault)
// and goes on. A Memory here may be slow — another process's memory
// through process_vm_writev (package procmem) waits for its page faults to
// be served, up to procmem.StallLimit — so one caller's memory must not hold
// the lock every other caller and every enable waits for.
//
// So, with the lock held, a change of an event's state only queues each of
// its enablers on its process (enqueue); the bits are written after the
// lock is released (Subsystem.unlock), by one goroutine per process at a
// time — whoever finds it idle "owns" its memory and writes everything
// queued on it, reading each event's state as it writes, so the last
// state wins whatever the order the queueing and writing interleave in.
// The caller that caused the writes waits for the processes it found idle,
// written in parallel; a process whose memory another goroutine is writing
// — blocked in it, maybe — gets its bits queued for that writer, as the
// kernel's worker gets a faulting write, and the caller goes on. A
// registration and an unregistration wait for their own process's memory
// (their results depend on it): the caller is that process.
//
// Differences from Linux: a bit of a process whose memory is being written
// by another goroutine is set after the enable returns, where the kernel
// sets a present page's bit before; and an enabler is visible (EADDRINUSE
// to a registration of the same bit racing with it) while its first write
// is under way, and gone again if that write fails.

// enqueue queues en's bit to be written with its event's state, and lists
// its process for the lock holder's unlock to write, unless list is false
// (the caller writes the process itself). s.mu is held.
func (p *Process) enqueue(en *enabler, list bool) {
	p.wmu.Lock()
	if !en.queued {
		en.queued = true
		p.queue = append(p.queue, en)
	}
	p.wmu.Unlock()
	if list && !p.listed {
		p.listed = true
		p.s.dirty = append(p.s.dirty, p)
	}
}

// unlock releases s.mu, then writes the enable bits queued while it was
// held (writeBits). Every unlock of s.mu that may follow a state change
// goes through it.
func (s *Subsystem) unlock() {
	if len(s.dirty) == 0 {
		s.mu.Unlock()
		return
	}
	procs := s.dirty
	s.dirty = nil
	for _, p := range procs {
		p.listed = false
	}
	s.mu.Unlock()
	s.writeBits(procs)
}

// writeBits writes what is queued on each of procs that no other goroutine
// is writing, in parallel, and waits for them; the others' writers write it.
func (s *Subsystem) writeBits(procs []*Process) {
	var wg sync.WaitGroup
	var last *Process
	for _, p := range procs {
		if !p.tryOwn() {
			continue
		}
		if other := last; other != nil {
			wg.Go(func() { other.drain() })
		}
		last = p
	}
	if last != nil {
		last.drain()
	}
	wg.Wait()
}

// tryOwn makes the caller the writer of p's memory, unless another
// goroutine is.
func (p *Process) tryOwn() bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.writing {
		return false
	}
	p.writing = true
	return true
}

// own makes the caller the writer of p's memory, waiting for the one
// writing it now.
func (p *Process) own() {
	p.wmu.Lock()
	for p.writing {
		p.wcond.Wait()
	}
	p.writing = true
	p.wmu.Unlock()
}

// drain writes every enabler queued on p, the owner of its memory, with its
// event's state at the time of the write, until none is left; then gives
// up ownership. It returns the writes the memory refused, which count in
// Stats.EnableWriteFailures.
func (p *Process) drain() int {
	failed := 0
	var q []*enabler
	for {
		p.wmu.Lock()
		q, p.queue = p.queue, q[:0]
		for _, en := range q {
			en.queued = false
		}
		if len(q) == 0 {
			p.writing = false
			p.wcond.Broadcast()
			p.wmu.Unlock()
			break
		}
		p.wmu.Unlock()
		for i, en := range q {
			if !en.dead.Load() && en.write(en.ev.status.Load() != 0) != nil {
				failed++
			}
			q[i] = nil
		}
	}
	if failed > 0 {
		s := p.s
		s.mu.Lock()
		s.stats.EnableWriteFailures += uint64(failed)
		s.unlock()
	}
	return failed
}

// A sync hook brings the subsystem's processes up to date with the
// kernel's news of forks before an event's state changes: the FUSE tree's
// callers apply the fork events queued so far (package callers, Sync), so
// that a child that forked before the change has its copy of the parent's
// enablers, and its bit, when the change returns — as the kernel copies
// them inside fork. The daemon's delivers what producers published before
// the change to the consumers of before (its drainers flushed, and the
// ring sets handed to a session's reader whose events the change may
// concern taken back). Hooks run without s.mu held, at the start of every
// operation that may change an event's state: a tracefs write, a session's
// attach, detach and close, SetFtrace — each told the Scope of what it
// may change.
//
// A hookList holds the sync hooks, or the count hooks (AddCountHook).
type hookList[F any] struct {
	mu    sync.Mutex
	hooks map[int]F
	next  int
}

// AddSyncHook adds f to the hooks; remove takes it away again.
func (s *Subsystem) AddSyncHook(f func(Scope)) (remove func()) { return s.syncHooks.add(f) }

// add adds f to h; remove takes it away again.
func (h *hookList[F]) add(f F) (remove func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hooks == nil {
		h.hooks = map[int]F{}
	}
	id := h.next
	h.next++
	h.hooks[id] = f
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.hooks, id)
	}
}

// all is the hooks now, to run without h.mu held.
func (h *hookList[F]) all() []F {
	h.mu.Lock()
	defer h.mu.Unlock()
	fs := make([]F, 0, len(h.hooks))
	for _, f := range h.hooks {
		fs = append(fs, f)
	}
	return fs
}

// syncProcesses runs the sync hooks for an operation that may change the
// state of the events in sc. s.mu is not held.
func (s *Subsystem) syncProcesses(sc Scope) {
	for _, f := range s.syncHooks.all() {
		f(sc)
	}
}

// A Scope is the events whose state an operation may change — where
// their records go: what the sync hooks are told. It may say more than
// the operation changes, never less.
type Scope struct {
	match func(*Event) bool // nil: every event
}

// AnyEvent is the Scope of an operation that may change any event.
var AnyEvent = Scope{}

// eventScope is ev's alone.
func eventScope(ev *Event) Scope { return Scope{func(e *Event) bool { return e == ev }} }

// patternScope is the events pattern selects (MatchEvent).
func patternScope(pattern string) Scope {
	return Scope{func(e *Event) bool { return MatchEvent(pattern, e) }}
}

// sessionScope is the events ss is attached to now: taken before the
// operation (a close) that detaches it.
func sessionScope(ss *Session) Scope {
	s := ss.s
	s.mu.Lock()
	evs := maps.Clone(ss.attached)
	s.mu.Unlock()
	return Scope{func(e *Event) bool {
		_, ok := evs[e]
		return ok
	}}
}

// Touches reports whether the operation may change the state of an event
// of f's. Its events are read as they are now: one added later is a
// change of its own (the File's hand-overs end then).
func (sc Scope) Touches(f *File) bool {
	if sc.match == nil {
		return true
	}
	p := f.events.Load()
	if p == nil {
		return false
	}
	return slices.ContainsFunc(*p, sc.match)
}

// AddCountHook adds f to the hooks run before the events' counts are read
// (AppendCounts): the daemon's, which adds what the readers of handed sets
// counted (HandedEvent.Count). remove takes it away again.
func (s *Subsystem) AddCountHook(f func()) (remove func()) { return s.countHooks.add(f) }

// countProcesses runs the count hooks. s.mu is not held.
func (s *Subsystem) countProcesses() {
	for _, f := range s.countHooks.all() {
		f()
	}
}
