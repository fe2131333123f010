// Package ehslog is a log/slog Handler that writes each record as an
// EventHeader event (package eventheader) on a provider's user_events
// tracepoints (package eventheader/ehprovider), so that a Go program's
// logs reach perf, ftrace, uetrace and the agents that decode the events
// OpenTelemetry's and Microsoft's LinuxTracepoints libraries write — and
// cost about a nanosecond while nobody listens.
//
// # Tracepoints and levels
//
// A Handler registers, when it is made, one tracepoint per EventHeader
// level with its keyword (Options.Keyword, default 1):
// "<provider>_L1K1" … "<provider>_L5K1", as OpenTelemetry's Rust
// user_events exporter does. A record goes to the tracepoint of its
// level, and Enabled is that tracepoint's enable bit: a listener chooses
// the levels it wants by the tracepoints it attaches to (perf record -e
// 'user_events:MyApp_L4K1' takes the Info records; Info and above are
// MyApp_L1K1 to MyApp_L4K1). The slog
// level maps as OpenTelemetry maps it — slog's bridge makes severity
// level+9, the Rust exporter turns severities into EventHeader levels:
//
//	slog level          severity (OTel)   EventHeader level
//	< Info   (< 0)      TRACE, DEBUG      5 Verbose
//	Info..   (0..3)     INFO              4 Information
//	Warn..   (4..7)     WARN              3 Warning
//	Error..  (8..11)    ERROR             2 Error
//	≥ Error+4 (≥ 12)    FATAL             1 Critical
//
// Levels between slog's named ones go down to the band they are in (Info+2
// is Information, Warn-1 Information): a band is the four slog levels from
// a named one up. Options.Level, when set, is a minimum checked after
// the enable bit.
//
// # The event
//
// The event name is Options.EventName, "Log" by default — what
// OpenTelemetry's Rust exporter names its events — not the message: an
// event name is the kind of an event, which decoders and agents group
// and index by, and a message is free text that may be formatted per
// call. Its fields are, in order:
//
//   - "time": the record's time, if not zero, as an RFC 3339 string with
//     nanoseconds and the time's zone offset. EventHeader's time format
//     holds whole seconds only, and a log's time needs the fraction;
//     OpenTelemetry's exporter writes its time as RFC 3339 text too.
//   - "level": slog's name for the level ("INFO", "WARN+2"), finer than the
//     EventHeader level in the header.
//   - "source", with Options.AddSource and a non-zero PC: a struct of
//     "function", "file" and "line", as slog's JSON handler nests them.
//   - "msg": the message.
//   - the attributes of WithAttrs, then the record's, within the groups
//     of WithGroup.
//
// The field names are slog's keys (slog.TimeKey ...). Attribute values
// are resolved (LogValuer) and written in the encoding of their kind:
// String a UTF-8 string; Int64 a signed 64-bit value; Uint64 unsigned;
// Float64 a float; Bool a boolean; Duration signed int64 nanoseconds (as
// slog's JSON handler and OpenTelemetry's slog bridge write it); Time RFC
// 3339 text like the record's time; Group a struct; Any a []byte as
// binary (shown as hex), anything else as its fmt "%+v" text (an error's
// Error(), a Stringer's String()). A group is an EventHeader struct;
// groups with no attributes are omitted, a group with an empty key is
// inlined, and an attribute with an empty key and value is ignored, as
// slog asks of handlers. Strings and binary values beyond 65535 bytes
// are cut there (the format counts them in 16 bits), a string at a UTF-8
// character's start.
//
// The format bounds what a record can hold, and the handler keeps what
// fits rather than lose the record: a struct holds at most 127 fields,
// structs nest 8 deep at most (Microsoft's decoder refuses deeper ones),
// and a NUL cannot be in a name (it becomes '_'; a ';' is kept, and
// starts what EventHeader decoders read as the field's attributes). Attributes beyond a
// group's 127th field — 126th for attributes of WithAttrs, which leaves
// room for a nested group — or in groups nested deeper than 8 are
// dropped, and the event then ends with a field "!DROPPED" (uint64)
// counting them. An event whose field names make more than 65535 bytes
// of metadata, or whose size the backend refuses, is not written: Handle
// returns the error. A consumer may take less than user_events does —
// perf at most 8 KiB of raw sample, ftrace a page — and loses longer
// events, as it loses the kernel's.
//
// # Cost
//
// Enabled is one level-to-tracepoint lookup and the enable word's load,
// with no call (about a nanosecond of CPU).
// WithAttrs and WithGroup encode their attributes and structs once, into
// the metadata and value bytes every record of the returned Handler
// copies; a record encodes only its own attributes. Handle allocates
// nothing for attributes of the kinds above other than Any (whose text
// fmt may allocate for) and without AddSource (the runtime's frame
// lookup allocates).
//
// Options.ReplaceAttr works as slog.HandlerOptions.ReplaceAttr does; with
// it the built-in fields are made and encoded as attributes, a little
// slower (and the level, boxed in an Attr as slog's own handlers box it,
// allocates for levels outside 0..255, Debug's -4 among them). A value it returns of kind Any that is a *slog.Source is
// written as the source struct.
//
// # What it does not do
//
// It does not write activity ids, or write OpenTelemetry's Common Schema
// layout (PartA/PartB/PartC structs) that its log exporters write for
// OpenTelemetry log records; it writes slog's own shape. For that layout,
// bridge slog to OpenTelemetry's Logs SDK (otelslog) and write with
// package eventheader/ehotel: the same tracepoints, levels and event name,
// the Rust exporter's fields. It does not
// register tracepoints for other keywords: one Handler, one keyword.
package ehslog
