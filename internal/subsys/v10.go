package subsys

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The first ABI of user_events, in the v10 series that was merged for
// Linux 5.18 ("user_events: Enable user processes to create and write to
// trace events", January 2022) and marked BROKEN before that release: a
// process mapped user_events_status — a page with one byte per event, its
// status bits — and DIAG_IOCSREG took a 24-byte struct user_reg:
//
//	offset  size  field
//	     0     4  size          in: 24
//	     8     8  name_args     in: the command
//	    16     4  status_index  out: the event's byte in the page (never 0)
//	    20     4  write_index   out
//
// 5.19 replaced the byte with a bit, 6.4 the page with enable_addr, and
// dropped BROKEN: no Linux release ever enabled this ABI. uetrace serves it
// only where asked to (uetrace run --abi v10), beside today's, which it
// never changes: a struct of 24 bytes is EINVAL there.

// V10RegSize is the v10 struct user_reg's size.
const V10RegSize = 24

// V10StatusPage is the v10 status page's size: its events' bytes
// (MAX_EVENTS, one page on every architecture uetrace serves).
const V10StatusPage = pageSize

// StatusIndex is the event's byte in a v10 status page: derived from its
// type ID, which the subsystem hands out from Options.LastID down and
// reuses once freed, as the v10 kernel reused a freed index — 1 for the
// first event. An event past V10StatusPage has none (0).
func (ev *Event) StatusIndex() int {
	i := ev.s.opts.LastID + 1 - ev.id
	if i <= 0 || i >= V10StatusPage {
		return 0
	}
	return i
}

// RegisterV10 is DIAG_IOCSREG of the v10 ABI on this file: the struct's
// size checked as copy_struct_from_user checks it (unreadable EFAULT, over
// a page E2BIG, under 24 EINVAL, non-zero bytes past 24 E2BIG), the name
// and the command as Register's steps 4 to 6, and no enabler: the process
// reads the event's state in its status page. An event whose status index
// does not fit the page is EMFILE, the v10 kernel's answer when its page
// was full; it stays in the file's array, as any event a registration
// failed after adding. It returns the write index and the status index.
func (f *File) RegisterV10(cred Cred, a RegisterArgs) (writeIndex, statusIndex uint32, err error) {
	if _, _, err := copyStruct(a.Reg, V10RegSize); err != nil {
		return 0, 0, fmt.Errorf("register: %w", err)
	}
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	idx, ev, err := f.addCommand(cred, a, 0)
	if err != nil {
		return 0, 0, err
	}
	si := ev.StatusIndex()
	if si == 0 {
		return 0, 0, fmt.Errorf("register %q: the event's id %d has no byte in the status page (%d events at most): %w", a.Name, ev.id, V10StatusPage-1, unix.EMFILE)
	}
	return uint32(idx), uint32(si), nil
}

// A statusWatch is told of every event's status by its status index.
type statusWatch struct {
	fn func(statusIndex int, status uint32)
}

// WatchStatus calls fn with every event's status index and status — at
// once for the events there are, and at every change after — until stop:
// a v10 status page's writer. fn is called with the subsystem's lock held,
// and must not block or call into the Subsystem.
func (s *Subsystem) WatchStatus(fn func(statusIndex int, status uint32)) (stop func()) {
	w := &statusWatch{fn: fn}
	s.mu.Lock()
	s.statusWatches = append(s.statusWatches, w)
	s.eachEvent(func(ev *Event) {
		if i := ev.StatusIndex(); i != 0 {
			fn(i, ev.status.Load())
		}
	})
	s.unlock()
	return func() {
		s.mu.Lock()
		s.statusWatches = slices.DeleteFunc(s.statusWatches, func(x *statusWatch) bool { return x == w })
		s.unlock()
	}
}

// notifyStatusWatches tells the v10 status pages ev's status. Called with
// s.mu held.
func (s *Subsystem) notifyStatusWatches(ev *Event, status uint32) {
	if len(s.statusWatches) == 0 {
		return
	}
	if i := ev.StatusIndex(); i != 0 {
		for _, w := range s.statusWatches {
			w.fn(i, status)
		}
	}
}
