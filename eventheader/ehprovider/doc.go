// Package ehprovider writes EventHeader events (package eventheader) from
// Go, as Microsoft's LinuxTracepoints C library (eventheader-tracepoint:
// ehd_provider, eventheader_tracepoint) does: a Provider names a source of
// events; each level and keyword of it is a tracepoint
// "<provider>_L<level>K<keyword>[G<group>]", registered through package
// userevents — on the kernel, the uetrace daemon or in-process — when it is
// first asked for; and each tracepoint's enable word tells whether anyone
// listens to events of that level and keyword.
//
// Two ways to write, both enabled-first — nothing is built while the
// tracepoint is disabled — and both allocation-free once warmed up:
//
//   - events known at compile time are defined once with Define0 ...
//     Define6, generic in their fields' Go types, and written with one
//     call: their header and metadata are built at definition, a write
//     appends only the values;
//   - dynamic events are built with a Builder (an eventheader.Builder and
//     its buffer) between Tracepoint.Enabled and Tracepoint.Write.
//
// Tracepoint.Enabled is the userevents enable word's load and bit test;
// Provider.Enabled(level, keyword) asks the same of a tracepoint found by
// level and keyword without a lock, and without registering it.
//
// A write is one userevents Event.Write: the write index and the event in
// one writev on the kernel, the daemon's ring or the in-process subsystem.
//
// Typed events (see Value) have fields of Go's integers, floats, bool,
// string and []byte, and Hex32, Hex64, Errno, PID, UUID and time.Time for
// the formats decoders show them in; a slice of any of these but byte is
// a variable-length array ([]uint32, []string, []time.Time ...; []byte is
// counted binary). Strings, binary and arrays beyond the format's 65535
// are cut there. WithStruct groups consecutive fields in a struct (nested
// structs too), WithOpcode, WithID and WithTag set the header, and
// WriteActivity writes an event with the activity id extension — an
// activity id and the related (parent) id, as Builder.SetActivityID does
// — e.g. for events of opcode ActivityStart and ActivityStop. Each typed
// write's bytes are the Builder's for the same fields and values (a
// property test holds every type and arity to it).
//
// It does not do, for typed events: arrays of structs, constant-length
// arrays, arrays of uint8 (a []byte is binary), field tags, formats other
// than each type's (an IP address or port, a JSON string, UTF-16 and
// zero-terminated strings), more than six fields — all the Builder's —
// nor named Go types by their underlying type (convert them). Nor does
// it do the C library's static, link-time list of a provider's events: a
// tracepoint exists once something has asked for it. Writers sharing a
// Builder must serialize.
package ehprovider
