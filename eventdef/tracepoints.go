package eventdef

import "strings"

// Tracepoint is an event as available_events names it: "system:name".
type Tracepoint struct {
	System, Name string
}

// ParseAvailableEvents reads available_events: a "system:name" line per
// event (show_event: "%s:%s\n"). It is the complete list — an events/
// directory's listing is not: eventfs stops at a name no directory entry
// can have (see PathName). A system's name has no ':', an event's name no
// whitespace; a line without a ':' is skipped.
func ParseAvailableEvents(text []byte) []Tracepoint {
	var out []Tracepoint
	for line := range strings.SplitSeq(string(text), "\n") {
		sys, name, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		out = append(out, Tracepoint{sys, name})
	}
	return out
}

// PathName reports whether an event's name can be the last component of
// its tracefs path, events/<system>/<name>: DIAG_IOCSREG accepts names no
// path can reach — empty (" u32 a"), with a '/', "." or ".." — whose
// enable, format and id files no tool can open.
func PathName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.Contains(name, "/")
}
