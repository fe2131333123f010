// Package callers keeps the processes that call into user_events_data over
// FUSE as subsys objects, as the kernel keeps a task's user_event_mm: one
// subsys.Process per address space, whose subsys.Memory is the process's
// own memory reached through procmem, copied at fork, released at exec and
// exit. It also reads the three ioctls' arguments from the caller's memory
// in the kernel's order and with its errnos (Register, Unregister, Delete):
// FUSE hands a server only the first 8 bytes of an ioctl's argument, the
// pointer, and the caller's thread id.
//
// How it learns of forks, execs and exits:
//
//   - Exit: each known process's pidfd is watched (procmem.Mem.Done), which
//     needs no privilege; the process is released when its last thread is
//     gone.
//   - Exec and pid reuse: at each Get the known process is checked to be the
//     same one (its AT_RANDOM bytes); procmem's SetBit refuses to write into a
//     program the process exec'd, so a stale enabler never touches it.
//   - Fork: at the first Get of a process whose parent is known and whose
//     memory is still the fork's copy (same AT_RANDOM bytes), it gets a copy
//     of the parent's enablers (Process.Fork), or the parent's Process when
//     they share the address space (CLONE_VM, kcmp).
//   - With Follow (CAP_NET_ADMIN before Linux 6.6; since, any process of
//     the initial user and pid namespaces), the kernel's process events connector
//     tells of forks and execs as they happen: a fork of a known process is
//     copied at once — so the child's enable bits follow the events' state
//     although it has not called yet, as in the kernel — and an exec releases
//     at once. If the kernel drops events (procevents.ErrOverrun), Resync
//     checks every known process.
//
// # Differences from Linux
//
//   - The kernel copies the enablers inside fork. Here the copy comes after
//     the fact (milliseconds with Follow, the child's first call without):
//     Process.Sync then writes the bits with the events' state of now. With
//     Follow, every change of an event's state first applies the fork
//     events the kernel queued before it (Sync, a subsys sync hook), so a
//     change made after a fork reaches the child, as in the kernel; without
//     Follow a change before the child's first call does not, and a child
//     that never calls keeps the bits of its fork.
//   - Without Follow, an exec'd process's enablers (and their event
//     references) are released at its next Get, at its exit, or at Resync,
//     not at the exec.
//   - A child whose parent exited (or was never a caller) before its first
//     Get starts with no enablers.
//   - Bits are set by read-modify-write of one byte (see procmem): not
//     atomic against the process's own writes to that byte.
//
// A process is reached only if SetAccess's check allows it, made before
// anything of its memory is read: the FUSE server bounds it by what the
// user the tree is served for could ptrace.
//
// It does not serve FUSE, check the caller's credentials, or decide which
// ioctl a request is: the FUSE server does.
package callers

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/uetrace/uetrace/internal/procevents"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/procmem"
	"github.com/uetrace/uetrace/internal/subsys"
	"golang.org/x/sys/unix"
)

// ErrClosed is the error of Get after Close.
var ErrClosed = fmt.Errorf("callers: closed: %w", unix.EBADF)

// Caller is the thread that made a request, with its process.
type Caller struct {
	TID, TGID int
	Process   *subsys.Process // its address space's, shared by its threads
	Mem       *procmem.Mem    // its process's memory

	sp *space
	cs *Callers
}

// Stats count what Callers did.
type Stats struct {
	Processes        int    // processes known now
	Forks            uint64 // children given a copy of their parent's enablers
	Clones           uint64 // CLONE_VM children that share their parent's Process
	Execs            uint64 // processes released because they exec'd
	Exits            uint64 // processes released because they exited
	Failures         uint64 // processes that could not be opened or checked
	WriteIndexFaults uint64 // DIAG_IOCSREG write_index stores that failed (ignored, as Linux does)
	Overruns         uint64 // times the kernel dropped process events
	Resyncs          uint64
}

// Callers is the set of known calling processes of one subsystem.
type Callers struct {
	s *subsys.Subsystem

	mu       sync.Mutex
	procs    map[int]*proc // by TGID
	stats    Stats
	closed   bool
	listener *procevents.Listener
	follow   sync.WaitGroup
	readMu   sync.Mutex          // held while events are read and applied (catchUp)
	unhook   func()              // takes Sync out of the subsystem's sync hooks
	allow    func(pid int) error // who may be reached (SetAccess), or nil
}

