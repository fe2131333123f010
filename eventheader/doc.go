// Package eventheader is the EventHeader event format of Microsoft's
// LinuxTracepoints (eventheader.h): the format most user_events in the
// wild are written in, by the C, C++ and Rust LinuxTracepoints libraries
// and OpenTelemetry's user_events exporters.
//
// An EventHeader event is written to a tracepoint shared by every event of
// a provider with the same level and keyword, named
// "<provider>_L<level>K<keyword>[options]" (TracepointName; the G option
// names a provider group) and registered with the command
// "<name> "+CommandTypes. Its data is an 8-byte Header, extension blocks
// (the metadata: the event name and its fields' names, encodings, formats
// and tags; the activity id and related activity id), then the fields'
// values: fixed-size values of 1 to 16 bytes, NUL-terminated and counted
// strings of 8-, 16- and 32-bit characters, counted binary, structs, and
// constant- and variable-length arrays of any of them.
//
// What it does:
//   - parses, validates and formats tracepoint names and the register command;
//   - Decode: the bytes of an event (as written to user_events_data, without
//     the write index) and its tracepoint name → the event name, the
//     metadata (level, keyword, opcode, id, version, tag, activity ids) and
//     Fields, an iterator over the fields (name, encoding, format, tag,
//     value bytes, array counts, struct nesting) that does not allocate;
//     FieldsDefs, the same keeping each layout's field definitions (Defs)
//     for the next events of it, for a reader of millions of events of a
//     few layouts;
//   - Event.AppendJSON / Item.AppendJSON: the values as JSON the way
//     Microsoft's decoder (EventFormatter) prints them;
//   - Builder: writes an event (header, extensions, metadata, values) into
//     a caller's buffer without allocating once warmed up.
//
// The decoder trusts nothing in the bytes: sizes are checked before every
// read, nesting is bounded (MaxDepth) and so is the work of one event
// (MaxItems), and a fuzz target holds it to that.
//
// It is proved on the reference's own output (package eventheadertest's
// testdata, with its licence): for each of its 374 events the decoder's JSON is
// Microsoft's byte for byte, and the builder, fed the decoded event,
// writes the event's bytes exactly.
//
// What it does not do: providers — registering their tracepoints lazily
// through package userevents, checking enablement per level and keyword
// before building — and a typed writer for events known at compile time
// are package eventheader/ehprovider, above userevents; the report
// command's EventHeader output is package report's. It never writes
// big-endian or 32-bit-pointer events, though it decodes them.
package eventheader
