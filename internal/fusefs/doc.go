// Package fusefs serves a Subsystem's tracefs tree through the kernel's FUSE,
// so that any program — C, Rust, Python, a shell script, the kernel's own
// selftests — uses uetrace's user_events through the same files as Linux's:
// open /sys/kernel/tracing/user_events_data, DIAG_IOCSREG, write
// [write_index][payload]; cat user_events_status; echo 1 > events/.../enable;
// cat trace_pipe.
//
// Files have tracefs's names, modes (all root's: files 0640 and 0440, the
// root directory 0700, events/ and the directories under it 0755) and text,
// made at each read from offset 0 as a seq_file does. Every open is served without the page cache (direct I/O),
// so each read and write reaches the subsystem and a write returns
// user_events' errno synchronously. trace_pipe blocks, polls and is
// interrupted as the kernel's; O_TRUNC and O_APPEND reach the subsystem
// (> trace clears it, > set_event disables everything). sendfile(2) and
// splice(2) from a file of the tree copy nothing on Linux 6.5 and later,
// where tracefs's copy the file: FUSE splices a direct-I/O file through the
// page cache, up to the file's size (commit 2cb1e08985e3; "fuse: use
// copy_splice_read() for FOPEN_DIRECT_IO splice read" fixes it), and the
// files have size 0, as tracefs's do (TestSendfileFromTree). uetrace run
// fails those calls with EINVAL, so that its command reads instead (package
// runguard); through uetrace mount they stay empty.
//
// per_cpu/cpuN/trace_pipe_raw is a stream (FOPEN_STREAM), as trace_pipe is:
// a read(2) gets a page of the CPU's buffer (or what is left of one a
// shorter read began), waiting while the buffer is empty unless the file is
// O_NONBLOCK at that read — FUSE passes the file's flags with each READ, so
// fcntl(F_SETFL, O_NONBLOCK) after the open counts, as trace-cmd sets it
// before its last reads — and it polls readable at buffer_percent, as the
// kernel's. Its splice(2) reads nothing here either; IoctlSplicePage, an
// ioctl of uetrace's own, gives a page as the kernel's splice takes one
// (one the writer has left), with which uetrace run's guard splices for
// its command (TestTracePipeRawThroughFUSE).
//
// user_events_data is one subsys.File per open. FUSE gives a server only the
// first _IOC_SIZE bytes of an ioctl's argument — the pointer to struct
// user_reg — with the caller's thread id, so DIAG_IOCSREG, DIAG_IOCSUNREG and
// DIAG_IOCSDEL read the struct and the name from the caller's memory and write
// write_index back there, and enable bits are set in the caller's memory, all
// through package callers (process_vm_readv/writev: the daemon must be allowed
// to ptrace its callers). Which system call a write came from (write(2) or
// pwrite(2)) and how long it was are read from /proc/<tid>/syscall, since the
// FUSE request says neither (for writev(2), with its iovecs, one
// process_vm_readv); the writer's command name from /proc/<tid>/comm and its
// CPU from /proc/<tid>/stat. They stay open per calling thread between its
// writes and are read again at offset 0 (an open /proc file fails once its
// thread is gone, so a kept one is never another thread's), and the thread's
// process id is read once (threads.go).
//
// That is the FUSE write path of the programs uetrace run's interposer
// cannot reach (static binaries, raw system calls, setuid programs), and it
// is kept short: a write is answered on the goroutine that read it
// (fuse.InlineWriter), and the server waits for the next as a libfuse
// thread does (package fuse's reader); /proc is read with raw system calls
// (the runtime's entersyscall would wake sysmon at each), the stat file only
// when the CPU it gave is older than cpuAge. /proc/<tid>/syscall can say
// "running" when the writer has queued its request but is not asleep yet:
// it is read again until the writer sleeps in its call (thread.readCall).
// BENCHMARKS.md ("FUSE write path") has what a write costs against a FUSE
// server that only answers.
//
// # The interposer
//
// user_events_data and user_events_status have fixed inode numbers
// (preload.DataIno, preload.StatusIno), by which programs preloaded with
// the interposer (package preload) recognise them, with the mount's st_dev.
// With Options.Share, user_events_data answers the interposer's private
// ioctls: UET_IOC_ID names the open file, UET_IOC_SHARE takes a ring, a
// table and a wake socket from the calling process — by their numbers in
// its descriptor table, with pidfd_getfd from the caller found as every
// ioctl's caller is (below) — for that file and process, released when
// the process exits or execs and at the file's release (share.go). A
// kernel's user_events_data answers them ENOTTY, and so does this tree
// without Options.Share. With Options.V10, the tree serves the first
// user_events ABI too (v10.go), which no Linux release enabled.
//
// # Pid namespaces, and whose processes are reached
//
// FUSE gives a request the caller's thread id in the pid namespace of
// whoever mounted the tree: the kernel's fuse_conn keeps the mounter's
// pid_ns (fuse_conn_init) and writes pid_nr_ns(task_pid(current),
// fc->pid_ns) into each request's header — 0 for a caller that namespace
// cannot see. That id is not this process's: taken as one of its /proc's, it
// names another task (ESRCH, or worse another user's process, whose memory
// would be read as the user_reg, written with write_index and later with
// enable bits). So every request's id is looked up in the mount's namespace
// (Options.PIDs, package pidns): the task of /proc whose NSpid has that id at
// the namespace's depth, checked to be that namespace's at every use. This
// process's own namespace costs nothing (the ids are /proc's); a namespace
// below it costs a scan of /proc at a thread's first request, then a check
// per ioctl (a write's thread is kept, see threads.go); a caller that cannot
// be found gets ESRCH at DIAG_IOCSREG, DIAG_IOCSUNREG and DIAG_IOCSDEL, is
// thread 0 in a write's record, and has no privilege (process -1 for
// Options.Cred). Records carry the writer's id as this process's /proc
// gives it, as Linux's trace carries the global pid.
//
// The mount's namespace is Mount's and Serve's caller's (this process's)
// unless Options.PIDs says otherwise: the daemon gives the namespace of the
// client that handed the descriptor over, which is where uetrace run's shim
// (a mount namespace, not a pid namespace) and uetrace mount mounted it. A
// client that mounted elsewhere than its own namespace cannot be caught at
// the handover (the kernel shows a connection's pid_ns nowhere), so a second
// rule bounds what it could do: a caller's process is reached — memory read
// or written, /proc/<tid>/syscall read — only if Options.For, the user the
// tree is served for (the client, by SO_PEERCRED), could ptrace it
// (caps.User.Check: same uids and gids and dumpable, or a user namespace it
// created; root reaches all). A wrong or reused id thus reaches at worst
// another process of the same user, never another user's; the caller gets
// EPERM at its ioctl and its memory is not touched. Here uetrace differs
// from Linux, where a caller's own memory is always reachable: a tree served
// for one user refuses other users' callers (a root-made mount with
// allow_other is served for root, which refuses nobody).
// Nor does a caller that user could not ptrace borrow the process it was
// taken for when it opens a file: it has no privilege (the found process's
// CAP_PERFMON would delete persistent events) and its files count in the
// account of the user the tree is served for, not the found process's uid
// (TestHostileWrongNamespaceLendsNothing).
//
// # perf_event_open of the tree's events
//
// Hidden files of the root, perfevent.Dir, listed nowhere, are how uetrace
// run (package runguard) answers a command's perf_event_open of one of the
// tree's event ids: a control file that makes an event (package perfevent)
// fed by a session of the tracepoint, and each event's file, opened by
// uetrace run and installed in the caller, whose mmap is the event's ring
// through FUSE passthrough and whose read, ioctls and poll are perf's. See
// perf.go for how records reach it and when it ends.
//
// # Limits
//
// Any program that can reach the mount makes the server hold state for it.
// With Options.Charge (the daemon's Server.FUSECharge, as uetrace serve
// sets it) that state counts in the caller's uid's account, the same one
// the daemon's socket clients count in, so that one uid's total is what is
// bounded: every open file and directory (EMFILE beyond the uid's
// limit: an open user_events_data, subsystem handle, trace_pipe reader or
// directory listing each hold memory until RELEASE), and every enabler a
// process registered (ENOMEM beyond it, as the kernel's allocation of one
// would fail), held until it is unregistered or its process exits or execs
// — a fork's copies count too, in the parent's uid. The uid is the caller's
// effective uid as the server's user namespace sees it, never the FUSE
// header's, which is root's for every caller of the mount uetrace run makes
// in a user namespace of its own. Root, perfmon-capable callers and the
// daemon's user are counted, not held, as on the socket.
//
// What is not bounded per uid, and why:
//
//   - Requests in flight: each is one of the caller's threads blocked in a
//     system call, and the kernel's FUSE does not limit them either. A
//     trace_pipe read that waits holds a goroutine and its 8 KiB request,
//     not a read buffer (fuse.ReadWaiter: the buffer is taken when there
//     are records); the caller pays a task and its kernel stack for each,
//     bounded by its RLIMIT_NPROC. Linux, too, never refuses a read for
//     the number of readers waiting.
//   - The processes known (package callers): one pidfd each, from the
//     first ioctl of a process to its exit, bounded by the processes the
//     uid may have (RLIMIT_NPROC), as the kernel's user_event_mm is per
//     process; the calling threads whose /proc files stay open are at most
//     512 (threads.go).
//   - The write-index array of an open user_events_data: at most one entry
//     per event, so user_events_max, as in Linux, and the files are bounded.
//   - Nodes the kernel looked up: at most one per path of the tree, whose
//     size user_events_max bounds.
//   - The text of an open file, made at its first read and kept until it is
//     closed (subsys.Handle): a few KiB at most — trace's is made as it is
//     read, as the kernel's seq_file makes it (ftrace.TextReader), so an
//     open trace holds its iterator and about one read's worth of text, not
//     the buffer's.
//
// # Differences from Linux 6.12.117
//
//   - lseek(2) on user_events_data succeeds: FUSE cannot refuse it (ESPIPE)
//     without also refusing pwrite(2), which user_events allows at offset 0.
//   - A write(2) of 0 bytes returns 0: the VFS answers it for FUSE without
//     asking the server, while user_events_write says EFAULT.
//   - A write larger than the mount's max_write (1 MiB) reaches the server
//     in pieces, the first short of what write(2) asked as if the buffer
//     faulted there; it is EFAULT here, while the kernel takes it and drops
//     the record, larger than any trace buffer page (kernel/datacalls' row
//     write.enabled_2MiB). A shorter write that FUSE cuts (more than 256
//     pages, or non-empty iovecs) is made whole from the caller's memory
//     and written as Linux writes it (pieces.go; the row
//     write.writev_1024_iovecs_of_a_byte).
//   - Enable bits are set by read-modify-write of the byte that holds them
//     (procmem.Mem.SetBit), not by an atomic set_bit: a caller changing other
//     bits of that byte in the same instant can lose one of the two updates.
//   - The caller's memory is read and written from the daemon
//     (process_vm_readv/writev), which waits for page faults: an access is
//     given up after procmem.StallLimit (1 s), so an argument in memory
//     whose fault nobody serves (userfaultfd, a file on a FUSE mount that
//     does not answer) is EFAULT — ENOMEM for an enable word at
//     DIAG_IOCSREG, a counted failure when the event changes — where the
//     kernel faults it in in the caller's own context (waiting there) or
//     from a worker. That process's memory is then refused at once until
//     the fault is served and for procmem.StallCooldown after.
//   - A caller that the user the tree is served for (Options.For) could not
//     ptrace gets EPERM at DIAG_IOCSREG, DIAG_IOCSUNREG and DIAG_IOCSDEL,
//     where Linux reaches any caller's own memory (see "Pid namespaces"
//     above; TestHostileServedFor).
//   - user_events_data's and user_events_status's st_ino are fixed
//     numbers (tracefs gives every file a new one per inode); the
//     interposer's ioctls are answered (ENOTTY on tracefs), and with
//     Options.V10 a 24-byte struct user_reg registers (EINVAL on Linux).
//   - The CPU a write's record carries (its ftrace buffer, [CPU] in the
//     trace, common_cpu in filters, a perf sample's cpu) is the writer's as
//     /proc/<tid>/stat gave it at most cpuAge (1 ms) before: a thread that
//     writes more often and moves to another CPU meanwhile has records on the
//     CPU it left, for up to 1 ms. Linux records the CPU the write ran on.
//     Reading stat at every write would cost as much as the rest of the
//     server's answer (TestThreadsCPUAge).
//   - A write whose iovecs another thread of the caller unmapped, or backed
//     with memory whose page fault nobody serves, after the kernel read them
//     in the caller's context, waits for that fault — as long as it takes,
//     not interruptible — until fuse.StallLimit (1 s), when it is answered
//     EFAULT (fuse.InlineWriter). Linux never reads them again.
//   - Fork, exec and exit of callers are learnt from the proc connector
//     (root) after the fact, or, without it, when the caller is next seen; a
//     forked child's enable bits are right from the moment the daemon hears of
//     the fork, as on the kernel they are from a worker shortly after.
package fusefs