// proc is one known process (thread group).
type proc struct {
	tgid int
	mem  *procmem.Mem
	sp   *space
}

// space is one address space: its subsys.Process and the processes sharing
// it (more than one after clone with CLONE_VM but not CLONE_THREAD). It is
// the Process's Memory: a bit is written through any process still in it.
// Its lock is taken under subsys's (SetBit), so nothing calls subsys while
// holding it.
type space struct {
	p *subsys.Process

	mu       sync.Mutex
	mems     []*procmem.Mem
	released bool
}

// SetBit writes the bit through the first member that still has the
// address space.
func (sp *space) SetBit(addr uint64, bit uint, on bool) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	err := fmt.Errorf("callers: no process has this address space any more: %w", unix.ESRCH)
	for _, m := range sp.mems {
		err = m.SetBit(addr, bit, on)
		if !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.EBADF) {
			return err
		}
	}
	return err
}

func (sp *space) add(m *procmem.Mem) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.mems = append(sp.mems, m)
}

// remove takes m out and reports whether the space is now empty (and so
// released: the caller releases its Process).
func (sp *space) remove(m *procmem.Mem) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for i, x := range sp.mems {
		if x == m {
			sp.mems = append(sp.mems[:i], sp.mems[i+1:]...)
			break
		}
	}
	if len(sp.mems) == 0 && !sp.released {
		sp.released = true
		return true
	}
	return false
}

func (sp *space) isReleased() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.released
}

// New returns an empty set of callers of s.
func New(s *subsys.Subsystem) *Callers {
	cs := &Callers{s: s, procs: make(map[int]*proc)}
	cs.unhook = s.AddSyncHook(func(subsys.Scope) { cs.Sync() })
	return cs
}

// SetAccess makes allow decide, for every process before its memory is
// first read, whether it may be reached (caps.User: the user the
// callers are served for could ptrace it): a process allow refuses is never
// made known, and Get's error is allow's. Call it before the first Get.
func (cs *Callers) SetAccess(allow func(pid int) error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.allow = allow
}

// status reads a thread's TGID and its process's parent's (PPid) from
// /proc/<tid>/status (which resolves any thread id, not only listed ones).
func status(tid int) (tgid, ppid int, err error) {
	st, err := procfs.ReadStatus(tid)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, 0, fmt.Errorf("callers: thread %d does not exist: %w", tid, unix.ESRCH)
		}
		return 0, 0, fmt.Errorf("callers: thread %d: %w", tid, err)
	}
	if !st.Has(procfs.StatusTgid) || st.Tgid <= 0 {
		return 0, 0, fmt.Errorf("callers: thread %d: no Tgid in its status (it is exiting?): %w", tid, unix.ESRCH)
	}
	return st.Tgid, st.PPid, nil
}

// Get returns the caller tid: its process, created (or copied from its
// parent's, see the package doc) the first time, and made anew when the
// process is no longer the one known (it exec'd, or the pid was reused).
func (cs *Callers) Get(tid int) (*Caller, error) {
	tgid, ppid, err := status(tid)
	if err != nil {
		return nil, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, ErrClosed
	}
	if pr := cs.procs[tgid]; pr != nil {
		err := pr.mem.Check()
		if err == nil {
			return &Caller{TID: tid, TGID: tgid, Process: pr.sp.p, Mem: pr.mem, sp: pr.sp, cs: cs}, nil
		}
		cs.dropFor(pr, err)
	}
	pr, err := cs.add(tgid, ppid, false)
	if err != nil {
		return nil, err
	}
	return &Caller{TID: tid, TGID: tgid, Process: pr.sp.p, Mem: pr.mem, sp: pr.sp, cs: cs}, nil
}

