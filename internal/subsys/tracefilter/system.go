package tracefilter

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// DefaultSystemText is what events/<system>/filter shows when it holds no
// error (DEFAULT_SYS_FILTER_MESSAGE, without the final newline).
const DefaultSystemText = "### global filter ###\n" +
	"# Use this to set filters for multiple events.\n" +
	"# Only events with the given fields will be affected.\n" +
	"# If no events are modified, an error message will be displayed here"

// SystemState is the text of a system's filter file; the zero value shows
// DefaultSystemText.
type SystemState struct {
	Text string
}

// AppendSystemFile appends what a read of events/<system>/filter returns
// (print_subsystem_event_filter).
func (s *SystemState) AppendSystemFile(dst []byte) []byte {
	if s.Text == "" {
		dst = append(dst, DefaultSystemText...)
		return append(dst, '\n')
	}
	if len(s.Text)+1 >= traceSeqBufferSize {
		return dst
	}
	dst = append(dst, s.Text...)
	return append(dst, '\n')
}

// WriteSystem is a write of buf to events/<system>/filter
// (apply_subsystem_event_filter) for a system whose events are evs, whose
// filters are olds and whose filter file is old. It returns the new
// states, the error_log entries the write adds, in order, and the write's
// error.
//
// As Linux 6.12 does it: "0" removes every event's filter, the ones set
// through the events' own files too. Any other text is compiled for every
// event of the system and replaces each one's filter; an event whose fields
// do not fit it gets the text with the error "Couldn't find or set field in
// one of a subsystem's events" (caret at 0) and filters nothing, and an
// error_log entry is added for it. The write itself succeeds, and the
// system file keeps showing DefaultSystemText. A system without events is
// ENODEV; a write of PageSize bytes or more EINVAL.
func WriteSystem(evs []*eventdef.Event, olds []State, old SystemState, buf []byte, opts Options) (SystemState, []State, []*Error, error) {
	if len(buf) >= PageSize {
		return old, olds, nil, unix.EINVAL
	}
	if len(evs) == 0 {
		return old, olds, nil, unix.ENODEV
	}
	s := string(buf)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = stripTrailing(s)
	states := make([]State, len(evs))
	if skipSpaces(s) == "0" {
		return SystemState{}, states, nil, nil
	}
	var logs []*Error
	for i, ev := range evs {
		f, err := Compile(ev, s, opts)
		if err != nil {
			e := &Error{Errno: err.(*Error).Errno, Code: ErrBadSubsysFilter, Pos: 0, Filter: s}
			states[i] = State{Text: e.errorText()}
			logs = append(logs, e)
			continue
		}
		states[i] = State{Text: s, Filter: f}
	}
	return SystemState{}, states, logs, nil
}
