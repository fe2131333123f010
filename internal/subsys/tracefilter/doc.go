// Package tracefilter is the kernel's event filter language — what
// events/<system>/<event>/filter, events/<system>/filter and
// PERF_EVENT_IOC_SET_FILTER accept — exactly as Linux 6.12 has it
// (kernel/trace/trace_events_filter.c), for user events.
//
// A filter is terms joined by && and || (&& binds tighter), each term
// optionally negated with ! and grouped with parentheses:
//
//	field OP value
//
// with OP one of == != < <= > >= & (integers) or == != ~ (strings, with
// '~' a glob: "x*", "*x", "*x*", or any of * ? [...] \ for a full glob, a
// leading '!' inverting it). Integers are read with kstrtoull/kstrtoll in
// base 0 (decimal, 0x hex, 0 octal); strings are quoted with " or '. The
// fields are the event's own (the last declared wins when two share a
// name), the generic CPU, cpu, common_cpu (the writer's CPU), COMM, comm
// (its task name), stacktrace (never true), and the common fields
// common_type, common_flags, common_preempt_count and common_pid. Integer
// fields and CPU also take CPU lists, "CPU & CPUS{0-3,8}", with
// cpulist_parse's syntax; ".function" terms need the kernel's symbols
// (Options.Kallsyms).
//
// Compile parses a filter for an event into a Filter, the kernel's branch
// program (predicate_parse), whose Match tests a record without
// allocating. Write and WriteSystem are what writes to the filter files
// do: "0" clears, a refused filter replaces the old one with its error
// text and filters nothing, and State.AppendFile and
// SystemState.AppendSystemFile give the files' text. A refused filter is an
// *Error with the kernel's errno — EINVAL mostly, but the kernel passes
// EPERM, ENOENT and ESRCH through for some mistakes — its FILT_ERR code and
// position: the filter file shows them as a caret line and
// "parse_error: <text>", error_log as Error.AppendErrorLog prints.
//
// Every behaviour is checked against a golden captured on Linux 6.12.117
// (testdata/kernel-filters.json, by kernel/cmd/filtergolden). Where the
// package knowingly differs from the kernel:
//
//   - Bytes past the end of the record read as NUL. The kernel reads on
//     into whatever follows the record in its buffer: only a __data_loc or
//     __rel_loc string of length 0 whose offset points past the record
//     (which the kernel's validator accepts) reaches there.
//   - ".function" terms resolve names and addresses through
//     Options.Kallsyms; without it every such term is refused with
//     "Function not found", where the kernel would look in its symbols.
//   - The kernel refuses with ENOMEM what it cannot allocate; a filter
//     here is never refused for memory.
//
// The package is not the filter files themselves (package subsys keeps
// the states, applies them to records and serves the files) and does no
// I/O.
package tracefilter
