// Package fuse is a small FUSE server over /dev/fuse: a path-based tree of
// files whose every read, write, ioctl and poll reaches a Go Handle with the
// caller's thread id, answered concurrently (a read that blocks, like a
// trace_pipe's, stalls nothing else), with INTERRUPT cancelling the
// request's context and FUSE_NOTIFY_POLL waking pollers.
//
// The writes of a Handle that promises they never wait (InlineWriter) are
// answered on the goroutine that read them, as libfuse's threads answer
// theirs, and the reading goroutine waits for the next request in the
// kernel rather than in the runtime's poller (reader.go): a write round trip
// then costs what a bare FUSE server's does, plus the handler's own time
// (BENCHMARKS.md, "FUSE write path"). One that waits anyway is bounded
// (StallLimit).
//
// It speaks the protocol of include/uapi/linux/fuse.h, 7.28 or later:
// INIT with FUSE_ATOMIC_O_TRUNC, FUSE_MAX_PAGES (1 MiB writes),
// FUSE_BIG_WRITES and FUSE_ASYNC_READ, not the writeback cache; LOOKUP,
// FORGET, BATCH_FORGET, GETATTR, SETATTR (answered, changing nothing),
// OPEN (always FOPEN_DIRECT_IO; FOPEN_NOFLUSH for a handle that is no
// Flusher; with FOPEN_PASSTHROUGH and a backing file for a Backed handle,
// whose mmap is then that file's: FUSE passthrough, asked for at INIT with
// Options.Passthrough), READ, WRITE, FLUSH, RELEASE, OPENDIR,
// READDIR, RELEASEDIR, STATFS, restricted IOCTL, POLL, INTERRUPT and
// DESTROY. Everything else (creating, removing, renaming, links, xattrs,
// ACCESS, locks, unrestricted ioctls) is answered ENOSYS. Entry and
// attribute timeouts are 0: the tree may change under the kernel, so every
// path walk asks again.
//
// It is not go-fuse: it never answers POLL with ENOSYS and never opens its
// own mount, because a process that serves a FUSE mount must never access
// that mount's files itself (a stat, an open, a readdir, even the kernel's
// walk of a path through it). If such an access is pending when the server
// blocks or dies, it deadlocks for ever. Unmount therefore never blocks on
// the kernel: it aborts the connection through fusectl and detaches the
// mount.
package fuse
