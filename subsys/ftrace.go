package subsys

// SetFtrace registers (on) or unregisters the ftrace probe of ev, as
// writing "1" or "0" to events/<system>/<name>/enable does
// (ftrace_event_enable_disable → user_event_reg). Registering takes an event
// reference, sets StatusFtrace and writes every enabler; enabling an
// enabled event changes nothing.
func (s *Subsystem) SetFtrace(ev *Event, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFtraceLocked(ev, on)
}

func (s *Subsystem) setFtraceLocked(ev *Event, on bool) {
	if ev.deleted || ev.ftrace.Load() == on {
		return
	}
	ev.ftrace.Store(on)
	if on {
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
