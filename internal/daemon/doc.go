// Package daemon serves a subsys.Subsystem — user_events in user space — to
// the programs of a machine over a Unix socket: what `uetrace serve` runs.
// The protocol is package wire; its client, which the userevents package's
// daemon backend and the tools use, is package client.
//
// One SOCK_SEQPACKET connection is one open user_events_data: its
// registrations and write indices, plus tracefs files and perf-like
// sessions opened through it. A client shares its enable words with a
// memfd it passes in the handshake (SCM_RIGHTS), sealed against shrinking
// so that the daemon's writes can never fault; the daemon maps it and sets
// and clears enable bits there, bounds-checked, and nowhere else — an
// enable_addr outside it is ENOMEM, as unwritable memory is in Linux.
//
// The connections of one process (by SO_PEERCRED pid) share its enablers,
// as the threads of a process share its user_event_mm; when the last one
// closes — the process exited, crashed or exec'ed, since the descriptors
// are close-on-exec — its enablers go and with them its events, as at
// process exit in Linux. A caller is perfmon_capable as Linux's capable()
// decides in the initial user namespace, here the daemon's: CAP_PERFMON or
// CAP_SYS_ADMIN effective in the daemon's user namespace or an ancestor —
// root of a namespace it made itself (`unshare -Ur`) is not — of the
// process SO_PEERPIDFD names (package caps). PERSIST and dynamic_events
// changes need it. The decision is made when the client connects; Linux
// makes it at each call, so capabilities dropped later still count here
// for that connection.
//
// # Who may do what
//
// A connection is an open user_events_data: whoever may connect to the
// socket (its mode and group, package Access) is a producer, and the
// daemon decides the rest per operation, as tracefs's modes and perf's
// rules decide it on Linux (policy.go):
//
//   - Producers — everyone who may connect: Hello, Register, Write,
//     Unregister, Ring and RingFlush, Delete (the kernel's own rules:
//     the caller's file's references, PERSIST needing perfmon_capable,
//     in package subsys), ReadDir, and opening for reading the files that
//     describe the events: user_events_status, available_events, set_event,
//     dynamic_events, README, the enable, format and id files, tracing_on,
//     buffer_size_kb and buffer_total_size_kb. On Linux tracefs is root's
//     (the root directory 0700, files 0440 and 0640), and user_events is
//     opened up by giving user_events_data to others; here those files
//     read the same for everyone, since programs and `uetrace status` need
//     them and they hold no one's records.
//   - Tracing control — opening any tracefs file for writing (enable
//     files, tracing_on, buffer_size_kb, set_event, dynamic_events, trace,
//     O_TRUNC) — is for tracers; others get EACCES, as the files' 0640
//     root:root gives them on Linux.
//   - Reading others' data — trace and trace_pipe, EACCES otherwise as
//     their modes give; sessions (Session, and through its handle Attach,
//     SessionRead, SessionStreams, SessionSync), EPERM otherwise, as
//     perf_event_open of tracepoint records (PERF_SAMPLE_RAW) is without
//     CAP_PERFMON while perf_event_paranoid > -1 — is for tracers too, and
//     so is ServeFUSE (EPERM), which hands out the whole tree.
//
// Tracers are uid 0 (tracefs's owner), perfmon_capable callers, the
// daemon's own user, and those Config.Tracers names — users by uid,
// groups by gid (the caller's primary group and its supplementary groups
// as SO_PEERGROUPS recorded them at connect), or everyone (Tracers.All).
// The decision, like perfmon_capable, is made once per connection.
// Refusals say which `uetrace serve` option (--tracers) grants them.
//
// # Limits
//
// Everything a client can make the daemon hold is bounded, per connection
// and per uid (Config.Limits; Config.MaxConns for all), with the errno
// Linux gives for the same exhaustion, counted (Server.Stats, the Stats
// request, `uetrace status`): connections per uid, those still shaking
// hands included (EMFILE, as inotify's max_user_instances; checked at
// accept, before any goroutine, so that one user's flood never keeps
// another out) and in all (ENFILE: a connection holds at most 5 of the
// daemon's descriptors, Config.MaxConns says which, and every descriptor a
// message carries is taken or closed before the next is read); the Hello within Limits.Handshake
// (closed then, counted); open files and sessions per connection (EMFILE,
// as RLIMIT_NOFILE); registrations per connection and uid (ENOMEM, as the
// kernel's allocations would fail) — the events a connection's
// user_events_data refers to, those a failed registration left there as
// Linux leaves them included, and the enablers a process holds, each; a
// uid's default is a quarter of user_events_max, so that one uid cannot
// take the table; sessions per uid (EMFILE) and their
// buffers and rings per uid (EPERM, as perf_mmap beyond
// perf_event_mlock_kb); buffer_size_kb (ENOMEM, as an allocation that
// fails). Root, perfmon_capable callers and the daemon's own user are
// held only to the per-connection limits, as CAP_SYS_RESOURCE and
// CAP_IPC_LOCK spare them Linux's per-user ones. The enable-word arenas and
// producer rings clients share are bounded per connection (MaxArena,
// wire.MaxRing) and, all a uid's together, per uid (ENOMEM, as io_uring's
// rings over RLIMIT_MEMLOCK); an arena a process shares on several
// connections is mapped, and counted, once. The tracefs tree served
// through FUSE (package fusefs) counts in the same per-uid account
// (Server.FUSECharge): the files a uid holds open there (EMFILE) and the
// registrations made there (ENOMEM, with those made over the socket). At
// most one request per connection waits in the
// daemon (the one read ahead of a blocking read, to notice a hang-up);
// what a client sends after it waits in the socket's buffer, the
// kernel's, and a client that does not read its replies is dropped after
// Config.ReplyTimeout. What a client held is given back when it leaves:
// a session's buffer and streams are mappings of their own, unmapped when it
// closes; the memory of a buffer_size_kb made smaller goes back to the
// system at once, and the daemon's free pages when it becomes idle.
//
// The daemon never trusts a client: a malformed, truncated or oversized
// message is answered with an error (EPROTO, EMSGSIZE) or drops that
// client; a client that does not read its replies is dropped after
// Config.ReplyTimeout; each case is logged with log/slog, and everyone
// else is served on.
//
// # The data path
//
// Linux writes each trace record once, in the writer's context, into each
// consumer's per-CPU buffer, and its readers merge the CPUs by time at
// read time (ftrace's iterator, perf's ordered events). The daemon does the
// same with what clients publish in shared memory, except that the one
// copy is made by the daemon, not by the producer: a producer may spoil
// only its own records, so no consumer's buffer is ever writable by one.
//
//   - Producers publish into a ring set (the Ring request, version 2;
//     internal/shmring): one ring per ring index, R of them (the HelloOK's
//     R), the record of a thread on CPU c into ring c mod R, without a
//     system call (drainer.go). Programs that are not uetrace's publish
//     the same sets through the C interposer (package preload; FUSEShare,
//     share.go), and from there on their sets are a connection's.
//   - Drainer k — one goroutine per ring index, nothing shared with the
//     others on a record's way — merges ring k of every set by time
//     (merge) and hands each record as it lies in the producer's ring to
//     its connection's user_events_data (subsys.File.Deliver), which
//     copies it once, straight into the space reserved in each consumer's
//     buffer of that CPU — the trace buffer's page, a session's stream —
//     and validates it there (a filter or several consumers: one scratch
//     copy first, as the kernel's trace_buffered_event). A drainer keeps
//     the stream it delivers into locked from one record to the next of a
//     run (subsys.Batch), publishing once per run.
//   - A session that maps streams and is the only consumer of everything
//     a producer connection writes can take that connection's ring set
//     itself (the SessionHandOver request; handover.go): the drainers let
//     go of it, and the reader reads its records where they lie, with the
//     drainers' checks and the same bytes (internal/handover), on its own
//     CPUs. The daemon takes it back, without waiting for the reader,
//     before anything changes where those records go — only then: a
//     change to other events (each change says which: subsys.Scope)
//     leaves it with the reader.
//   - A session's reader gets one stream per ring index of finished
//     perf.data records (the SessionStreams request; session_stream.go,
//     subsys.Session.DeliverToStreams), which `uetrace record` writes to
//     its file as they lie; losses are PERF_RECORD_LOST records in the
//     stream, where they happened. The reader may write anything into that
//     memory; it costs only its own session's records, never the daemon's
//     memory safety, a blocked writer or a system call per record. A
//     reader that does not map streams reads with SessionRead, a request
//     per batch.
//
// Its costs: per record, one copy and the checks of a write in the
// drainer of its CPU (BENCHMARKS.md's data path has the figures), the
// reader's share of a stream's bytes written to its file as they lie —
// or, for a ring set handed over, nothing in the daemon: the same checks
// and the one copy, into the reader's own buffer, on the reader's CPUs
// (the daemon's CPU per record delivered falls from about 100 ns to
// 10–35 ns, BENCHMARKS.md's hand-over);
// per ring set, R rings of the producer's memory (each UETRACE_RING_KB),
// and per session R streams of the reader's; wake-ups only at a
// watermark (a quarter of a ring) or a drainer's 10 ms busy wait, so a
// record may wait up to that long while no reader asks for it (a
// trace_pipe read or a flush makes it delivered at once).
//
// The drainers are the only goroutines that take records from producers'
// rings. Before issue 31 one merger goroutine drained version-1 rings —
// one ring per producer for all of its CPUs, which needed a merge across
// every producer's records in one thread, the path's ceiling, and which
// the hand-over could not take — and the interposer published one; both
// the interposer and the Go producer publish sets now, and the Ring
// request's version 1 is refused (EPROTONOSUPPORT).
//
// # Differences from Linux
//
//   - A process is who connected: a connection inherited by a child (without
//     exec) still counts as its parent's, and a client in another pid
//     namespace, whose pid the daemon cannot see, is a process per
//     connection.
//   - A write longer than wire.MaxWrite reaches the daemon as its first bytes and
//     its length (WriteHead): enough to answer as Linux does, which drops
//     a record that long unread. A write of that length a consumer could
//     take would be EMSGSIZE; with Linux's limits (a record of 8 KiB at
//     most) there is none.
//   - Writes come two ways. A client may share a ring set (the Ring
//     request, version 2: a memfd of one ring per CPU index,
//     internal/shmring, and an eventfd) and publish its writes there
//     without a system call, having checked them itself with the kernel's
//     rules. Drainer k delivers ring k of every set into their
//     connections' user_events_data, in time order across rings as
//     ftrace merges its per-CPU buffers (see merge), with the time the record
//     carries, its thread and CPU as package ringcheck checks them (a live thread
//     of another process becomes the peer's pid: RingStats.ForgedTID, and
//     so does a new one past the ring's ration of checks:
//     RingStats.UncheckedTID; the
//     CPU is the client's word, modulo the possible CPUs — it cannot be
//     checked), the peer's pid, checking
//     everything again (ring memory is the client's to scribble on); idle,
//     it sleeps in epoll_wait on the rings' eventfds. Before it serves a
//     trace or session read, a tracefs write, a session's attach or close,
//     the daemon delivers what every ring holds, so what a Write returned
//     before is there, as with the kernel's synchronous write. A full ring
//     drops the record and the write succeeds, as with the kernel's ring
//     buffer; the client counts it and tells the daemon in a loss record
//     (wire.LostIndex) with its next write, and the daemon hands the count to
//     the event's consumers: its "written" and "dropped" counts, the trace
//     buffer's "dropped events" and a "CPU:N [LOST n EVENTS]" line before
//     the record that follows — which the kernel would not print for drops
//     (it shows only overwritten records so) — and every session's lost
//     count (PERF_RECORD_LOST in perf.data). A loss record's count is the
//     client's number: it is cut to what the ring's producer could have
//     dropped since it shared the ring (RingStats.LostCapped), and every
//     count it feeds saturates rather than wrap, so that no client can
//     lower or hide another's losses. Without a ring, each write is
//     a round trip on the socket, so that the writer gets the kernel's
//     errno; it costs a context switch each way.
//   - Programs that are not uetrace's reach rings too: a process preloaded
//     with the interposer (package preload) hands a ring set of R rings
//     (UET_IOC_ID tells it R) per open FUSE user_events_data to the FUSE
//     tree, which takes its descriptors from the calling process itself
//     (pidfd_getfd) and gives them to FUSEShare (share.go). The set and
//     its eventfd are checked and mapped by the code that takes a
//     connection's (drainers.attach), and are then a connection's set in
//     all but who writes: drained by the drainers, checked and merged as
//     a connection's, handed to a session's reader when it is their only
//     consumer (the set of each process of a program that forked, each
//     with its own set on the file they share: subsys.File.HandTo), its
//     records resolved in that file only and delivered under the FUSE
//     caller's process, its thread ids mapped from the process's pid
//     namespace. With it comes a validation table the
//     daemon writes and never reads (each write index's enabled state,
//     size and __data_loc/__rel_loc rules, kept by subsys.File.Watch),
//     from which the process answers its writes as the kernel would.
//   - Writes are writev(2): there is no write(2) with a file position, so
//     pwrite's EFAULT for a non-zero offset and write(2)'s EFAULT for 0 bytes
//     (a 0-byte writev is 0) have no counterpart.
//   - Names and payloads travel as bytes: DIAG_IOCSDEL with an unreadable name
//     and a writev from unmapped memory, EFAULT in Linux, cannot be sent.
//     (Register carries an unreadable name_args as a flag.)
//   - Enable bits are written through the daemon's own mapping of the
//     client's memfd: a client that mprotects its mapping read-only does not
//     make registration ENOMEM or unregister EFAULT, as it would in Linux.
//
// It is not the subsystem (package subsys), the client (package client) nor
// the producer library (package userevents), and it does not collect
// records into files (that is the record command's job).
package daemon
