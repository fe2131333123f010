// Package preload carries libuetrace-preload.so, the interposer that gives
// programs that are not uetrace's — C, C++, Rust, Python, .NET, anything
// dynamically linked against glibc — the daemon's shared-memory rings: their
// writes to the tree's user_events_data are published into the ring of the
// CPU they run on, of a ring set the daemon's per-CPU drainers drain (or a
// recording reads itself, handed over), with no system call while it
// keeps up, where through FUSE
// alone each write is a round trip to the daemon and reads of /proc.
// uetrace run preloads it into the command (LD_PRELOAD); a service started
// another way preloads the file `uetrace preload --write PATH` writes.
//
// The library is C (c/preload.c and c/asm_amd64.S, ~1000 lines with their
// comments): only C can sit inside another program's libc calls — in its
// signal handlers, between its fork and exec — where a Go runtime cannot
// be loaded. It interposes write, writev, pwrite, pwritev and pwritev2 of
// the tree's user_events_data, and the calls that change what a descriptor
// number means (close, dup, dup2, dup3, fcntl's F_DUPFD, close_range,
// closefrom, fclose) so that it knows which descriptors are the tree's;
// sigaction and signal, to keep its SIGSEGV handler (a bad buffer is
// EFAULT, not a crash) behind the program's; vfork. Everything else is
// libc's, untouched.
//
// # How a write goes
//
// A descriptor is the tree's when fstat says it is a regular file with the
// fixed inode number the tree gives user_events_data (DataIno) on the tree
// (UETRACE_TREE, the st_dev uetrace run exports; without it, any FUSE file
// system) and the tree answers a private ioctl (IocID) that names the open
// file. It is decided at the descriptor's first write and kept in a table
// indexed by descriptor number, so that a write to any other descriptor
// costs one load and a compare. At the first write to an open file a
// process sets up a share: it creates a ring set of the R rings the tree's
// IocID answer says (internal/shmring's set, byte for byte: R the daemon's
// drainers, each ring UETRACE_RING_KB or its share of 1 MiB as a Go
// producer's), a table and the set's wake eventfd, and hands them to the
// daemon with a second ioctl (IocShare) on the file — the daemon takes the
// descriptors from the calling process itself (pidfd_getfd), so nothing
// the process says about who it is counts. A write goes into the ring of
// the CPU it runs on (rseq's cpu_id, read right before the reservation);
// a committer that finds the drainer asleep — until any record, or a
// watermark of bytes — adds 1 to the eventfd, after kcmp(2) says the
// descriptor is still the library's (a second descriptor of the eventfd is
// kept to compare with: every eventfd has one inode); a lost one wakes the
// daemon through FUSE (IocWake). A full ring drops the record, counts it
// in that ring and in a loss record the daemon gets later, and looks
// whether the tree is still served (an fstat, ENOTCONN when its daemon is
// gone) at most every 50 ms: a share nobody drains is given up for FUSE. From then on the daemon keeps the table: for each
// write index of the file, the event's enabled state, its fields' size and
// its __data_loc/__rel_loc rules, written before the DIAG_IOCSREG that
// made the index returns and at every change of the event's consumers. The
// library answers each write from it as the kernel would — EFAULT, EINVAL,
// EBADF in user_events_write_core's order — and publishes the record. What
// it cannot decide exactly (an index the table does not have, a record
// whose __data_loc fields fail, more than 1024 iovecs, over 64 KiB) goes
// through FUSE, whose answer is the daemon's. The daemon reads every
// record again as a hostile client's (internal/daemon): the table only
// says what the library answers, never what the daemon delivers.
//
// Fork children, vfork children, exec, threads and signal handlers are
// handled as the doc of c/preload.c says; TestProcesses checks each.
//
// # What goes through FUSE still
//
// Registration (DIAG_IOCSREG, DIAG_IOCSUNREG, DIAG_IOCSDEL), every other
// file of the tree, and the writes of programs the loader does not
// preload into: static binaries, setuid and setgid programs (the loader
// ignores LD_PRELOAD in secure-execution mode), programs that make the
// system call themselves (Go programs other than uetrace's, syscall(2)),
// and programs linked against another C library than glibc (musl). They
// see the same answers, slower.
//
// Known limits: a process that opens user_events_data more than 256 times
// writes the later files through FUSE; a descriptor closed behind the
// library's back (a raw close system call, io_uring) and reused for
// another file keeps "the tree's" in the library's table, so that file's
// writes would go to the ring — set UETRACE_PRELOAD=off for such a
// program; a SIGSEGV handler installed with a raw rt_sigaction replaces
// the library's, and a bad buffer then faults as it would in memcpy.
//
// # Building
//
// The object is committed, built from the source by `go generate
// ./internal/preload` (package build: fixed flags, no build id, no paths,
// so the same compiler and linker give the same bytes), and embedded here:
// `go build ./cmd/uetrace` needs no C compiler. TestCommittedObject
// rebuilds it and compares, where the toolchain is the one that built it.
// Only amd64 is built; on other architectures Library is nil and uetrace
// run says that writes go through FUSE.
package preload
