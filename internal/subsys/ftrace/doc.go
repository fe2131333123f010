// Package ftrace is the ftrace ring buffer and the text of the tracefs
// trace and trace_pipe files as Linux 6.12 produces them, for a user-space
// implementation of user_events. It is not the event model (package
// eventdef: parsing, layout, the fields' text) and not the registry
// (package subsys: which events exist, their ids, enabling).
//
// # Text
//
// [AppendHeader], [AppendContext], [AppendLine] and the helpers around
// them print byte for byte what kernel/trace/trace.c and trace_output.c
// print with the default trace_options (nop tracer, "local" clock in
// nanoseconds): the header of trace, the "comm-pid [cpu] flags
// secs.usecs: " prefix, the "CPU:N [LOST n EVENTS]" and "##### CPU N
// buffer started ####" annotations, per_cpu stats and buffer_size_kb.
//
// # The buffer
//
// A [Ring] emulates kernel/trace/ring_buffer.c closely enough that every
// count and every surviving record match the kernel for the same writes:
//
//   - one buffer per CPU, a ring of 4096-byte sub-buffers (4080 bytes of
//     events each, [PagesFor] gives their number for a buffer_size_kb) and
//     a reader page outside the ring; the buffer starts at MinPages pages
//     (buffer_size_kb "7 (expanded: 1408)") until [Ring.Expand] or a
//     resize;
//   - events laid out as the kernel lays them out ([EventSize]: a 4-byte
//     header and the record rounded up to 4 bytes, 4 more bytes above 112
//     bytes, 16 for records of 5 to 8 bytes; an 8-byte time extend before an event more than
//     2^27 ns after the previous one on its CPU, unless it starts a page;
//     padding at the end of a page), so pages fill exactly as in the
//     kernel; [Ring.ReadRawPage] and [Ring.ReadRaw] return them as a
//     read(2) of trace_pipe_raw does, [Ring.SpliceRaw] as its splice(2)
//     does (only pages the writer has left), and [Ring.RawReady] is its
//     poll at buffer_percent (rb_watermark_hit);
//   - tracing_cpumask ([Ring.SetCPUMask], [ParseCPUMask], [AppendCPUMask]):
//     a CPU out of it takes no record;
//   - saved_cmdlines and saved_tgids ([Ring.AppendSavedCmdlines],
//     [Ring.AppendSavedTGIDs]) with the record-cmd and record-tgid options,
//     in the kernel's slots (SavedCmdlines of them);
//   - overwrite mode: when the writer needs the page holding the oldest
//     records, those records are lost (overrun); records longer than
//     [MaxRecordSize] (a user_events payload over 4064 bytes), and records
//     written while tracing_on is 0, are dropped without being counted;
//   - entries-in-buffer is the records in the buffers, entries-written
//     those plus the overruns ([Ring.Entries]); records consumed through
//     trace_pipe leave both;
//   - trace ([Iter], [Ring.AppendTrace]) reads without consuming, merging
//     the CPUs by time stamp; trace_pipe ([Pipe], [Ring.Consume]) consumes.
//     A consumer that has started on a page keeps it out of the ring (the
//     reader page), so those records survive overwrite, as in the kernel.
//
// Writes take a mutex per CPU and copy the record into preallocated
// pages; readers lock one CPU at a time. [Ring.Reserve] lets a writer
// assemble a record in its page and then commit or discard it, as the
// kernel's trace_event_buffer_reserve does (user_events validates its
// records there).
//
// # Checked against the kernel
//
// testdata/kernel-ftrace.json holds what Linux 6.12.117 did for a series
// of scenarios (kernel/cmd/ftracegolden generates it in a VM; its
// TestGoldenMatchesKernel checks it against the kernel and, with -update,
// regenerates it), and the tests replay every scenario into a Ring and
// compare the trace text, the trace_pipe text and read sizes, the per_cpu
// stats, buffer_size_kb and the raw pages of trace_pipe_raw.
//
// # What the kernel does that a caller must do itself
//
//   - Records of a deleted event print as "Unknown type N" in the kernel,
//     and as the new event when a new event gets the same type id. A Ring
//     prints each record with the Event it was written with unless
//     [Config.Lookup] is set, which gives the kernel's behaviour.
//   - Deleting an event that was ever enabled (DIAG_IOCSDEL, the last
//     reference going away, "!u:..." in dynamic_events) marks the buffer
//     to be cleared; the next delete through dynamic_events (even one
//     that fails) clears it. The registry has to call [Ring.Reset] then.
//   - The comm shown comes from saved_cmdlines in the kernel, so a task's
//     first records can show "<...>" and all of them show its latest
//     comm; here each record carries the comm it was written with.
//
// # Where this package differs from the kernel
//
//   - A reservation that does not fit on the sub-buffer being written is
//     refused ([Ring.Reserve] returns false; write with [Ring.Write])
//     rather than moving on, which would overwrite the oldest sub-buffer
//     even for a record then discarded; and a discarded record leaves
//     nothing behind, where the kernel's discard
//     (ring_buffer_discard_commit) can leave padding in the page and
//     resets its time-stamp bookkeeping for the next record.
//   - Time stamps are the caller's ([Ring.Write]) or the Ring's clock
//     ([Ring.WriteNow], CLOCK_MONOTONIC); the kernel reads sched_clock.
//   - Lines are never cut: the kernel loses the end of a line longer than
//     its 8156-byte trace_seq in trace, and prints "[LINE TOO BIG]" in
//     trace_pipe ([Pipe] does that too).
//   - The trace file's iterator does not skip records older than the last
//     reset (the kernel's skipped_entries, which matter only for records
//     written during a reset).
//   - Bytes the kernel leaves stale in a page (the rounding after a
//     record, the body of padding) are zero.
//   - saved_cmdlines and saved_tgids save a record's writer when the record
//     is committed; the kernel saves at the next context switch of a CPU
//     that committed one, both the task switched from and the one switched
//     to, so it also lists tasks that wrote nothing.
package ftrace
