// Package runguard is uetrace run's seccomp user-notification filter,
// installed in the command before it starts: it hands the command's
// perf_event_open(2), mount(2), fsopen(2), sendfile(2), splice(2),
// execve(2) and execveat(2), and its shared mappings of files (mmap(2) with
// MAP_SHARED, picked out by the filter from the flags), to uetrace run
// (SECCOMP_RET_USER_NOTIF), which answers what the kernel cannot answer
// for the tree (perf events of the tree's tracepoints; a mount of tracefs
// on the tree and a splice of trace_pipe_raw, which trace-cmd makes),
// refuses what would hide it, says why and names `uetrace record`, and lets
// every other call through to the kernel untouched
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE).
//
// Under uetrace run, /sys/kernel/tracing is uetrace's FUSE tree, but
// perf_event_open is the host kernel's, which knows none of the tree's
// events:
//
//   - A perf_event_open of a PERF_TYPE_TRACEPOINT whose config is one of
//     the tree's event ids (Guard.Tracepoint; they are above any the
//     kernel hands out) is answered here (perf.go): the tree makes the
//     event — package perfevent, through the tree's hidden control file,
//     perfevent.ControlFile — and the guard opens the event's file through
//     the caller's root (/proc/<pid>/root) and installs it in the caller
//     as the call's result (SECCOMP_IOCTL_NOTIF_ADDFD with
//     SECCOMP_ADDFD_FLAG_SEND, close-on-exec as PERF_FLAG_FD_CLOEXEC asks).
//     Its mmap maps the event's ring (FUSE passthrough); before the caller
//     maps it, the guard tells the tree the mapping's length and
//     protection (perfevent.OpMmap), which sizes the ring or gives
//     perf_mmap's errno; an execve tells the tree to enable the events
//     waiting for it (enable_on_exec), once such an event was made.
//     What uetrace cannot give (call chains, groups...) is EOPNOTSUPP,
//     said once with the name uetrace record. Without the tree's perf
//     files or FUSE passthrough (Linux 6.9, CAP_SYS_ADMIN), it is
//     EOPNOTSUPP too, with why.
//     Before, a collector that reads events/user_events/x/id and opens
//     that id (Microsoft's perf-collect) got whatever host tracepoint had
//     the same id (1024 was syscalls:sys_exit_sync) and recorded it as x.
//   - Linux's perf (and libtracefs, trace-cmd) looks for a mount of type
//     tracefs in /proc/mounts, finds fuse.uetrace, and mounts the real
//     tracefs over the tree, after which the command has no user_events at
//     all. A mount(2) of tracefs on a directory of the tree (TreeDirs), as
//     libtracefs makes it — new, not a remount, bind or move — is answered
//     as done, doing nothing: libtracefs then uses that directory, which is
//     the tree (tracing.go). A mount of tracefs elsewhere or of debugfs
//     (whose tracing/ is the kernel's tracefs), by mount(2) or the new mount
//     API's fsopen(2), is refused with EPERM, the tree stays.
//   - busybox's cat printed nothing of the tree's files: it copies with
//     sendfile(2), and Linux's FUSE splices a FOPEN_DIRECT_IO file through
//     the page cache up to the file's size since 6.5 (commit 2cb1e08985e3;
//     "fuse: use copy_splice_read() for FOPEN_DIRECT_IO splice read" fixes
//     it), while the tree's files have size 0, as tracefs's do: sendfile
//     and splice from them succeeded with 0 bytes (Python's
//     shutil.copyfile made empty copies). From a file of the tree (a
//     descriptor whose /proc path is under the tree's mount points) they
//     fail with EINVAL, the kernel's answer for a file that cannot be
//     spliced, and nothing is said: the callers that matter read the file
//     then, and get every byte; one that does not fails, and loses nothing
//     silently. On the kernel, tracefs splices its files by reading them.
//   - trace-cmd record splices per_cpu/cpuN/trace_pipe_raw into a pipe and
//     reads it no other way: a failed splice ends its recorder, silently,
//     with nothing recorded. A splice from a trace_pipe_raw of the tree is
//     done for the caller (Guard.SpliceIoctl; tracing.go): the guard takes
//     its two descriptors with pidfd_getfd(2) (the same open files, so the
//     same position and O_NONBLOCK), asks the tree for whole pages the
//     writer has left, as the kernel's splice takes them, as many as len
//     and the pipe's room allow, writes them into the caller's pipe and
//     answers with their length; with none it waits, as the kernel does,
//     until the file polls readable (buffer_percent), checking every 100
//     ms that the caller still waits (a signal ends its wait and nothing
//     tells the guard), or answers EAGAIN for SPLICE_F_NONBLOCK or an
//     O_NONBLOCK file. Each such splice runs on a goroutine of its own. Its
//     cost: the round trip to uetrace run and one FUSE round trip a page
//     from a third process, 76 to 238 µs a page median (38 µs to 0.9 ms)
//     on a 2-core x86-64 with Linux 6.18 under a load average of 10 to 29,
//     3 to 8 times a read(2) of the same pages (cmd/uetrace's
//     TestRunSpliceRaw logs it; docs/trace-cmd.md). Unlike the kernel's, a
//     splice that a signal interrupts after the guard took its pages still
//     puts them in the caller's pipe (the guard checks that the caller
//     waits just before it takes them): they are there ahead of the next
//     splice's, which the guard says on its Log.
//
// What is refused is said once per kind on the Guard's Log (uetrace run's
// standard error, the command's too). The caller's memory (the attr, the
// file system type) is read with process_vm_readv; a call whose memory
// cannot be read goes on to the kernel, which answers EFAULT itself.
//
// The filter costs the command's every system call the kernel's seccomp
// entry path: about 40 ns a call (getppid, 180 ns without, 220 with, on a
// 2-core x86-64 VM with Linux 6.18); the filter reads only the ABI and the
// call's number, so the kernel's per-call cache answers the other calls
// without running it. A sendfile or splice of any file makes the round trip
// to uetrace run and back: about 13 µs more a call (a loop of 1-byte
// sendfiles of a regular file, best of 6 on a loaded 2-core x86-64 with
// Linux 6.18: 1.1 µs guarded without them, 14.4 µs with), the price of
// never copying a tree's file as empty. It asks for no speculative store
// bypass mitigation
// (SECCOMP_FILTER_FLAG_SPEC_ALLOW), which a filter otherwise turns on for
// the command and everything it starts.
//
// Once the guard has a call, only a fatal signal ends the caller's wait
// for its answer (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, Linux 5.19):
// the answer of a call the guard makes for the caller, a splice whose
// pages are in the caller's pipe, is never lost to a signal. A splice
// that waits ends its wait when the caller has a signal to take, with
// ERESTARTSYS, as the kernel's does: the caller's handler runs, and the
// call goes on or fails with EINTR by the handler's SA_RESTART
// (kernel/suites' TestSpliceSignalOnKernel: the program of cmd/uetrace's
// TestRunSpliceSignal, on the 6.12 kernel). A signal
// sent to a process of several threads, which Linux gives to one of them
// that the guard cannot see, ends the wait with EINTR if it is still
// pending a poll slice (20 ms) later: it was then the caller's, and an
// SA_RESTART handler's splice fails where the kernel's would go on.
// Before 5.19 the filter goes without: a signal then ends the wait at
// once, and pages already spliced are said to be left in the pipe.
//
// A shared mapping of a file costs a round trip to uetrace run, about 10.5
// µs (a loop of mmap and munmap of a page of a regular file: 3.7–4.0 µs
// under main's guard, which let mmap through unread, 14.2–14.5 µs under
// this one, best of 15 rounds, 3 runs interleaved on a loaded 2-core
// x86-64 with Linux 6.18, benchmarks/perfrun/guardcost.c). Private and
// anonymous mappings are decided in the filter, which compares mmap first
// and reads its flags: mmap and munmap of an anonymous page took
// 2978–3054 ns CPU under main's guard and 3033–3063 ns under this one,
// about 45 ns, within the spread. An execve costs a round trip once an
// event waits for an exec. ioctl(2) is not filtered (296–303 ns either
// way): perf's ioctls on an event's file reach the tree through FUSE.
//
// It is not a security boundary: the command runs as root of its own mount
// namespace and can unmount the tree or call through an architecture the
// filter does not know; it keeps programs that mean well from recording the
// wrong events or losing the tree. Installing a filter needs CAP_SYS_ADMIN
// in the caller's user namespace (uetrace run's shim has it) or
// no_new_privs, which uetrace run does not set (set-uid programs inside
// keep working). On a kernel without seccomp user notification (before
// 5.5), Install fails and uetrace run goes on unguarded.
package runguard
