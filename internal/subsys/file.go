package subsys

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
)

const pageSize = 4096

// File is one open user_events_data: an append-only array of the events
// registered through it, whose positions are the write indices.
type File struct {
	s      *Subsystem
	mu     sync.Mutex               // serialises appends and close
	events atomic.Pointer[[]*Event] // the write path reads it without mu
	closed bool
	charge Charge // told of the events the array gains and loses; nil: nothing is
	// watches are told of the array's indices and their events' status
	// (watch.go); under s.mu and mu.
	watches []FileWatch
	// handed are the file's hand-overs to a session's reader
	// (handover.go): a set of each process that writes through it, all
	// to the one session that consumes its events; under s.mu.
	handed []handing
}

// Open opens user_events_data.
func (s *Subsystem) Open() *File { return &File{s: s} }

// OpenCharged opens user_events_data whose array of events is accounted to
// charge, as a Process's enablers are (Charge): each event it gains, where
// user_events_ref_add allocates — a refusal is the registration's error
// (Register's step 6), ENOMEM as the kernel's failed krealloc — and, at
// Close, all it held. An event stays in the array after a registration
// that fails past that step, as in Linux, so what a client's failed
// registrations hold is counted too.
func (s *Subsystem) OpenCharged(charge Charge) *File { return &File{s: s, charge: charge} }

// RegisterArgs is what DIAG_IOCSREG reads from the caller's memory.
type RegisterArgs struct {
	// Reg is struct user_reg (abi.UserReg) as the caller passed it: its size
	// field says how
	// many bytes the kernel reads. A slice shorter than that behaves
	// like memory that faults past its end (EFAULT).
	Reg []byte
	// Name is the string at name_args, up to its NUL. A string of
	// eventdef.MaxCommandLen+1 bytes or more is EINVAL, as strndup_user
	// would find no NUL within 512 bytes.
	Name string
	// NameFault says name_args could not be read (EFAULT).
	NameFault bool
}

// copyStruct is copy_struct_from_user for an argument whose kernel size is
// ksize: the caller's size must be ≥ min (else EINVAL) and ≤ a page (else
// E2BIG); bytes past ksize must be zero (else E2BIG); a read past the end of
// the memory is EFAULT. It returns the first ksize bytes, and whether the
// copy happened (false when the tail check failed first: the kernel's copy
// then stays zero).
func copyStruct(arg []byte, ksize int) (out []byte, copied bool, err error) {
	if len(arg) < 4 {
		return nil, false, fmt.Errorf("cannot read the size field: %w", unix.EFAULT)
	}
	size := binary.NativeEndian.Uint32(arg)
	if size > pageSize {
		return nil, false, fmt.Errorf("size %d is over a page: %w", size, unix.E2BIG)
	}
	if int(size) < ksize {
		return nil, false, fmt.Errorf("size %d is under %d: %w", size, ksize, unix.EINVAL)
	}
	out = make([]byte, ksize)
	if int(size) > ksize {
		for i := ksize; i < int(size); i++ {
			if i >= len(arg) {
				return out, false, fmt.Errorf("the struct's %d bytes are not all readable: %w", size, unix.EFAULT)
			}
			if arg[i] != 0 {
				return out, false, fmt.Errorf("non-zero byte at offset %d past the %d bytes this kernel knows: %w", i, ksize, unix.E2BIG)
			}
		}
	}
	n := copy(out, arg)
	if n < ksize {
		return out, true, fmt.Errorf("the struct's %d bytes are not all readable: %w", size, unix.EFAULT)
	}
	return out, true, nil
}

