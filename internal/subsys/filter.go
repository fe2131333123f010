package subsys

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/subsys/tracefilter"
)

// Event filters (package tracefilter) as tracefs has them: each event's
// events/<system>/<event>/filter, each system's events/<system>/filter,
// and error_log, where refused filters are reported. The ftrace filter of
// an event is tested on the record assembled by the write path, before it
// is copied into the trace buffer; a perf-like session has its own filter
// per event (Session.SetFilter), tested before the record is copied into
// the session's buffer or ring.

// FileErrorLog is tracefs's error_log: the last errors of filter writes.
const FileErrorLog = "error_log"

// maxErrLog is TRACING_LOG_ERRS_MAX: error_log keeps the last 8 errors.
const maxErrLog = 8

type errLogEntry struct {
	ts  uint64
	err *tracefilter.Error
}

// filterOptions are the options filters are compiled with: the trace
// buffer's CPUs stand for nr_cpu_ids.
func (s *Subsystem) filterOptions() tracefilter.Options {
	return tracefilter.Options{NrCPUs: s.opts.NumCPU}
}

// logErrLocked adds an entry to error_log (tracing_log_err). Called with
// s.mu held.
func (s *Subsystem) logErrLocked(e *tracefilter.Error) {
	ent := errLogEntry{ts: s.opts.Clock(), err: e}
	if len(s.errLog) >= maxErrLog {
		copy(s.errLog, s.errLog[1:])
		s.errLog[len(s.errLog)-1] = ent
		return
	}
	s.errLog = append(s.errLog, ent)
}

// AppendErrorLog appends error_log's text (tracing_err_log_seq_show).
func (s *Subsystem) AppendErrorLog(dst []byte) []byte {
	s.mu.Lock()
	defer s.unlock()
	for _, ent := range s.errLog {
		dst = ent.err.AppendErrorLog(dst, ent.ts)
	}
	return dst
}

// ClearErrorLog empties error_log, as an O_TRUNC open of it does.
func (s *Subsystem) ClearErrorLog() {
	s.mu.Lock()
	s.errLog = nil
	s.unlock()
}

// AppendFilter appends what events/<system>/<event>/filter reads.
func (ev *Event) AppendFilter(dst []byte) []byte {
	ev.s.mu.Lock()
	defer ev.s.unlock()
	return ev.filterState.AppendFile(dst)
}

// SetFilter is a write of text to the event's filter file
// (apply_event_filter): "0" clears the filter; a filter the kernel would
// refuse is a *tracefilter.Error (errno as Linux's), replaces the filter
// with its error text, stops filtering and is added to error_log. A write
// to a deleted event is ENODEV.
func (ev *Event) SetFilter(text []byte) error {
	s := ev.s
	s.mu.Lock()
	defer s.unlock()
	if ev.deleted {
		return fmt.Errorf("event %s was deleted: %w", ev.tp, unix.ENODEV)
	}
	st, err := tracefilter.Write(ev.def, ev.filterState, text, s.filterOptions())
	ev.filterState = st
	ev.filter.Store(st.Filter)
	var fe *tracefilter.Error
	if errors.As(err, &fe) {
		s.logErrLocked(fe)
	}
	return err
}

// AppendSystemFilter appends what events/<system>/filter reads.
func (s *Subsystem) AppendSystemFilter(dst []byte, system string) []byte {
	s.mu.Lock()
	defer s.unlock()
	st := s.sysFilters[system]
	return st.AppendSystemFile(dst)
}

// SetSystemFilter is a write of text to events/<system>/filter
// (apply_subsystem_event_filter; see tracefilter.WriteSystem): every event
// of the system gets the filter, or its error; "0" clears every event's
// filter. A system without events is ENODEV.
func (s *Subsystem) SetSystemFilter(system string, text []byte) error {
	s.mu.Lock()
	defer s.unlock()
	// tr->events is kept newest first: the events are tried, and their
	// errors logged, in that order.
	var evs []*Event
	for i := len(s.created) - 1; i >= 0; i-- {
		if ev := s.created[i]; ev.System() == system && !ev.deleted {
			evs = append(evs, ev)
		}
	}
	defs := make([]*eventdef.Event, len(evs))
	olds := make([]tracefilter.State, len(evs))
	for i, ev := range evs {
		defs[i] = ev.def
		olds[i] = ev.filterState
	}
	sys, states, logs, err := tracefilter.WriteSystem(defs, olds, s.sysFilters[system], text, s.filterOptions())
	if s.sysFilters == nil {
		s.sysFilters = map[string]tracefilter.SystemState{}
	}
	s.sysFilters[system] = sys
	for i, ev := range evs {
		ev.filterState = states[i]
		ev.filter.Store(states[i].Filter)
	}
	for _, l := range logs {
		s.logErrLocked(l)
	}
	return err
}

// SetFilter gives the session a filter for ev, as PERF_EVENT_IOC_SET_FILTER
// does for a perf event (ftrace_profile_set_filter): only records that pass
// it are delivered to this session; other consumers are not affected. The
// text is compiled as the ioctl does (tracefilter.CompilePerf: no "0" to
// clear, nothing in error_log). The session must be attached to ev
// (EINVAL), and an event's filter is set once: a second is EEXIST, as for
// a perf event; detaching drops it.
func (ss *Session) SetFilter(ev *Event, text string) error {
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	if ss.closed {
		return ErrClosed
	}
	if _, ok := ss.attached[ev]; !ok {
		return fmt.Errorf("set filter: the session is not attached to %s:%s: %w", ev.System(), ev.tp, unix.EINVAL)
	}
	old := ss.filters.Load()
	if old != nil && (*old)[ev] != nil {
		return fmt.Errorf("set filter: %s:%s already has a filter in this session: %w", ev.System(), ev.tp, unix.EEXIST)
	}
	flt, err := tracefilter.CompilePerf(ev.def, text, s.filterOptions())
	if err != nil {
		return err
	}
	m := make(map[*Event]*tracefilter.Filter, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[ev] = flt
	s.changing(ev)
	ss.filters.Store(&m)
	return nil
}

// dropFilterLocked removes the session's filter of ev. Called with s.mu
// held.
func (ss *Session) dropFilterLocked(ev *Event) {
	old := ss.filters.Load()
	if old == nil || (*old)[ev] == nil {
		return
	}
	m := make(map[*Event]*tracefilter.Filter, len(*old))
	for k, v := range *old {
		if k != ev {
			m[k] = v
		}
	}
	ss.filters.Store(&m)
}
