// Package perfevent is a perf event of one of uetrace's own tracepoints, as
// Linux's perf_event_open(2) makes one of a kernel tracepoint: the attr
// checked as the kernel checks it (Check), a count read in the attr's
// read_format, enable, disable, reset, period, pause and set-output, poll's
// answers, and the mmap ring — struct perf_event_mmap_page and 2^n data
// pages in a memfd the caller maps, written with the kernel's record
// layouts (PERF_RECORD_SAMPLE with the sample_type's fields in the
// kernel's order, PERF_RECORD_LOST where samples were lost, the sample_id
// trailer with sample_id_all), the kernel's free-space rule and wakeups
// (wakeup_events, the watermark), and overwritten when mapped read-only.
//
// It is what uetrace run answers a program's perf_event_open of a tree's
// event with (package runguard opens it, package fusefs serves its file);
// Control is the protocol between the two. It does not know where records
// come from or who may open what.
//
// Where it differs from Linux, on purpose or because it cannot know:
//   - A sample's IP and ADDR are 0 (the kernel puts an address of its own
//     in IP); misc is PERF_RECORD_MISC_KERNEL, as the kernel's.
//   - Of the side-band records attr.comm, mmap, task... ask for, only
//     PERF_RECORD_COMM is written: before a thread's first sample in the
//     ring and when its name changes, not at exec. No MMAP, FORK, EXIT.
//   - Call chains, registers, user stacks, the counter read with each
//     sample, branch stacks, frequency sampling, a backward ring, signals
//     and remove_on_exec are EOPNOTSUPP (Unsupported says which).
//   - Events are never multiplexed: time_running is time_enabled.
//   - Times are CLOCK_MONOTONIC's, the records' clock, where Linux's default
//     perf clock is local_clock (close, not the same); with use_clockid, the
//     clock asked for, by its offset from CLOCK_MONOTONIC when the sample
//     is written.
//   - The ring is kept when the caller unmaps it; a later mapping of the
//     same size gets it back with what it held (Linux frees it with its
//     last mapping), and an event whose records go to another's ring
//     cannot be mapped (EINVAL; Linux maps the other's).
package perfevent