// Register is DIAG_IOCSREG by process p (the calling task's address space)
// with privileges cred. It checks, in the kernel's order and with its errno
// (user_events_ioctl_reg, user_reg_get, user_event_parse):
//
//  1. the struct: size unreadable EFAULT, over a page E2BIG, under 28
//     EINVAL, non-zero bytes past 28 E2BIG;
//  2. flags other than PERSIST|MULTI_FORMAT EINVAL; enable_size not 4 or 8
//     EINVAL; enable_addr not aligned to it EINVAL; enable_bit past it
//     EINVAL; the range not a user address EFAULT;
//  3. the (enable_addr, enable_bit) already registered by this process
//     EADDRINUSE — before the name is read;
//  4. the name: unreadable EFAULT, 512 bytes or more EINVAL;
//  5. the command (eventdef.Parse) and the registry: ':' flags EINVAL,
//     PERSIST without privilege EPERM, same name with other fields
//     EADDRINUSE, bad fields EINVAL, user_events_max EMFILE;
//  6. the event joins this file's array (its write index): the File's
//     Charge (OpenCharged) may refuse it, its error (ENOMEM) the
//     registration's;
//  7. the enabler is made: the Process's Charge may refuse it (its error,
//     ENOMEM, as the kernel's allocation failing) — the event stays in
//     the array;
//  8. the enable bit is written at once with the event's state; memory that
//     cannot be written is ENOMEM — the event stays in the array.
//
// It returns the write index.
func (f *File) Register(p *Process, cred Cred, a RegisterArgs) (uint32, error) {
	raw, _, err := copyStruct(a.Reg, abi.UserRegSize)
	if err != nil {
		return 0, fmt.Errorf("register: %w", err)
	}
	ne := binary.NativeEndian
	bit, size, flags, addr := raw[4], raw[5], ne.Uint16(raw[6:]), ne.Uint64(raw[8:])
	if flags >= regMax {
		return 0, fmt.Errorf("register: unknown flags %#x: %w", flags, unix.EINVAL)
	}
	if size != 4 && size != 8 {
		return 0, fmt.Errorf("register: enable_size %d is not 4 or 8: %w", size, unix.EINVAL)
	}
	if addr%uint64(size) != 0 {
		return 0, fmt.Errorf("register: enable_addr %#x is not aligned to enable_size %d: %w", addr, size, unix.EINVAL)
	}
	if int(bit) > int(size)*8-1 {
		return 0, fmt.Errorf("register: enable_bit %d does not fit enable_size %d: %w", bit, size, unix.EINVAL)
	}
	// access_ok: for sizes the compiler knows are at most a page, x86-64
	// checks the pointer alone against USER_PTR_MAX (checked on 6.12.117:
	// 0x00fffffffffff000 passes with size 8, 0x00fffffffffff004 is EFAULT).
	if addr > f.s.opts.UserAddrMax {
		return 0, fmt.Errorf("register: enable_addr %#x is not a user address: %w", addr, unix.EFAULT)
	}

	idx, en, err := f.link(p, cred, a, addr, bit, size, flags)
	if err != nil {
		return 0, err
	}
	// The first write, outside the lock (enablewrite.go): this process's
	// memory, which only this caller waits for.
	p.own()
	if !en.dead.Load() {
		err = en.write(en.ev.status.Load() != 0)
	}
	p.drain()
	if err != nil {
		s := f.s
		s.mu.Lock()
		if !en.dead.Load() {
			p.enablers = slices.DeleteFunc(p.enablers, func(e *enabler) bool { return e == en })
			s.dropEnabler(en)
		}
		s.unlock()
		return 0, fmt.Errorf("register %q: cannot write the enable bit %d at %#x (%v): %w", a.Name, bit, addr, err, unix.ENOMEM)
	}
	return uint32(idx), nil
}

// link is Register's part under the lock: steps 3 to 7, and the enabler
// made and linked to its process and event, its bit not yet written.
func (f *File) link(p *Process, cred Cred, a RegisterArgs, addr uint64, bit, size uint8, flags uint16) (int, *enabler, error) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	for _, en := range p.enablers {
		if en.addr == addr && en.bit == bit {
			return 0, nil, fmt.Errorf("register: bit %d at %#x is already registered by this process (for %s): %w", bit, addr, en.ev.tp, unix.EADDRINUSE)
		}
	}
	idx, ev, err := f.addCommand(cred, a, flags)
	if err != nil {
		return 0, nil, err
	}
	if p.charge != nil {
		// user_event_enabler_create's allocation.
		if err := p.charge(1, false); err != nil {
			return 0, nil, fmt.Errorf("register %q: %w", a.Name, err)
		}
	}
	en := &enabler{p: p, ev: ev, addr: addr, bit: bit, size: size}
	p.enablers = append([]*enabler{en}, p.enablers...)
	if ev.enablers == nil {
		ev.enablers = make(map[*enabler]struct{})
	}
	ev.enablers[en] = struct{}{}
	ev.refs++
	return idx, en, nil
}

