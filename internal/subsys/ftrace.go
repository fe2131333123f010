package subsys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SetFtrace registers (on) or unregisters the ftrace probe of ev, as
// writing "1" or "0" to events/<system>/<name>/enable does
// (event_enable_write → ftrace_event_enable_disable → user_event_reg).
// Registering takes an event reference, sets StatusFtrace and writes every
// enabler; enabling an enabled event changes nothing. Like the enable file
// it first expands the trace buffer if it was never sized, which fails with
// EBUSY while trace is open. A deleted event is ENODEV.
func (s *Subsystem) SetFtrace(ev *Event, on bool) error {
	s.syncProcesses(eventScope(ev))
	if err := s.trace.ring.Expand(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.unlock()
	if ev.deleted {
		return fmt.Errorf("event %s was deleted: %w", ev.tp, unix.ENODEV)
	}
	s.setFtraceLocked(ev, on)
	return nil
}

func (s *Subsystem) setFtraceLocked(ev *Event, on bool) {
	if ev.deleted || ev.ftrace.Load() == on {
		return
	}
	s.changing(ev)
	ev.ftrace.Store(on)
	if on {
		ev.wasEnabled = true
		ev.refs++
		s.setStatus(ev)
		return
	}
	s.setStatus(ev)
	s.put(ev)
}

// Ftrace reports whether the event's ftrace probe is registered: what its
// enable file reads as.
func (ev *Event) Ftrace() bool { return ev.ftrace.Load() }
