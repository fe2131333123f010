// Package subsys is the kernel side of Linux user_events, in user space: the
// registry of events with the kernel's lookup rules and reference counts,
// PERSIST and MULTI_FORMAT, per-process enablers whose bits it sets and
// clears in the process's memory, the write path with its validation, the
// consumers that make an event "enabled" (an ftrace-like trace buffer and
// perf-like sessions), and the tracefs files user_events shows
// (user_events_status, dynamic_events, events/*/*/{enable,filter,format,id},
// events/*/filter, error_log, trace, trace_pipe, ...) and those trace-cmd
// reads besides (per_cpu/cpuN/trace_pipe_raw, events/header_page,
// trace_clock, saved_cmdlines, ...: files.go, options.go, raw.go). Event filters are
// package tracefilter's, applied where the kernel applies them: the ftrace
// filter of an event before its record is copied into the trace buffer, a
// session's own filter per event (Session.SetFilter, as
// PERF_EVENT_IOC_SET_FILTER) before the copy into the session. It behaves as Linux 6.12 does, errno for errno and byte
// for byte; package eventdef supplies the event model.
//
// subsys does no I/O of its own. A [Subsystem] is one user_events group (the
// kernel has exactly one). A [File] is one open user_events_data; a
// [Process] is one address space (the kernel's user_event_mm), reached
// through a [Memory] the caller supplies — the daemon's is a memfd shared
// with the client, tests use a byte slice. Callers' privileges come as a
// [Cred]. A [Session] buffers its records in memory for Session.Read, or
// hands them to a reader in another process through shared memory, as the
// kernel hands perf its records: one stream per CPU index of finished
// perf.data records the reader writes to its file as they lie
// ([Session.DeliverToStreams]).
//
// Records reach the consumers from a write (File.Writev, as write(2)) or
// from a write that already happened, still in a client's ring
// (File.Deliver): then the payload is copied once, straight into the
// space its only consumer
// reserved — the trace buffer's page, a session's stream — and validated
// there, as user_event_ftrace and perf_output_begin do; a record for
// several consumers or a filter is assembled once in a scratch copy,
// validated and filtered there, and copied into each consumer that takes
// it (trace_buffered_event, perf_trace_buf).
//
// # Differences from Linux 6.12.117
//
//   - Teardown is synchronous. The kernel drops an enabler's event reference
//     after an RCU grace period and destroys an event whose last reference
//     went from a work item, so for a few milliseconds after
//     DIAG_IOCSUNREG or close a delete can see EBUSY and a re-register with
//     other fields EADDRINUSE. Here the reference goes, and the event with
//     it, before the call returns, as in vanilla 6.12.
//   - A failed update of an enable bit after registration is not retried
//     from a worker: the kernel faults the page in asynchronously and
//     retries; a Memory here either takes the write or never will. The
//     failure is counted in Stats.
//   - Enable bits are written outside the subsystem's lock, where the
//     kernel writes present pages under event_mutex: a Memory may block
//     (another process's memory through process_vm_writev waits for its
//     faults), and no caller's memory may hold everyone's enables and
//     registrations. A process whose memory another goroutine is writing
//     gets its bits after the enable returns, as a faulting page gets them
//     from the kernel's worker (enablewrite.go).
//   - Type IDs go down from 32767 (Options.LastID), not up from the
//     kernel's built-in types. The kernel's IDA hands out trace event
//     types upwards from __TRACE_LAST_TYPE+1 (alloc_trace_event_type), so
//     a kernel's tracepoints hold the bottom of the u16 range (a Debian
//     kernel with its modules: about 2300; the 6.12 test kernel: 407).
//     Under uetrace run the IDs of this tree sit beside the host kernel's
//     own in the same process: a program that reads
//     events/user_events/x/id and opens it with perf_event_open (as
//     perf-collect does) must get a type no kernel knows (the kernel says
//     EINVAL; uetrace run's guard, package internal/runguard, EOPNOTSUPP
//     with words), never some syscalls:sys_exit_sync's records under x's
//     name. So IDs are the kernel's lowest-free IDA mirrored: the
//     highest free one of Options.FirstID..LastID, and a freed ID is the
//     next one reused, as in the kernel. By default that is
//     16384..32767 (DefaultFirstID, DefaultLastID): KernelShark keeps an
//     event's id in an int16_t (struct kshark_entry), so an id above
//     32767 reads as negative there and its records show no event name
//     and no fields; below 16384 the host kernel keeps room for 14000 more
//     tracepoints and dynamic events than a Debian kernel has. So there
//     are 16384 IDs, half of user_events_max's default: the 16385th event
//     is ENODEV, as in a kernel whose trace event types are all taken
//     (register_trace_event fails).
//   - A Process is shared by all its threads. In Linux the user_event_mm
//     hangs off each task and a thread shares it only if it was cloned
//     after the process's first registration; an older thread has none and
//     its DIAG_IOCSUNREG is ENOENT.
//   - Only user events exist: dynamic_events lines for kprobes, uprobes or
//     synthetic events are EINVAL, and events/ has no other systems. Event
//     directories have enable, filter, format and id, not trigger, hist or
//     inject; there is one trace instance, the nop tracer, the local clock
//     and default trace options.
//   - buffer_size_kb past Options.MaxBufferKB is ENOMEM even where the
//     memory could be had: one client must not make the daemon allocate
//     without bound.
//   - A File has no open mode: the VFS's EBADF for writing to an O_RDONLY
//     user_events_data is the caller's (the daemon's connections and
//     userevents' files are read-write). Names and payloads are Go strings
//     and slices, so the EFAULT of an unreadable DIAG_IOCSDEL name or write
//     buffer is the caller's too (RegisterArgs carries an unreadable name;
//     File.WriteFaulted answers a write whose buffer faulted part-way, as a
//     FUSE server learns of one).
//   - error_log holds the errors of filter writes only: there are no
//     other commands that log there (kprobe events, hist triggers).
//   - The kernel fills a record's common_flags from the writer's
//     interrupt and preemption state (need-resched can show); here they are
//     always 0.
//   - README holds the kernel's mini-HOWTO lines about the files this tree
//     has only; the kernel's covers every tracer and option it was built
//     with.
//   - The root has one file Linux does not, uetrace_event_counts
//     ([FileCounts]): each event's records written and dropped, which the
//     kernel does not count per event.
//   - The files trace-cmd reads are the kernel's where this tree has what
//     they describe (testdata/kernel-tracefs-files.json, the 6.12 VM's,
//     replayed by TestTracefsFilesAreTheKernels; trace_pipe_raw's pages by
//     TestTracePipeRawIsTheKernels), and differ where it does not
//     (docs/trace-cmd.md): events/ftrace/ holds the test kernel's ftrace
//     events' format files (and id of function and print), none of which
//     is ever recorded; available_tracers is nop, and current_tracer takes
//     nop alone (EINVAL otherwise); trace_clock takes local, global, perf
//     and mono — the stamps are CLOCK_MONOTONIC, which mono is and the
//     others approximate — and is EINVAL for counter, uptime, mono_raw,
//     boot, tai and x86-tsc; trace_options lists the test kernel's options,
//     of which record-cmd, record-tgid and test_nop_accept can be changed,
//     and EINVAL says so for the others; saved_cmdlines has the threads
//     that wrote records, saved when they write (the kernel saves at the
//     next context switch, the task switched to as well); printk_formats
//     is empty; there is no options/ or instances/ directory. A read of
//     trace_pipe_raw takes the kernel's pages as ftrace.Ring.ReadRaw gives
//     them; a splice reads nothing through FUSE (uetrace run splices for
//     its command, package runguard, with Handle.SplicePage).
//   - A record too long for a consumer — over the trace buffer's page, over
//     perf's PERF_MAX_TRACE_SIZE — is dropped unvalidated and the write
//     succeeds, as in Linux, but here the drop is counted: the event's
//     dropped count and a session's TooLarge. Linux 6.12.117 counts it
//     nowhere (per_cpu/cpu*/stats shows 0 dropped events; perf's warning
//     is a WARN_ONCE, silent without CONFIG_BUG).
//
// All methods are safe for concurrent use. Writes to an event take no
// global lock, so a status change of one event never blocks writers of
// another.
package subsys
