package tracefilter

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// State is an event's filter as its tracefs filter file holds it
// (struct event_filter and EVENT_FILE_FL_FILTERED): the text it shows and,
// when the filter is in force, the compiled filter. The zero State is no
// filter ("none").
type State struct {
	// Text is the filter string, or after a refused write the string with
	// the kernel's error text; "" when there is no filter.
	Text string
	// Filter is the filter in force; nil when there is none or the last
	// write was refused (the kernel keeps the text but disables the
	// filter, so every record passes).
	Filter *Filter
}

// AppendFile appends what a read of the filter file returns
// (event_filter_read, print_event_filter): the text and a newline, or
// "none\n"; a text too long for the kernel's trace_seq reads as nothing.
func (s *State) AppendFile(dst []byte) []byte {
	if s.Text == "" {
		return append(dst, "none\n"...)
	}
	if len(s.Text)+1 >= traceSeqBufferSize {
		return dst
	}
	dst = append(dst, s.Text...)
	return append(dst, '\n')
}

// Write is a write of buf to the event's filter file (event_filter_write,
// apply_event_filter) applied to the state old: it returns the new state
// and the write's error. A write of PageSize bytes or more is EINVAL and
// changes nothing. The text is cut at its first NUL and loses its trailing
// white space; "0" (white space around it allowed) removes the filter. Any
// other text replaces the filter, even when it is refused: then the new
// state keeps the text with its error and filters nothing, and the error
// is an *Error (see Error.AppendErrorLog for error_log's entry).
func Write(ev *eventdef.Event, old State, buf []byte, opts Options) (State, error) {
	if len(buf) >= PageSize {
		return old, unix.EINVAL
	}
	s := string(buf)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = stripTrailing(s)
	if skipSpaces(s) == "0" {
		return State{}, nil
	}
	f, err := Compile(ev, s, opts)
	if err != nil {
		e := err.(*Error)
		return State{Text: e.errorText()}, err
	}
	return State{Text: s, Filter: f}, nil
}