// addCommand is Register's steps 4 to 6: the name read, the command
// parsed and found or created in the registry, the event in this file's
// array. Called with s.mu held.
func (f *File) addCommand(cred Cred, a RegisterArgs, flags uint16) (int, *Event, error) {
	if a.NameFault {
		return 0, nil, fmt.Errorf("register: cannot read the command: %w", unix.EFAULT)
	}
	if len(a.Name) > eventdef.MaxCommandLen {
		return 0, nil, fmt.Errorf("register: command of %d bytes is over %d: %w", len(a.Name), eventdef.MaxCommandLen, unix.EINVAL)
	}
	ev, err := f.s.parseCmd(a.Name, cred, flags)
	if err != nil {
		return 0, nil, fmt.Errorf("register %q: %w", a.Name, err)
	}
	idx, err := f.add(ev)
	f.s.put(ev) // the lookup's reference; the file holds its own now
	if err != nil {
		return 0, nil, fmt.Errorf("register %q: %w", a.Name, err)
	}
	return idx, ev, nil
}

// add is user_events_ref_add: the event's index in this file's array,
// appending it (with a reference) the first time. Called with s.mu held.
func (f *File) add(ev *Event) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, fmt.Errorf("user_events_data is closed: %w", unix.EBADF)
	}
	var cur []*Event
	if p := f.events.Load(); p != nil {
		cur = *p
	}
	for i, e := range cur {
		if e == ev {
			return i, nil
		}
	}
	if f.charge != nil {
		if err := f.charge(1, false); err != nil {
			return 0, err
		}
	}
	// A reader the file's records are handed to has no table entry for
	// the new index: the hand-over ends first.
	f.s.handBackLocked(f)
	// Appending may reuse the backing array: readers of the old slice never
	// look past their own length, so the new element is invisible to them.
	next := append(cur, ev)
	f.events.Store(&next)
	ev.refs++
	for _, w := range f.watches {
		f.watchIndex(w, uint32(len(cur)), ev)
	}
	return len(cur), nil
}

// Unregister is DIAG_IOCSUNREG by process p (user_events_ioctl_unreg): the
// struct's size is checked as for Register (minimum 16), the reserved
// fields must be zero (EINVAL, checked before the copy's own E2BIG/EFAULT
// is reported — with the kernel's zeroed stack copy when the copy stopped
// early), then every enabler of p at exactly (disable_addr, disable_bit) is
// destroyed, none being ENOENT, and the bit is cleared in memory whatever
// the event's state: EFAULT if that write fails, though the enablers are
// gone all the same. Write indices are not touched.
func (f *File) Unregister(p *Process, arg []byte) error {
	raw, copied, err := copyStruct(arg, abi.UserUnregSize)
	if raw == nil {
		return fmt.Errorf("unregister: %w", err)
	}
	if copied && (raw[5] != 0 || raw[6] != 0 || raw[7] != 0) {
		return fmt.Errorf("unregister: reserved fields are not zero: %w", unix.EINVAL)
	}
	if err != nil {
		return fmt.Errorf("unregister: %w", err)
	}
	bit, addr := raw[4], binary.NativeEndian.Uint64(raw[8:])

	s := f.s
	s.mu.Lock()
	found := false
	kept := p.enablers[:0]
	for _, en := range p.enablers {
		if en.addr == addr && en.bit == bit {
			found = true
			s.dropEnabler(en)
			continue
		}
		kept = append(kept, en)
	}
	clear(p.enablers[len(kept):])
	p.enablers = kept
	s.unlock()
	if !found {
		return fmt.Errorf("unregister: no enabler at bit %d of %#x in this process: %w", bit, addr, unix.ENOENT)
	}
	// Outside the lock, as the process's writer: after any write of the
	// enablers just dropped that was under way (enablewrite.go).
	p.own()
	w, b := word(addr, bit)
	err = p.mem.SetBit(w, b, false)
	p.drain()
	if err != nil {
		return fmt.Errorf("unregister: cannot clear bit %d at %#x (%v): %w", bit, addr, err, unix.EFAULT)
	}
	return nil
}

// Delete is DIAG_IOCSDEL on this file; see Subsystem.Delete.
func (f *File) Delete(name string, cred Cred) error { return f.s.Delete(name, cred) }

// Close releases the file: each event in its array loses the file's
// reference, which deletes events nothing else holds.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	p := f.events.Swap(nil)
	ws := f.watches
	f.watches = nil
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	s.handBackLocked(f)
	for _, ev := range *p {
		// Watches not stopped by their owners end with the file.
		for _, w := range ws {
			ev.unwatch(w)
		}
		s.put(ev)
	}
	if f.charge != nil && len(*p) > 0 {
		f.charge(-len(*p), true)
	}
	return nil
}

// Events returns the file's write-index array.
func (f *File) Events() []*Event {
	if p := f.events.Load(); p != nil {
		return append([]*Event(nil), (*p)...)
	}
	return nil
}
