// Package eventdef is the model of one Linux user event: how the kernel parses
// a user_events command, where each field sits in a record, and how tracefs
// prints the event back — byte for byte as Linux 6.12 does.
//
// A command is what a program passes to DIAG_IOCSREG (or writes after "u:" to
// dynamic_events):
//
//	name[:flags] [field1[;field2...]]
//
// [Parse] turns it into an [Event] with the kernel's grammar and errno,
// quirks included. From an Event the package derives the tracefs text — the
// events/<system>/<name>/format file ([Event.AppendFormat]), the print fmt
// ([Event.PrintFmt]) and the dynamic_events line ([Event.DynamicEventsLine]) —
// decides whether another command names the same event ([Event.MatchArgs],
// [Event.MatchDeleteArgs]), validates a written record ([Event.Validate]),
// builds payloads ([Encoder]) and decodes and prints records ([Event.Decode],
// [Event.AppendTrace]) the way the generic ftrace printer does.
//
// eventdef is not the registry of events, reference counting, enable bits or
// any I/O: that is package subsys. It knows one event at a time and has no
// state beyond it, so every function here is safe for concurrent use on a
// shared *Event.
//
// Records and payloads are in the machine's native byte order, as the kernel
// writes them. A record is the 8-byte common header (struct trace_entry)
// followed by the payload a program wrote after its 4-byte write index.
//
// Each behaviour cites the kernel function it follows (kernel/trace/
// trace_events_user.c unless named otherwise). Where eventdef knowingly
// differs from the kernel it says so at the function; the differences are:
//
//   - Validate treats the byte before the record as 0. The kernel reads the
//     ring buffer's event header there when a zero-length __data_loc string
//     points at offset 0; its value is not defined by any interface.
//   - AppendTrace bounds fields by the record's true length. The kernel uses
//     the ring buffer's 4-byte-aligned event length; for a record that passed
//     Validate the two agree, because no field can reach the padding.
//   - The kernel's trace_seq holds one page; a line longer than that is cut
//     by the kernel. AppendTrace never cuts.
package eventdef
