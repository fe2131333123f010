package subsys

import (
	"sync"
	"sync/atomic"
)

// Memory is one process's memory as the enable-bit writer reaches it.
type Memory interface {
	// SetBit sets (on) or clears bit 0..63 of the 64-bit word at addr,
	// atomically and leaving the word's other bits alone, as the kernel's
	// set_bit/clear_bit on an unsigned long do. addr is 8-byte aligned.
	// An error means the word cannot be written (unmapped, read-only,
	// outside what the process shared): registration then fails with
	// ENOMEM and unregister with EFAULT, as in Linux.
	SetBit(addr uint64, bit uint, on bool) error
}

// Process is one address space: the kernel's user_event_mm. It holds the
// enablers its tasks registered, keyed by the raw (address, bit) they gave.
// Threads of one process share it (CLONE_VM); fork copies it; exec and
// exit release it.
type Process struct {
	s   *Subsystem
	mem Memory

	enablers []*enabler // under s.mu; newest first, as list_add_rcu keeps them
	charge   Charge     // under s.mu; nil: nothing is told
	listed   bool       // under s.mu: in s.dirty

	// The writer of its memory (enablewrite.go): under wmu, the enablers
	// whose bits are to be written, and whether a goroutine writes now.
	wmu     sync.Mutex
	wcond   sync.Cond // L: &wmu; signalled when writing ends
	queue   []*enabler
	writing bool
}

// Charge is told of each enabler a Process gains (n > 0) and loses (n < 0)
// — or, for a File opened with OpenCharged, each event its array gains and
// loses — with the Subsystem's lock held, so that whoever serves the
// process can bound what it holds. It may refuse a registration (force false): its
// error, which should wrap ENOMEM as the kernel's failed allocation of an
// enabler, is then the registration's — the event stays in the file's array,
// as after any failure past user_events_ref_add. Forced charges (a fork's
// copies) and losses it must take. It must not call into the Subsystem.
type Charge func(n int, force bool) error

// Charged reports whether the Process has a Charge.
func (p *Process) Charged() bool {
	p.s.mu.Lock()
	defer p.s.unlock()
	return p.charge != nil
}

// SetCharge makes charge the Process's account, if it has none yet (a
// fork's child has its parent's), and reports whether it was set. The
// enablers it has already are charged to it, forced.
func (p *Process) SetCharge(charge Charge) bool {
	s := p.s
	s.mu.Lock()
	defer s.unlock()
	if p.charge != nil {
		return false
	}
	p.charge = charge
	if len(p.enablers) > 0 {
		charge(len(p.enablers), true)
	}
	return true
}

// enabler is one registered (address, bit) of a process for an event.
type enabler struct {
	p    *Process
	ev   *Event
	addr uint64 // enable_addr as given: EADDRINUSE and unregister compare it raw
	bit  uint8
	size uint8 // enable_size: 4 or 8

	dead   atomic.Bool // dropped: its bit is written no more
	queued bool        // under p.wmu: in p.queue
}

// NewProcess returns a process with no enablers whose memory is mem.
func (s *Subsystem) NewProcess(mem Memory) *Process {
	p := &Process{s: s, mem: mem}
	p.wcond.L = &p.wmu
	return p
}

// word returns the 64-bit word and bit the kernel writes for an enabler
// (align_addr_bit, little-endian 64-bit): a 4-byte value that is not
// 8-aligned is the upper half of the word below it.
func word(addr uint64, bit uint8) (uint64, uint) {
	if addr%8 == 0 {
		return addr, uint(bit)
	}
	return addr &^ 7, uint(bit) + 32
}

// write reflects on into the enabler's bit.
func (en *enabler) write(on bool) error {
	w, b := word(en.addr, en.bit)
	return en.p.mem.SetBit(w, b, on)
}

// Fork returns the child of a fork without CLONE_VM: a process whose memory
// is mem and which has a copy of every enabler of p (user_event_mm_dup),
// each holding its own event reference. Its bits start as the parent's,
// since its memory is a copy; afterwards they change independently.
func (p *Process) Fork(mem Memory) *Process {
	s := p.s
	s.mu.Lock()
	defer s.unlock()
	child := s.NewProcess(mem)
	child.charge = p.charge
	for _, en := range p.enablers {
		c := &enabler{p: child, ev: en.ev, addr: en.addr, bit: en.bit, size: en.size}
		child.enablers = append(child.enablers, c)
		en.ev.enablers[c] = struct{}{}
		en.ev.refs++
	}
	if child.charge != nil && len(child.enablers) > 0 {
		// The kernel's fork would fail on an allocation; a fork learnt
		// of after the fact cannot, so the copies are charged whatever
		// the account says: its next registration is refused.
		child.charge(len(child.enablers), true)
	}
	return child
}

// Sync writes every enabler's bit with its event's state now, as
// user_event_enabler_update would have. A fork seen after the fact needs
// it: the kernel copies the enablers in fork itself, under the lock that
// orders bit updates, but a process outside the kernel (package callers)
// learns of a fork later, and the child's bits are the parent's as they
// were at the fork — stale if an event's state changed in between. It
// returns the number of bits the memory refused (also counted in
// Stats.EnableWriteFailures).
func (p *Process) Sync() int {
	s := p.s
	s.mu.Lock()
	for _, en := range p.enablers {
		p.enqueue(en, false)
	}
	s.unlock()
	p.own()
	return p.drain()
}

// Release drops every enabler, as exec and exit of the process's last task
// do (user_event_mm_remove): their event references go, which may delete
// events. The memory is not touched. The process can register again
// afterwards, as a task that exec'ed gets a fresh user_event_mm.
func (p *Process) Release() {
	s := p.s
	s.mu.Lock()
	defer s.unlock()
	for _, en := range p.enablers {
		s.dropEnabler(en)
	}
	p.enablers = nil
}

// dropEnabler destroys an enabler: it leaves its event's list and puts its
// reference. Called with s.mu held; the caller unlinks it from the process.
func (s *Subsystem) dropEnabler(en *enabler) {
	en.dead.Store(true)
	delete(en.ev.enablers, en)
	if len(en.ev.enablers) == 0 {
		en.ev.enablers = nil // an empty map keeps its buckets
	}
	s.put(en.ev)
	if en.p.charge != nil {
		en.p.charge(-1, true)
	}
}

// updateEnablers writes the event's state into every enabler of every
// process (user_event_enabler_update): the bit is set while anything is
// attached, cleared otherwise. Called with s.mu held: the bits are written
// when it is released (enablewrite.go).
func (s *Subsystem) updateEnablers(ev *Event) {
	for en := range ev.enablers {
		en.p.enqueue(en, true)
	}
}