// GetKnown is Get for a thread whose process id the caller already knows to
// be current (a thread never changes process: package fusefs keeps it per
// thread with an open /proc file that proves the thread alive). A known
// process is checked as Get checks it, without reading the thread's status
// again; anything else — a process not known yet, or one that exec'd — is
// Get's.
func (cs *Callers) GetKnown(tid, tgid int) (*Caller, error) {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil, ErrClosed
	}
	if pr := cs.procs[tgid]; pr != nil && pr.mem.Check() == nil {
		c := &Caller{TID: tid, TGID: tgid, Process: pr.sp.p, Mem: pr.mem, sp: pr.sp, cs: cs}
		cs.mu.Unlock()
		return c, nil
	}
	cs.mu.Unlock()
	return cs.Get(tid)
}

// add opens process tgid and makes it known: sharing its parent's Process
// if it shares its address space, with a copy of the parent's enablers if
// its memory is still the fork's copy of the parent's, else with a Process
// of its own — unless onlyChild, when a process that is neither is not
// made known (nil, nil). Called with cs.mu held.
func (cs *Callers) add(tgid, ppid int, onlyChild bool) (*proc, error) {
	mem, err := procmem.OpenAllowed(tgid, cs.allow)
	if err != nil {
		if !onlyChild || !errors.Is(err, unix.ESRCH) {
			cs.stats.Failures++
		}
		return nil, err
	}
	pr := &proc{tgid: tgid, mem: mem}
	if parent := cs.procs[ppid]; parent != nil && ppid != tgid {
		same, err := mem.SameVM(parent.mem)
		switch {
		case err == nil && same:
			pr.sp = parent.sp
			pr.sp.add(mem)
			cs.stats.Clones++
		case err == nil && sameRandom(mem, parent.mem):
			// Still the fork's copy of the parent's memory: the
			// parent's enablers are its, as the kernel copies them.
			pr.sp = &space{mems: []*procmem.Mem{mem}}
			pr.sp.p = parent.sp.p.Fork(pr.sp)
			pr.sp.p.Sync()
			cs.stats.Forks++
		}
	}
	if pr.sp == nil {
		if onlyChild {
			mem.Close()
			return nil, nil
		}
		pr.sp = &space{mems: []*procmem.Mem{mem}}
		pr.sp.p = cs.s.NewProcess(pr.sp)
	}
	cs.procs[tgid] = pr
	done := mem.Done()
	go func() {
		<-done
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.procs[tgid] == pr {
			cs.drop(pr)
			cs.stats.Exits++
		}
	}()
	return pr, nil
}

// sameRandom reports whether two processes run the same program image:
// a fork's child has its parent's AT_RANDOM bytes at the same address until
// it execs.
func sameRandom(a, b *procmem.Mem) bool {
	aa, ar := a.Random()
	ba, br := b.Random()
	return aa == ba && ar == br
}

// drop forgets pr, releasing its Process if no other process shares it.
// Called with cs.mu held.
func (cs *Callers) drop(pr *proc) {
	if cs.procs[pr.tgid] == pr {
		delete(cs.procs, pr.tgid)
	}
	if pr.sp.remove(pr.mem) {
		pr.sp.p.Release()
	}
	pr.mem.Close()
}

// dropFor drops pr after its check failed with err, counting why.
func (cs *Callers) dropFor(pr *proc, err error) {
	switch {
	case errors.Is(err, procmem.ErrReplaced):
		cs.stats.Execs++
	case errors.Is(err, procmem.ErrExited):
		cs.stats.Exits++
	default:
		// It can no longer be read (it exec'd a setuid program, say):
		// it is not the process it was.
		cs.stats.Failures++
	}
	cs.drop(pr)
}

