package perfdata

import (
	"fmt"
	"strconv"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/tracefmt"
)

// An Event is one event of a recording, as perf's evsel is: its attr, its
// name, and the tracefs format that lays out its tracepoint records. A
// Session makes one of every attr of its file; NewEvent makes one of a
// name and a format, for samples taken live.
//
// An Event is not changed once made, but for Lost, which its Session
// counts up.
type Event struct {
	// System and Name are the event's: "user_events" and "x". An attr's
	// name (HEADER_EVENT_DESC, or for a tracepoint the name in its format)
	// is split at its first colon; an attr without one is
	// "type<N>:config<N>". The attr's name comes first: the tracing data
	// of uetrace record names a multi-format event "name_<hexid>", which
	// perf can parse, where the event is "name.<hexid>".
	System, Name string
	// Attr is the event's attr in its file; zero for an event of NewEvent.
	Attr Attr
	// Format lays out the event's records: its tracefs format, from the
	// file's tracing data (for a tracepoint attr, the format whose id is
	// its Config) or given to NewEvent. Nil when there is none: the
	// records cannot be decoded.
	Format *tracefmt.Format
	// Index is the event's place in its Session's Events.
	Index int
	// Lost counts the records of the event the recording lost
	// (PERF_RECORD_LOST of its sample ids), as far as its Session has read.
	Lost uint64

	full string // "system:name", or the name alone without a system
	// For an EventHeader tracepoint: where the EventHeader event starts in
	// a record, and the tracepoint name it is decoded by, parsed once;
	// ehOff is -1 for other events.
	ehOff int
	ehTP  eventheader.TracepointName
}

// NewEvent makes the event system:name whose tracefs format is format
// (events/<system>/<name>/format). A format that does not parse is an
// error; with format nil the event's records cannot be decoded.
func NewEvent(system, name string, format []byte) (*Event, error) {
	if format == nil {
		return newEvent(system, name, nil), nil
	}
	f, err := tracefmt.Parse(format)
	if err != nil {
		return nil, fmt.Errorf("format of %s: %w", fullName(system, name), err)
	}
	f.System = system
	return newEvent(system, name, f), nil
}

// newEvent makes the event system:name of format f (nil: none), and finds
// out whether it is an EventHeader tracepoint.
func newEvent(system, name string, f *tracefmt.Format) *Event {
	ev := &Event{System: system, Name: name, Format: f, full: fullName(system, name), ehOff: -1}
	if f == nil {
		return ev
	}
	if tp, ok := eventheader.FromFormat(name, len(f.Fields), func(i int) string { return f.Fields[i].Name }); ok {
		// A name that does not parse decodes no event: the records go by
		// the format.
		if parsed, err := eventheader.ParseTracepointName(tp); err == nil {
			ev.ehOff, ev.ehTP = f.Fields[0].Offset, parsed
		}
	}
	return ev
}

// attrEvent makes the event of attr a, whose format, if a is a
// tracepoint, is in formats by its tracefs id.
func attrEvent(a *Attr, formats map[uint64]*tracefmt.Format) *Event {
	var f *tracefmt.Format
	if a.Type == TypeTracepoint {
		f = formats[a.Config]
	}
	var system, name string
	switch {
	case a.Name != "":
		system, name = splitName(a.Name)
	case f != nil:
		system, name = f.System, f.Name
	default:
		system, name = "type"+strconv.FormatUint(uint64(a.Type), 10), "config"+strconv.FormatUint(a.Config, 10)
	}
	ev := newEvent(system, name, f)
	ev.Attr = *a
	return ev
}

func fullName(system, name string) string {
	if system == "" {
		return name
	}
	return system + ":" + name
}

// splitName splits "system:name" at its first colon; a name without one
// has no system.
func splitName(full string) (system, name string) {
	for i := 0; i < len(full); i++ {
		if full[i] == ':' {
			return full[:i], full[i+1:]
		}
	}
	return "", full
}

// String is the event's full name: "system:name", or the name alone when
// it has no system.
func (e *Event) String() string { return e.full }

// IsEventHeader reports whether the event is an EventHeader tracepoint
// (package eventheader): its format holds only the EventHeader header
// and its name is "<provider>_L<n>K<hex>…" (eventheader.FromFormat).
func (e *Event) IsEventHeader() bool { return e.ehOff >= 0 }

// EventHeader decodes raw, a record of the event, as the EventHeader
// event it holds. ok is false when the event is no EventHeader tracepoint
// or the record does not decode whole — header, metadata and every field
// — and should be shown by its format instead. It does not allocate.
func (e *Event) EventHeader(raw []byte) (ev eventheader.Event, ok bool) {
	ev, ok = e.EventHeaderHead(raw)
	if !ok {
		return ev, false
	}
	// Check the whole iteration first: a consumer writes the fields as it
	// iterates, and cannot take back what it wrote when one fails.
	f := ev.Fields()
	for f.Next() {
	}
	return ev, f.Err() == nil
}

// EventHeaderHead is EventHeader without reading the fields first: the
// header and metadata decoded, the fields to be checked as they are read
// (Fields' Err). It is for a consumer that reads them once and can take
// back what it wrote when one fails, as uetrace export does; it does not
// allocate.
func (e *Event) EventHeaderHead(raw []byte) (ev eventheader.Event, ok bool) {
	if e.ehOff < 0 || e.ehOff > len(raw) {
		return ev, false
	}
	ev, err := eventheader.DecodeFor(e.ehTP, raw[e.ehOff:])
	return ev, err == nil
}
