package subsys

import "sync"

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
// them inside fork. Hooks run without s.mu held, at the start of every
// operation that may change an event's state: a tracefs write, a session's
// attach, detach and close, SetFtrace.
//
// A hookList holds the sync hooks, or the count hooks (AddCountHook).
type hookList struct {
	mu    sync.Mutex
	hooks map[int]func()
	next  int
}

// AddSyncHook adds f to the hooks; remove takes it away again.
func (s *Subsystem) AddSyncHook(f func()) (remove func()) { return s.syncHooks.add(f) }

// add adds f to h; remove takes it away again.
func (h *hookList) add(f func()) (remove func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hooks == nil {
		h.hooks = map[int]func(){}
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

// syncProcesses runs the sync hooks. s.mu is not held.
func (s *Subsystem) syncProcesses() { s.syncHooks.run() }

// run runs the hooks, without h.mu held.
func (h *hookList) run() {
	h.mu.Lock()
	fs := make([]func(), 0, len(h.hooks))
	for _, f := range h.hooks {
		fs = append(fs, f)
	}
	h.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// AddCountHook adds f to the hooks run before the events' counts are read
// (AppendCounts): the daemon's, which adds what the readers of handed sets
// counted (HandedEvent.Count). remove takes it away again.
func (s *Subsystem) AddCountHook(f func()) (remove func()) { return s.countHooks.add(f) }