// Follow listens to the kernel's process events (procevents) and applies
// them until Close. Before Linux 6.6 it needs CAP_NET_ADMIN; without it the
// error says so, and Callers works lazily (see the package doc). In a pid or
// user namespace other than the initial ones the kernel sends nothing, and
// Callers works lazily all the same.
func (cs *Callers) Follow() error {
	l, err := procevents.Listen()
	if err != nil {
		return fmt.Errorf("callers: follow: %w", err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed || cs.listener != nil {
		l.Close()
		if cs.closed {
			return ErrClosed
		}
		return fmt.Errorf("callers: already following: %w", unix.EBUSY)
	}
	cs.listener = l
	cs.follow.Add(1)
	go cs.run(l)
	return nil
}

// run reads process events until the listener is closed: it waits for a
// datagram without holding anything, then takes what is queued (catchUp),
// so that Sync, which takes the same lock, returns only once every event
// queued before it is applied.
func (cs *Callers) run(l *procevents.Listener) {
	defer cs.follow.Done()
	for {
		if err := l.Wait(); err != nil {
			cs.mu.Lock()
			if !cs.closed {
				// The socket failed: fall back to lazy checks.
				cs.stats.Failures++
			}
			cs.mu.Unlock()
			return
		}
		if !cs.catchUp(l) {
			return
		}
	}
}

// catchUp applies every event the kernel has queued on l; false when the
// socket failed (lazy checks from then on).
func (cs *Callers) catchUp(l *procevents.Listener) bool {
	cs.readMu.Lock()
	defer cs.readMu.Unlock()
	for {
		evs, ok, err := l.ReadNow()
		if errors.Is(err, procevents.ErrOverrun) {
			cs.mu.Lock()
			cs.stats.Overruns++
			cs.mu.Unlock()
			cs.Resync()
			continue
		}
		if err != nil {
			cs.mu.Lock()
			if !cs.closed {
				cs.stats.Failures++
			}
			cs.mu.Unlock()
			return false
		}
		if !ok {
			return true
		}
		cs.apply(evs)
	}
}

// Sync applies the process events the kernel has sent so far, with Follow:
// a fork that happened before the call has been copied when it returns. The
// subsystem calls it before it changes an event's state (subsys.SyncHook),
// so that a child that forked and then enabled an event, as the kernel's
// abi_test does, finds its own bit set — the kernel copies enablers inside
// fork. Without Follow it does nothing.
func (cs *Callers) Sync() {
	cs.mu.Lock()
	l := cs.listener
	cs.mu.Unlock()
	if l != nil {
		cs.catchUp(l)
	}
}

// apply applies process events.
func (cs *Callers) apply(evs []procevents.Event) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return
	}
	for _, ev := range evs {
		switch ev.Kind {
		case procevents.Fork:
			if ev.PID != ev.TGID || cs.procs[ev.ParentTGID] == nil {
				continue // a thread, or not a caller's child
			}
			if pr := cs.procs[ev.TGID]; pr != nil {
				err := pr.mem.Check()
				if err == nil {
					continue // known already (Get came first)
				}
				cs.dropFor(pr, err)
			}
			// A child that exited or exec'd already is not made known.
			_, _ = cs.add(ev.TGID, ev.ParentTGID, true)
		case procevents.Exec:
			pr := cs.procs[ev.TGID]
			if pr == nil {
				continue
			}
			if err := pr.mem.Check(); err != nil {
				cs.dropFor(pr, err)
			} // else: Get saw the exec first and made it anew
		case procevents.Exit:
			// The pidfd watch releases the process when its last thread
			// is gone; this is sooner when the event comes after that.
			if pr := cs.procs[ev.TGID]; pr != nil && ev.PID == ev.TGID && pr.mem.Exited() {
				cs.drop(pr)
				cs.stats.Exits++
			}
		}
	}
}

// Resync checks every known process: one that exited, exec'd or can no
// longer be read is released and forgotten. Follow calls it when the kernel
// dropped events; without Follow a daemon may call it from time to time to
// release processes that exec'd and never called again.
func (cs *Callers) Resync() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.stats.Resyncs++
	for _, pr := range cs.procs {
		if err := pr.mem.Check(); err != nil {
			cs.dropFor(pr, err)
		}
	}
}

// Stats returns the counters.
func (cs *Callers) Stats() Stats {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.stats
	st.Processes = len(cs.procs)
	return st
}

// Close stops following and releases every known process, as if they all
// exited.
func (cs *Callers) Close() error {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return nil
	}
	cs.closed = true
	l := cs.listener
	cs.unhook()
	for _, pr := range cs.procs {
		cs.drop(pr)
	}
	cs.mu.Unlock()
	if l != nil {
		l.Close()
	}
	cs.follow.Wait()
	return nil
}
