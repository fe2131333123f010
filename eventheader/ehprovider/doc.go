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
//     Define4, generic in their fields' Go types, and written with one
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
// Typed fields are Go's integers, floats, bool, string and []byte, and
// Hex32, Hex64, Errno, PID, UUID and time.Time for the formats decoders
// show them in (see Value).
//
// It does not do activity ids for typed events (use a Builder and
// SetActivityID), arrays or structs in typed events, nor the C library's
// static, link-time list of a provider's events: a tracepoint exists once
// something has asked for it. Writers sharing a Builder must serialize.
package ehprovider
