// SPDX-License-Identifier: Apache-2.0
//
// preload.c — libuetrace-preload.so, the interposer: a program that writes
// [write_index][payload] to the user_events_data of uetrace's tree publishes
// the record into the ring of the CPU it runs on, of a shared-memory ring
// set the daemon drains — the format of internal/shmring's sets, byte for
// byte — with no system call, and gets the
// kernel's return value and errno at once. Every other call goes to libc as
// it came. The package doc (doc.go) says what it is for and how it is
// built; this file is all of it but two routines in assembly
// (asm_amd64.S):
//
//   - which descriptors are the tree's user_events_data: fdtab, an array
//     indexed by descriptor number, filled at a descriptor's first write by
//     fstat (the tree's st_dev and the file's fixed st_ino) and a private
//     ioctl the tree alone answers, and kept right by close, dup, dup2,
//     dup3, fcntl(F_DUPFD*), close_range, closefrom and fclose;
//   - per process, per open file, a share: a ring set the process publishes
//     into — internal/shmring's set, one ring per CPU index, R of them as
//     the daemon's drainers are (UET_IOC_ID says R) — and a table the daemon
//     writes for it (each write index's enabled state, size and
//     __data_loc/__rel_loc rules: uet_abi.h), set up at the first write by
//     handing the daemon the descriptors (UET_IOC_SHARE);
//   - the write path, with the kernel's checks in user_events_write_core's
//     order, a copy that turns a bad buffer into EFAULT instead of SIGSEGV,
//     loss records for a full ring, and the daemon's wake-up;
//   - fork (the child's state is wiped: it sets up shares of its own),
//     vfork (the child writes through FUSE), exec (the library loads afresh
//     from LD_PRELOAD).
//
// What it cannot decide exactly it leaves to the real call, which reaches
// the tree through FUSE and gets the daemon's answer: an index the table
// does not have yet, a record whose __data_loc fields the daemon must judge,
// more than 1024 iovecs, a payload over the ring's limit, a vfork child.
//
// Rules for everything reachable from write(2) and the calls above, which
// programs make from signal handlers (async-signal-safe): no malloc, no
// lock, no stdio, no libc call but __errno_location, clock_gettime and
// sched_getcpu (TestAsyncSignalSafe disassembles the object to check);
// system calls raw; shared state changed by atomic operations only, and
// every half-done state one that a handler interrupting it on the same
// thread can meet and step around (it writes through FUSE instead).

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "uet_abi.h"

// dlsym as every glibc since 2.2.5 has it (2.34 moved it into libc.so.6 and
// gave it a new default version; the old one stays), so that the library
// loads on old distributions' glibc as on new ones.
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define IE_TLS __attribute__((tls_model("initial-exec")))

#define relaxed memory_order_relaxed
#define acquire memory_order_acquire
#define release memory_order_release
#define seqcst memory_order_seq_cst
#define acq_rel memory_order_acq_rel

// ---- raw system calls: no errno, no cancellation point, no interposer ----

static inline long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}
#define sys0(n) sys6(n, 0, 0, 0, 0, 0, 0)
#define sys1(n, a) sys6(n, (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys_failed(r) ((unsigned long)(r) > -4096UL)

// ---- what the program called, further down the chain (libc) ----
//
// Each starts as the raw system call, so that a call made before the
// constructor ran (from another library's constructor) works; the
// constructor puts libc's function there (a cancellation point, and any
// other interposer loaded after this one).

static long set_errno(long r)
{
	if (sys_failed(r)) {
		errno = (int)-r;
		return -1;
	}
	return r;
}
static ssize_t raw_write(int fd, const void *b, size_t n) { return set_errno(sys3(SYS_write, fd, b, n)); }
static ssize_t raw_writev(int fd, const struct iovec *v, int c) { return set_errno(sys3(SYS_writev, fd, v, c)); }
static ssize_t raw_pwrite(int fd, const void *b, size_t n, off_t o) { return set_errno(sys4(SYS_pwrite64, fd, b, n, o)); }
static ssize_t raw_pwritev(int fd, const struct iovec *v, int c, off_t o) { return set_errno(sys6(SYS_pwritev, fd, (long)v, c, o, 0, 0)); }
static ssize_t raw_pwritev2(int fd, const struct iovec *v, int c, off_t o, int fl) { return set_errno(sys6(SYS_pwritev2, fd, (long)v, c, o, 0, fl)); }
static int raw_close(int fd) { return (int)set_errno(sys1(SYS_close, fd)); }
static int raw_dup(int fd) { return (int)set_errno(sys1(SYS_dup, fd)); }
static int raw_dup2(int a, int b) { return (int)set_errno(sys2(SYS_dup2, a, b)); }
static int raw_dup3(int a, int b, int f) { return (int)set_errno(sys3(SYS_dup3, a, b, f)); }
static int raw_fcntl(int fd, int cmd, long arg) { return (int)set_errno(sys3(SYS_fcntl, fd, cmd, arg)); }
static int raw_close_range(unsigned a, unsigned b, int f) { return (int)set_errno(sys3(SYS_close_range, a, b, f)); }
static void *raw_mmap(void *a, size_t n, int prot, int fl, int fd, off_t o)
{
	long r = sys6(SYS_mmap, (long)a, (long)n, prot, fl, fd, o);
	return sys_failed(r) ? (errno = (int)-r, MAP_FAILED) : (void *)r;
}

static ssize_t (*next_write)(int, const void *, size_t) = raw_write;
static ssize_t (*next_writev)(int, const struct iovec *, int) = raw_writev;
static ssize_t (*next_pwrite)(int, const void *, size_t, off_t) = raw_pwrite;
static ssize_t (*next_pwritev)(int, const struct iovec *, int, off_t) = raw_pwritev;
static ssize_t (*next_pwritev2)(int, const struct iovec *, int, off_t, int) = raw_pwritev2;
static int (*next_close)(int) = raw_close;
static int (*next_dup)(int) = raw_dup;
static int (*next_dup2)(int, int) = raw_dup2;
static int (*next_dup3)(int, int, int) = raw_dup3;
static int (*next_fcntl)(int, int, long) = raw_fcntl;
static int (*next_close_range)(unsigned, unsigned, int) = raw_close_range;
static void *(*next_mmap)(void *, size_t, int, int, int, off_t) = raw_mmap;
static void (*next_closefrom)(int);
static int (*next_fclose)(FILE *);
static int (*next_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*next_signal)(int, sighandler_t);

// early is libc's function name, looked up when a call comes before the
// constructor ran — from another library's constructor (libselinux's
// calls fclose) — for the calls that have no raw system call to start as.
// dlsym is not async-signal-safe, but no signal handler of the program's
// runs before the program's libraries are initialised.
static __attribute__((noinline)) void *early(const char *name) { return dlsym(RTLD_NEXT, name); }

// ---- configuration, read once by the constructor ----

static int preload_off;        // UETRACE_PRELOAD=off: every call goes to libc
static int abi_v10;            // UETRACE_ABI=v10: the v10 ABI's status page (uetrace run --abi v10)
static uint64_t tree_dev;      // UETRACE_TREE: the tree's st_dev (0: any FUSE file system)
static long page_size = 4096;
#define RING_DEFAULT (1u << 20) // a set's rings together (userevents.DefaultRingKB)
#define RING_MIN (64u << 10)    // the least a ring takes by default (userevents' minRingKB)
static uint64_t ring_size;       // UETRACE_RING_KB: each ring's; 0: ring_bytes decides

// ---- descriptors: which are ours ----
//
// fdtab[fd] is what descriptor fd is, as far as this process's calls
// through libc have shown: bits 0-1 the state, bits 2-9 the file slot
// (files[], when ours), bits 10-31 a generation that every change of the
// number's meaning (close, dup2 onto it...) moves on, so that a
// classification racing with such a change never lands (its
// compare-and-swap fails). A foreign descriptor costs write(2) one load and
// a compare. It is 4 MiB of address space in .bss: pages nobody wrote are
// the shared zero page. Descriptors at or above FD_MAX are never ours
// (their writes go through FUSE).
//
// What the library cannot see — a close made with syscall(2) or io_uring —
// can leave "ours" on a number the program then reuses for another file,
// whose writes would then go to the ring; the package doc says so.

#define FD_MAX (1u << 20)
enum { FD_UNKNOWN = 0, FD_FOREIGN = 1, FD_OURS = 2 };
#define FD_STATE(e) ((e) & 3u)
#define FD_FILE(e) (((e) >> 2) & 0xffu)
#define FD_GEN(e) ((e) >> 10)
#define FD_MAKE(gen, file, st) (((uint32_t)(gen) << 10) | ((uint32_t)(file) << 2) | (uint32_t)(st))

static _Atomic uint32_t fdtab[FD_MAX];
static _Atomic uint32_t fd_high; // one above the highest descriptor ever given a state

// forget makes fd unknown again, in a new generation.
static inline void forget(unsigned fd)
{
	if (fd >= FD_MAX)
		return;
	uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
	if (e == 0 && fd >= atomic_load_explicit(&fd_high, relaxed))
		return; // never touched: its page stays the zero page
	atomic_store_explicit(&fdtab[fd], FD_MAKE(FD_GEN(e) + 1, 0, FD_UNKNOWN), release);
}

static inline void note_high(unsigned fd)
{
	uint32_t h = atomic_load_explicit(&fd_high, relaxed);
	while (fd + 1 > h && !atomic_compare_exchange_weak_explicit(&fd_high, &h, fd + 1, relaxed, relaxed))
		;
}

// ---- open files ----
//
// files[] names the open files (one per open(2) of the tree's
// user_events_data: dup, fork and SCM_RIGHTS share one) this process has
// seen, by the tree's st_dev and the id UET_IOC_ID gives. It is ordinary
// memory, so a fork child inherits it with the descriptors it describes. A
// slot, once published, names its file for the life of the process: a
// process that opens the file more than NFILES times writes the later ones
// through FUSE.

#define NFILES 256
enum { FILE_FREE = 0, FILE_CLAIMED, FILE_SET };

static struct file {
	_Atomic uint32_t state;
	uint64_t dev, id; // written before state becomes FILE_SET
} files[NFILES];

// file_slot returns the slot of file (dev, id), claiming one the first
// time, or NFILES when all are taken. Two threads (or a thread and a
// handler) that claim slots for one file at once both publish theirs, then
// look again and keep the lowest: one of them always sees the other's.
static unsigned file_slot(uint64_t dev, uint64_t id)
{
	for (;;) {
		unsigned mine = NFILES;
		for (unsigned i = 0; i < NFILES; i++) {
			uint32_t st = atomic_load_explicit(&files[i].state, acquire);
			if (st == FILE_SET && files[i].dev == dev && files[i].id == id)
				return i;
			if (st == FILE_FREE && mine == NFILES) {
				uint32_t z = FILE_FREE;
				if (atomic_compare_exchange_strong_explicit(&files[i].state, &z, FILE_CLAIMED, acq_rel, relaxed))
					mine = i;
			}
		}
		if (mine == NFILES)
			return NFILES;
		files[mine].dev = dev;
		files[mine].id = id;
		atomic_store_explicit(&files[mine].state, FILE_SET, seqcst);
		for (unsigned i = 0; i < mine; i++) {
			if (atomic_load_explicit(&files[i].state, seqcst) == FILE_SET && files[i].dev == dev && files[i].id == id) {
				atomic_store_explicit(&files[mine].state, FILE_FREE, release);
				return i;
			}
		}
		return mine;
	}
}

// ---- this process ----

enum { SH_NONE = 0, SH_SETUP, SH_READY, SH_FAILED };

// A ring is one ring of a share's set, as its producer sees it
// (shmring.Producer): its own line, so that threads on different CPUs
// never write one.
struct ring {
	uint8_t *data; // its data area, mapped twice back to back
	uint64_t key;
	_Atomic uint64_t *head, *tail, *dropped, *dropbytes;
	_Atomic uint32_t *sleeping;
	_Atomic uint64_t tailc; // the tail this process last loaded (shmring.Producer's cached tail)
} __attribute__((aligned(64)));

// A share is this process's ring set and table for one open file.
struct share {
	_Atomic uint32_t state;
	uint32_t nslots;
	uint32_t nrings;    // R, the daemon's ring count
	uint32_t pow2;      // R is a power of two: a mask picks the ring
	struct ring *rings; // R of them, in a mapping of their own
	uint8_t *base;      // the set's mapping: R × (header page, data twice)
	uint64_t size, mask;
	uint64_t set_total, rings_total, table_total;
	const struct uet_slot *slots;
	// The set's wake eventfd, and a second descriptor of it that says the
	// first is still it (kcmp; see send_wake); pid is this process's.
	_Atomic int wake_fd, wake_ref;
	int32_t pid;
	// Records the full ring made us drop, not told yet in a loss record:
	// per write index, and which indexes have some.
	_Atomic uint32_t lossy;
	_Atomic uint64_t lossbits[UET_TABLE_SLOTS / 64];
	_Atomic uint64_t lost[UET_TABLE_SLOTS];
	_Atomic uint64_t voids, wakes_lost; // uetrace_preload_stats
	// look_at is when (now_ns) a full ring's drop next looks whether the
	// tree is still served (drain_gone): at the first drop, then at most
	// every LOOK_GONE_NS while drops go on — again and again, since a
	// daemon that was alive when the ring filled may go a moment later,
	// and then nothing ever empties it.
	_Atomic uint64_t look_at;
};

// proc is this process's: one mapping with MADV_WIPEONFORK, so that a fork
// child — however made: fork(), _Fork(), clone() without CLONE_VM — finds it
// zero: no shares, no epoch, and sets up shares of its own at its first
// writes, in its own name. Its parent's rings are not even mapped in it
// (MADV_DONTFORK). No pthread_atfork handler would do: _Fork and a raw clone
// run none.
struct proc {
	_Atomic uint64_t epoch; // nonzero once this process initialised; new in every process
	_Atomic uint64_t fallbacks; // writes of ours that went through FUSE
	struct share sh[NFILES]; // by file slot
};
static struct proc *P;

// Set by vfork() (asm_amd64.S) in the child, which runs on the parent's
// memory and on this thread's TLS until it execs or exits.
HIDDEN __thread uint8_t uet_in_vfork_child IE_TLS;

// The calling thread's id, cached with the epoch it was taken in: a fork
// child's epoch differs, so its copy of the forking thread's cache misses.
static __thread struct {
	uint64_t epoch;
	int32_t tid;
} tls_tid IE_TLS;

// active says whether the library may act: not off, started (a call made
// from another library's constructor before ours ran finds P unset), and
// not in a vfork child, which must not change the parent's state for
// descriptors of its own.
static inline int active(void) { return likely(P != NULL) && likely(!uet_in_vfork_child) && likely(!preload_off); }

// The shares set up in this process: close and its kin look at them only
// when there are some, up to the highest slot.
static _Atomic uint32_t sh_high;

static uint64_t rand64(void)
{
	uint64_t v = 0;
	while (sys3(SYS_getrandom, &v, sizeof v, 0) != (long)sizeof v)
		;
	return v;
}

// proc_init gives this process its epoch: once in the first process and
// again in each fork child (where the mapping was wiped).
static void proc_init(void)
{
	if (atomic_load_explicit(&P->epoch, acquire) != 0)
		return;
	uint64_t zero = 0, ep = rand64() | 1;
	atomic_compare_exchange_strong_explicit(&P->epoch, &zero, ep, release, relaxed);
}

static inline int32_t cur_tid(void)
{
	uint64_t ep = atomic_load_explicit(&P->epoch, relaxed);
	if (likely(tls_tid.epoch == ep))
		return tls_tid.tid;
	int32_t t = (int32_t)sys0(SYS_gettid);
	tls_tid.tid = t;
	__asm__ volatile("" ::: "memory"); // a handler on this thread sees the tid before the epoch
	tls_tid.epoch = ep;
	return t;
}

// ---- the stamp: time, CPU ----

// The CPU from glibc's struct rseq (2.35 and later), else sched_getcpu (the
// vDSO's getcpu). Not LSL on the vDSO's segment, as internal/stamp may use:
// valgrind does not know that instruction, and every program run under it
// with the library would die of SIGILL.
static ptrdiff_t rseq_off = -1;

static inline uint32_t cur_cpu(void)
{
	if (likely(rseq_off >= 0)) {
		int32_t c = *(volatile int32_t *)((char *)__builtin_thread_pointer() + rseq_off + 4);
		if (likely(c >= 0))
			return (uint32_t)c;
	}
	int c = sched_getcpu();
	return c < 0 ? 0 : (uint32_t)c;
}

// now_ns is CLOCK_MONOTONIC, the daemon's trace clock: the vDSO, no system
// call, async-signal-safe.
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// ---- the fault-tolerant copy (asm_amd64.S) and its handler ----
//
// uet_copy_from_user returns the bytes it did not copy: a load from the
// caller's buffer that faults ends in the SIGSEGV/SIGBUS handler below,
// which moves the fault to the routine's fixup — the kernel's exception
// table in small. The handler is installed only where the program has none
// (SIG_DFL) at start-up; the program's later handlers are kept here by the
// interposed sigaction and signal, and chained to for every fault that is
// not the copy's. A handler installed with a raw rt_sigaction (the Go
// runtime of a cgo program, some JITs) replaces ours: a bad buffer then
// faults as memcpy would.

HIDDEN extern size_t uet_copy_from_user(void *dst, const void *src, size_t n);
HIDDEN extern char uet_copy_begin[], uet_copy_end[], uet_copy_fixup[];

static _Atomic int fault_installed[NSIG];

// The program's SIGSEGV and SIGBUS dispositions, under a sequence lock:
// sigaction writes them (odd while it does), the handler reads them and
// reads again when the sequence moved.
static struct {
	_Atomic uint32_t seq;
	struct sigaction act;
} prog[NSIG];

static void prog_get(int sig, struct sigaction *out)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&prog[sig].seq, acquire);
		if (s & 1)
			continue;
		__builtin_memcpy(out, &prog[sig].act, sizeof *out);
		atomic_thread_fence(acquire);
		if (atomic_load_explicit(&prog[sig].seq, relaxed) == s)
			return;
	}
}

static void prog_set(int sig, const struct sigaction *act)
{
	// Writers are the program's own sigaction calls: one at a time,
	// unless a handler calls sigaction while interrupting another call of
	// it, which then waits a bounded while and writes anyway.
	uint32_t s = atomic_load_explicit(&prog[sig].seq, relaxed);
	for (int spins = 0; (s & 1) || !atomic_compare_exchange_weak_explicit(&prog[sig].seq, &s, s + 1, acquire, relaxed); spins++) {
		if (spins > 1000) {
			s = atomic_load_explicit(&prog[sig].seq, relaxed) | 1;
			break;
		}
		s = atomic_load_explicit(&prog[sig].seq, relaxed);
	}
	atomic_thread_fence(release);
	__builtin_memcpy(&prog[sig].act, act, sizeof *act);
	atomic_store_explicit(&prog[sig].seq, (s | 1) + 1, release);
}

static void on_fault(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	if (pc >= (uintptr_t)uet_copy_begin && pc < (uintptr_t)uet_copy_end && si->si_code > 0) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)uet_copy_fixup;
		return; // the copy returns the bytes it did not copy: EFAULT
	}
	// Not the copy's: what the program asked for.
	struct sigaction a;
	prog_get(sig, &a);
	if (a.sa_flags & SA_SIGINFO) {
		a.sa_sigaction(sig, si, ctx);
	} else if (a.sa_handler == SIG_IGN) {
		return;
	} else if (a.sa_handler == SIG_DFL) {
		// The default action: put it back, and let the fault happen again
		// (or, for a signal someone sent, send it again).
		struct {
			void *h;
			unsigned long flags;
			void *restorer;
			uint64_t mask;
		} k = { SIG_DFL, 0, 0, 0 };
		sys4(SYS_rt_sigaction, sig, &k, 0, 8);
		atomic_store_explicit(&fault_installed[sig], 0, release);
		if (si->si_code <= 0)
			sys3(SYS_tgkill, sys0(SYS_getpid), sys0(SYS_gettid), sig);
	} else {
		a.sa_handler(sig);
	}
}

static void install_fault_handler(int sig)
{
	struct sigaction old, sa;
	if (!next_sigaction || next_sigaction(sig, NULL, &old) != 0)
		return;
	if (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
		return; // the program (or a library) has one: a bad buffer faults as it would
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK | SA_RESTART;
	prog_set(sig, &old);
	if (next_sigaction(sig, &sa, NULL) == 0)
		atomic_store_explicit(&fault_installed[sig], 1, release);
}

EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	if (unlikely(!next_sigaction))
		next_sigaction = early("sigaction");
	if (sig > 0 && sig < NSIG && atomic_load_explicit(&fault_installed[sig], acquire)) {
		struct sigaction prev;
		prog_get(sig, &prev);
		if (act)
			prog_set(sig, act);
		if (old)
			__builtin_memcpy(old, &prev, sizeof prev);
		return 0;
	}
	return next_sigaction(sig, act, old);
}

// signal(): glibc's calls its internal sigaction, not the interposed one,
// so the two signals the library handles are kept here; every other goes
// to libc as it came (its SA_RESTART and siginterrupt rules).
EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	if (sig > 0 && sig < NSIG && atomic_load_explicit(&fault_installed[sig], acquire)) {
		struct sigaction sa, old;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = h;
		sa.sa_flags = SA_RESTART;
		sigaddset(&sa.sa_mask, sig);
		sigaction(sig, &sa, &old);
		return old.sa_handler;
	}
	if (unlikely(!next_signal))
		next_signal = early("signal");
	return next_signal(sig, h);
}

// ---- the ring set: internal/shmring's SetProducer, in C ----
//
// reserve, commit and wake follow shmring's Producer.TryReserve,
// Reservation.Commit and Producer.wake step for step, on the ring of the
// CPU the caller runs on (SetProducer.For: cpu mod R); shmring's package
// doc gives the memory-ordering argument, set.go the set's layout. The
// daemon checks every record as a hostile producer's.

static inline uint32_t ring_stamp(const struct ring *r, uint64_t pos) { return (uint32_t)(pos >> 3) ^ (uint32_t)r->key; }
static inline uint32_t ring_check(const struct ring *r, uint64_t pos) { return (uint32_t)(pos >> 35) ^ (uint32_t)(r->key >> 32); }
static inline uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }
#define MAX_STALE 64

// ring_of is the ring of CPU cpu: SetProducer.Index.
static inline struct ring *ring_of(const struct share *s, uint32_t cpu)
{
	return &s->rings[s->pow2 ? cpu & (s->nrings - 1) : cpu % s->nrings];
}

// reserve takes the space for a record of plen payload bytes in ring r,
// stores its first word (committed bit clear) and its constant header
// fields, and returns it; NULL when the ring has no room.
static inline uint8_t *reserve(const struct share *s, struct ring *r, uint32_t widx, uint64_t plen, uint64_t *wordp)
{
	if (plen > s->size - UET_REC_HEADER)
		return NULL;
	uint64_t n = plen + UET_REC_HEADER, sz = align8(n), pos;
	int stale = 0;
	for (;;) {
		// Head first, then tail: tail only grows.
		uint64_t h = atomic_load_explicit(r->head, acquire);
		uint64_t t = atomic_load_explicit(&r->tailc, relaxed);
		if (h - t > s->size - sz) {
			t = atomic_load_explicit(r->tail, acquire);
			atomic_store_explicit(&r->tailc, t, relaxed);
			if (t - h - 1 < s->size && stale < MAX_STALE) {
				stale++; // a head older than the tail: load both again
				continue;
			}
			if (h - t > s->size - sz)
				return NULL;
		}
		if (atomic_compare_exchange_weak_explicit(r->head, &h, h + sz, seqcst, relaxed)) {
			pos = h;
			break;
		}
	}
	uint8_t *rec = r->data + (pos & s->mask);
	__builtin_prefetch(r->data + ((pos + UET_PREFETCH_AHEAD) & s->mask), 1, 3); // PREFETCHW
	uint64_t word = n | (uint64_t)ring_stamp(r, pos) << 32;
	// The first store, a plain MOV (shmring's storeFirst): from here a
	// consumer that finds the producer dead knows the record's length.
	*(volatile uint64_t *)rec = word;
	if (sz > n)
		*(uint64_t *)(rec + sz - 8) = 0; // the padding: no stale bytes that look like a header
	*(uint32_t *)(rec + 16) = widx;
	*(uint32_t *)(rec + 28) = ring_check(r, pos);
	*wordp = word;
	return rec;
}

// stamp_rec writes the time, thread and CPU: after the reservation, as the
// daemon's merge requires (shmring.Reservation.Stamp). cpu is the one the
// ring was chosen by: the record says where its producer read it.
static inline void stamp_rec(uint8_t *rec, uint32_t cpu)
{
	*(uint64_t *)(rec + 8) = now_ns();
	*(uint32_t *)(rec + 20) = (uint32_t)cur_tid();
	*(uint32_t *)(rec + 24) = cpu;
}

static void wake(struct share *s, struct ring *r, int fd);
static long send_wake(struct share *s);
#define WAKE_LOST (-10000) // send_wake: the descriptor is not the set's eventfd any more

// commit publishes the record (XCHG: sequentially consistent, as Go's
// atomic store), then looks at the consumer's sleeping word.
static inline void commit(struct share *s, struct ring *r, uint8_t *rec, uint64_t word, int fd)
{
	atomic_store_explicit((_Atomic uint64_t *)rec, word | UET_REC_COMMITTED, seqcst);
	if (unlikely(atomic_load_explicit(r->sleeping, relaxed) != 0))
		wake(s, r, fd);
}

// wake is the rare path: the daemon said it sleeps, until the ring holds
// anything (1) or w bytes (w > 1: a watermark). As shmring's
// Producer.wake: a watermark is checked on this process's copy of the
// tail, which makes the ring look fuller than it is, and only if that
// passes on the shared tail; the fill is head, loaded after this commit.
// The first publisher to take the word to 0 adds 1 to the set's eventfd —
// after checking that the descriptor is still that eventfd, since the
// program may have closed it behind our back with a raw system call and
// reused the number: no byte ever goes to a file of the program's. A lost
// eventfd is replaced by a FUSE request on the file written
// (UET_IOC_WAKE).
static void wake(struct share *s, struct ring *r, int fd)
{
	uint32_t w = atomic_load_explicit(r->sleeping, seqcst);
	if (w > 1) {
		uint64_t h = atomic_load_explicit(r->head, acquire);
		if (h - atomic_load_explicit(&r->tailc, relaxed) < w)
			return;
		uint64_t t = atomic_load_explicit(r->tail, acquire);
		atomic_store_explicit(&r->tailc, t, relaxed);
		if (h - t < w)
			return;
	}
	if (w == 0 || !atomic_compare_exchange_strong_explicit(r->sleeping, &w, 0, seqcst, relaxed))
		return;
	if (send_wake(s) != WAKE_LOST)
		return;
	atomic_fetch_add_explicit(&s->wakes_lost, 1, relaxed);
	if (fd >= 0)
		sys3(SYS_ioctl, fd, UET_IOC_WAKE, 0);
}

// send_wake adds 1 to the set's eventfd if the descriptor is still that
// eventfd — the same open file as wake_ref, which kcmp(2) says without
// reading either (every eventfd has one inode: fstat cannot tell ours from
// the program's) — and returns write's answer, or WAKE_LOST. The daemon
// never reads the eventfd (its epoll is edge-triggered): a full counter is
// EAGAIN, harmless.
static long send_wake(struct share *s)
{
	int w = atomic_load_explicit(&s->wake_fd, acquire), ref = atomic_load_explicit(&s->wake_ref, acquire);
	if (w < 0 || ref < 0 || sys6(SYS_kcmp, s->pid, s->pid, KCMP_FILE, w, ref, 0) != 0)
		return WAKE_LOST;
	uint64_t one = 1;
	return sys3(SYS_write, w, &one, sizeof one);
}

static void drop(struct ring *r, uint64_t plen)
{
	atomic_fetch_add_explicit(r->dropped, 1, relaxed);
	atomic_fetch_add_explicit(r->dropbytes, align8(plen + UET_REC_HEADER), relaxed);
}

// lose counts a record of idx dropped; the index's bit and the share's
// flag are set only when its count was 0, so a run of drops costs one
// atomic add each (and shmring's two counters).
static void lose(struct share *s, uint32_t idx)
{
	if (atomic_fetch_add_explicit(&s->lost[idx], 1, relaxed) == 0 ||
	    !(atomic_load_explicit(&s->lossbits[idx / 64], relaxed) & (1ull << (idx % 64)))) {
		atomic_fetch_or_explicit(&s->lossbits[idx / 64], 1ull << (idx % 64), relaxed);
		atomic_store_explicit(&s->lossy, 1, release);
	}
}

// has_room says whether a record of sz bytes (aligned) would fit in ring r
// now, as reserve decides, without reserving: while the ring stays full,
// writes do not try to publish their losses record by record.
static inline int has_room(const struct share *s, struct ring *r, uint64_t sz)
{
	uint64_t h = atomic_load_explicit(r->head, acquire);
	uint64_t t = atomic_load_explicit(&r->tailc, relaxed);
	if (h - t <= s->size - sz)
		return 1;
	t = atomic_load_explicit(r->tail, acquire);
	atomic_store_explicit(&r->tailc, t, relaxed);
	return h - t <= s->size - sz;
}

// publish_losses tells the daemon, in loss records in the ring of the CPU
// the caller runs on, of the records the full rings made us drop (a loss
// belongs to its write index, not to a ring: the daemon places it before
// the ring's next record); what does not fit waits (TryReserve: not a
// drop). It reports whether everything was told.
static int publish_losses(struct share *s, int fd)
{
	uint32_t cpu = cur_cpu();
	struct ring *r = ring_of(s, cpu);
	if (!has_room(s, r, UET_REC_HEADER + UET_LOST_PAYLOAD))
		return 0;
	atomic_store_explicit(&s->lossy, 0, seqcst);
	for (unsigned w = 0; w < UET_TABLE_SLOTS / 64; w++) {
		uint64_t bits = atomic_load_explicit(&s->lossbits[w], relaxed);
		while (bits) {
			unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);
			bits &= bits - 1;
			uint64_t n = atomic_exchange_explicit(&s->lost[i], 0, acq_rel);
			if (n == 0)
				continue;
			uint64_t word;
			uint8_t *rec = reserve(s, r, UET_LOST_INDEX, UET_LOST_PAYLOAD, &word);
			if (!rec) {
				atomic_fetch_add_explicit(&s->lost[i], n, relaxed);
				atomic_store_explicit(&s->lossy, 1, relaxed);
				return 0;
			}
			stamp_rec(rec, cpu);
			*(uint32_t *)(rec + 32) = i;
			*(uint32_t *)(rec + 36) = 0;
			*(uint64_t *)(rec + 40) = n;
			commit(s, r, rec, word, fd);
		}
	}
	return 1;
}

// tell_losses is publish_losses where the caller may wait (close, exit):
// when they do not fit, the daemon is asked to drain the rings first
// (UET_IOC_FLUSH on fd, a descriptor of the file), once.
static void tell_losses(struct share *s, int fd)
{
	if (!atomic_load_explicit(&s->lossy, acquire) || publish_losses(s, fd) || fd < 0)
		return;
	sys3(SYS_ioctl, fd, UET_IOC_FLUSH, 0);
	publish_losses(s, fd);
}

// ---- setting a share up (once per file and process) ----

static int make_memfd(const char *name, uint64_t len)
{
	int fd = (int)sys2(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (sys2(SYS_ftruncate, fd, len) != 0 ||
	    sys3(SYS_fcntl, fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
		sys1(SYS_close, fd);
		return -1;
	}
	return fd;
}

// set_create is shmring.CreateSet: a sealed memfd of P + n·(P+S) bytes,
// ring k's header page at P + k·(P+S) and its data after it, each ring's
// data mapped twice back to back, each header with a key of its own. The
// rings' descriptors get a mapping of their own: n is the daemon's, up to
// shmring.MaxSetRings.
static int set_create(struct share *s, uint32_t n, uint64_t size)
{
	uint64_t pg = (uint64_t)page_size, span = pg + 2 * size;
	uint64_t rtotal = ((uint64_t)n * sizeof(struct ring) + pg - 1) & ~(pg - 1);
	long rs = sys6(SYS_mmap, 0, rtotal, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sys_failed(rs))
		return -1;
	s->rings = (struct ring *)rs;
	s->rings_total = rtotal;
	sys3(SYS_madvise, rs, rtotal, MADV_DONTFORK);
	int fd = make_memfd("uetrace-ringset", pg + (uint64_t)n * (pg + size));
	if (fd < 0)
		return -1;
	uint64_t total = (uint64_t)n * span;
	long base = sys6(SYS_mmap, 0, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (sys_failed(base)) {
		sys1(SYS_close, fd);
		return -1;
	}
	s->base = (uint8_t *)base;
	s->set_total = total;
	sys3(SYS_madvise, base, total, MADV_DONTFORK); // a fork child never writes in our name
	s->size = size;
	s->mask = size - 1;
	for (uint32_t k = 0; k < n; k++) {
		long b = base + (long)(k * span), off = (long)(pg + k * (pg + size));
		long r1 = sys6(SYS_mmap, b, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off);
		long r2 = sys6(SYS_mmap, b + pg, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off + pg);
		long r3 = sys6(SYS_mmap, b + pg + size, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off + pg);
		if (r1 != b || r2 != b + (long)pg || r3 != b + (long)(pg + size)) {
			sys1(SYS_close, fd);
			return -1;
		}
		uint8_t *h = (uint8_t *)b;
		struct ring *r = &s->rings[k];
		r->data = h + pg;
		r->key = rand64();
		*(uint32_t *)(h + UET_RING_OFF_VERSION) = UET_RING_VERSION;
		*(uint32_t *)(h + UET_RING_OFF_DATAOFF) = (uint32_t)pg;
		*(uint64_t *)(h + UET_RING_OFF_SIZE) = size;
		*(uint64_t *)(h + UET_RING_OFF_KEY) = r->key;
		r->head = (_Atomic uint64_t *)(h + UET_RING_OFF_HEAD);
		r->tail = (_Atomic uint64_t *)(h + UET_RING_OFF_TAIL);
		r->sleeping = (_Atomic uint32_t *)(h + UET_RING_OFF_SLEEPING);
		r->dropped = (_Atomic uint64_t *)(h + UET_RING_OFF_DROPPED);
		r->dropbytes = (_Atomic uint64_t *)(h + UET_RING_OFF_DROPBYTES);
		atomic_store_explicit(&r->tailc, 0, relaxed);
		// The magic last: a reader of a half-made header sees no ring.
		atomic_store_explicit((_Atomic uint64_t *)(h + UET_RING_OFF_MAGIC), UET_RING_MAGIC, seqcst);
	}
	s->nrings = n;
	s->pow2 = (n & (n - 1)) == 0;
	return fd;
}

// ring_bytes is each ring's data size for a set of n rings: UETRACE_RING_KB,
// else — as a Go producer's (userevents.DefaultRingKB) — each ring's share
// of RING_DEFAULT, a power of two, at least RING_MIN.
static uint64_t ring_bytes(uint32_t n)
{
	if (ring_size)
		return ring_size;
	uint64_t b = RING_MIN;
	while (b * 2 <= RING_DEFAULT / n)
		b *= 2;
	return b;
}

// table_create makes the table's memfd, mapped read-only here: the daemon
// writes it, this process only reads it.
static int table_create(struct share *s)
{
	uint64_t len = (UET_TABLE_HDR + (uint64_t)UET_TABLE_SLOTS * UET_SLOT_SIZE + page_size - 1) & ~(uint64_t)(page_size - 1);
	int fd = make_memfd("uetrace-table", len);
	if (fd < 0)
		return -1;
	long m = sys6(SYS_mmap, 0, len, PROT_READ, MAP_SHARED, fd, 0);
	if (sys_failed(m)) {
		sys1(SYS_close, fd);
		return -1;
	}
	sys3(SYS_madvise, m, len, MADV_DONTFORK);
	s->slots = (const struct uet_slot *)((const uint8_t *)m + UET_TABLE_HDR);
	s->table_total = len;
	return fd;
}

// high_base is where the library numbers its own descriptors: above
// where programs number theirs, near the top of RLIMIT_NOFILE.
static long high_base(void)
{
	struct rlimit rl;
	if (sys2(SYS_getrlimit, RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 128 && rl.rlim_cur < (1u << 30))
		return (long)rl.rlim_cur - 64;
	return 64;
}

// high_fd moves fd to high_base or above, close-on-exec.
static int high_fd(int fd)
{
	long h = sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, high_base());
	if (h < 0)
		return fd;
	sys1(SYS_close, fd);
	return (int)h;
}

// share_setup makes this process's share of file slot f, through
// descriptor fd of the file. Whoever wins the state's compare-and-swap does
// it; every other caller meanwhile — another thread, a signal handler on
// this one — writes through FUSE. A share the daemon refuses (its limits,
// a tree without shares) leaves the file to FUSE in this process.
static struct share *share_setup(unsigned f, int fd)
{
	struct share *s = &P->sh[f];
	uint32_t st = SH_NONE;
	if (!atomic_compare_exchange_strong_explicit(&s->state, &st, SH_SETUP, acquire, acquire))
		return st == SH_READY ? s : NULL;
	proc_init();
	int sfd = -1, tfd = -1, efd = -1, ref = -1;
	// R, the daemon's ring count: UET_IOC_ID's answer (classify checked
	// its ABI; asked again here, once per share, rather than kept per
	// file).
	struct uet_id id = { 0 };
	if (sys3(SYS_ioctl, fd, UET_IOC_ID, &id) != 0 || id.abi != UET_ABI_VERSION ||
	    id.rings == 0 || id.rings > UET_MAX_RINGS)
		goto fail;
	s->pid = (int32_t)sys0(SYS_getpid);
	if ((sfd = set_create(s, id.rings, ring_bytes(id.rings))) < 0 || (tfd = table_create(s)) < 0 ||
	    (efd = (int)sys2(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		goto fail;
	efd = high_fd(efd);
	long r = sys3(SYS_fcntl, efd, F_DUPFD_CLOEXEC, efd + 1);
	if (r < 0)
		goto fail;
	ref = (int)r;
	struct uet_share req = {
		.size = sizeof req,
		.abi = UET_ABI_VERSION,
		.set_fd = sfd,
		.wake_fd = efd,
		.table_fd = tfd,
		.file_id = files[f].id,
	};
	// The daemon takes the three descriptors from this process and has
	// filled the table when the ioctl returns.
	if (sys3(SYS_ioctl, fd, UET_IOC_SHARE, &req) != 0 || req.nslots == 0)
		goto fail;
	s->nslots = req.nslots < UET_TABLE_SLOTS ? req.nslots : UET_TABLE_SLOTS;
	sys1(SYS_close, sfd);
	sys1(SYS_close, tfd);
	atomic_store_explicit(&s->wake_ref, ref, release);
	atomic_store_explicit(&s->wake_fd, efd, release);
	atomic_store_explicit(&s->state, SH_READY, release);
	uint32_t h = atomic_load_explicit(&sh_high, relaxed);
	while (f + 1 > h && !atomic_compare_exchange_weak_explicit(&sh_high, &h, f + 1, release, relaxed))
		;
	return s;
fail:
	for (int i = 0, fds[4] = { sfd, tfd, efd, ref }; i < 4; i++)
		if (fds[i] >= 0)
			sys1(SYS_close, fds[i]);
	if (s->base)
		sys2(SYS_munmap, s->base, s->set_total);
	if (s->rings)
		sys2(SYS_munmap, s->rings, s->rings_total);
	if (s->slots)
		sys2(SYS_munmap, (const uint8_t *)s->slots - UET_TABLE_HDR, s->table_total);
	s->base = NULL;
	s->rings = NULL;
	s->slots = NULL;
	s->nrings = 0;
	atomic_store_explicit(&s->state, SH_FAILED, release);
	return NULL;
}

// ---- classification: is fd the tree's user_events_data? ----

// is_tree says whether a file fstat described may be the tree's
// user_events_data: a regular file with the tree's fixed inode number, on
// the tree (UETRACE_TREE, which uetrace run sets) or, without it, on some
// FUSE file system — a service's mount of the tree. The private ioctl that
// follows decides.
static int is_tree(int fd, const struct stat *st, uint64_t ino)
{
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_ino != ino)
		return 0;
	if (tree_dev)
		return (uint64_t)st->st_dev == tree_dev;
	struct statfs sf;
	return sys2(SYS_fstatfs, fd, &sf) == 0 && (uint64_t)sf.f_type == UET_FUSE_MAGIC;
}

// classify decides once what fd is — one fstat, and for a candidate an
// F_GETFL and UET_IOC_ID — and records it unless the number changed
// meaning meanwhile. It returns the entry to act on. A descriptor open
// only for reading is foreign: its writes are the VFS's EBADF, through
// FUSE.
static uint32_t classify(int fd, uint32_t e0)
{
	struct stat st;
	if (sys2(SYS_fstat, fd, &st) != 0)
		return FD_MAKE(FD_GEN(e0), 0, FD_FOREIGN); // not open: libc says EBADF; nothing recorded
	uint32_t state = FD_FOREIGN, f = 0;
	if (is_tree(fd, &st, UET_DATA_INO)) {
		long fl = sys3(SYS_fcntl, fd, F_GETFL, 0);
		struct uet_id id = { 0 };
		long r = fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) == O_RDONLY ? -EBADF : sys3(SYS_ioctl, fd, UET_IOC_ID, &id);
		if (r == -EINTR || r == -EAGAIN)
			return FD_MAKE(FD_GEN(e0), 0, FD_FOREIGN); // ask again at the next write
		if (r == 0 && id.abi == UET_ABI_VERSION && id.file_id != 0) {
			f = file_slot((uint64_t)st.st_dev, id.file_id);
			if (f < NFILES)
				state = FD_OURS;
			else
				f = 0;
		}
	}
	uint32_t e = FD_MAKE(FD_GEN(e0), f, state);
	note_high((unsigned)fd);
	atomic_compare_exchange_strong_explicit(&fdtab[fd], &e0, e, acq_rel, relaxed);
	return e;
}

// ---- the write path ----

#define FALLBACK (-1000) // not decided here: the caller makes the real call (FUSE)
#define IOV_CHUNK 16     // iovecs copied from the caller at a time
// UIO_MAXIOV (sys/uio.h): more iovecs are the VFS's EINVAL, through FUSE.

static inline ssize_t fail(int e)
{
	errno = e;
	return -1;
}

// iovs walks the caller's iovec array, copied IOV_CHUNK at a time with the
// fault-tolerant copy (the array itself may be unreadable: the VFS's
// EFAULT).
struct iovs {
	const struct iovec *user;
	int cnt, base, have;
	struct iovec v[IOV_CHUNK];
};

// iov_at loads iovec i (from 0 up, in order) into the window; -1 if the
// array faulted there.
static inline int iov_at(struct iovs *s, int i, const struct iovec **out)
{
	if (i < s->base || i >= s->base + s->have) {
		int k = s->cnt - i < IOV_CHUNK ? s->cnt - i : IOV_CHUNK;
		if (uet_copy_from_user(s->v, s->user + i, (size_t)k * sizeof s->v[0]))
			return -1;
		s->base = i;
		s->have = k;
	}
	*out = &s->v[i - s->base];
	return 0;
}

// gather copies bytes [from, from+n) of the iovecs' concatenation to dst:
// 0, or nonzero where the caller's memory faulted.
static int gather(uint8_t *dst, struct iovs *s, uint64_t from, uint64_t n)
{
	for (int i = 0; i < s->cnt && n; i++) {
		const struct iovec *v;
		if (iov_at(s, i, &v))
			return 1;
		uint64_t l = v->iov_len;
		if (from >= l) {
			from -= l;
			continue;
		}
		uint64_t k = l - from < n ? l - from : n;
		if (uet_copy_from_user(dst, (const uint8_t *)v->iov_base + from, k))
			return 1;
		dst += k;
		n -= k;
		from = 0;
	}
	return 0;
}

// drain_gone says whether nobody drains the share's rings any more, and if
// so gives the share up: this process writes the file through FUSE from
// now on. It wakes the daemon (a drainer asleep at a watermark its ring
// passed long ago would be a bug, but costs nothing to end), then asks the
// file: a tree no longer served — its daemon gone — answers ENOTCONN (an
// fstat is a FUSE round trip: drops make it at most every LOOK_GONE_NS).
static int drain_gone(struct share *s, int fd)
{
	send_wake(s);
	struct stat st;
	if (sys2(SYS_fstat, fd, &st) != -ENOTCONN)
		return 0;
	atomic_store_explicit(&s->state, SH_FAILED, release);
	return 1;
}

// LOOK_GONE_NS bounds how often a full ring's drops look whether the tree
// is still served: a look is a FUSE round trip (tens to hundreds of
// microseconds), a drop tens of nanoseconds, so 20 looks a second cost the
// writer under 0.5 % and a tree that went is noticed within 50 ms.
#define LOOK_GONE_NS 50000000u

// look_gone says whether this drop looks at the drainer (drain_gone): the
// first of the share, then one at most every LOOK_GONE_NS — the thread
// that moves look_at on does.
static inline int look_gone(struct share *s)
{
	uint64_t at = atomic_load_explicit(&s->look_at, relaxed), now = now_ns();
	return now >= at && atomic_compare_exchange_strong_explicit(&s->look_at, &at, now + LOOK_GONE_NS, relaxed, relaxed);
}

// probe reads a byte of each page of the payload: a write whose record the
// full ring drops still answers EFAULT for a bad buffer, as the kernel's.
static int probe(struct iovs *s, uint64_t from)
{
	for (int i = 0; i < s->cnt; i++) {
		const struct iovec *v;
		if (iov_at(s, i, &v))
			return 1;
		uint64_t l = v->iov_len, o = 0;
		if (from >= l) {
			from -= l;
			continue;
		}
		const uint8_t *b = (const uint8_t *)v->iov_base + from;
		l -= from;
		from = 0;
		uint8_t t;
		for (; o < l; o = (o | (uint64_t)(page_size - 1)) + 1)
			if (uet_copy_from_user(&t, b + o, 1))
				return 1;
		if (l && uet_copy_from_user(&t, b + l - 1, 1))
			return 1;
	}
	return 0;
}

// valid checks the record's __data_loc/__rel_loc fields as the kernel's
// user_event_validate does, on our copy in the ring (rec: the record as the
// trace will hold it would start with the 8-byte header, which is not in
// the ring; payload is what follows it): 1 valid, 0 not.
static int valid(const struct uet_slot *sl, uint32_t nloc, const uint8_t *payload, uint64_t plen, int32_t tid)
{
	uint64_t rlen = 8 + plen;
	for (uint32_t k = 0; k < nloc; k++) {
		uint32_t l = sl->loc[k], off = UET_LOC_OFF(l);
		if (off < 8 || off + 4 > rlen)
			return 0;
		uint32_t v;
		__builtin_memcpy(&v, payload + (off - 8), 4);
		uint64_t start = (l & UET_LOC_REL) ? off + 4 + (v & 0xffff) : (v & 0xffff), end = start + (v >> 16);
		if (end > rlen)
			return 0;
		if ((l & UET_LOC_CHAR) && end > 0) {
			// The last byte must be NUL; it may lie in the header the
			// daemon writes: type id, flags and preempt count (0), tid.
			uint64_t p = end - 1;
			uint8_t c;
			if (p >= 8)
				c = payload[p - 8];
			else if (p < 2)
				c = (uint8_t)(sl->type_id >> (8 * p));
			else if (p < 4)
				c = 0;
			else
				c = (uint8_t)((uint32_t)tid >> (8 * (p - 4)));
			if (c != 0)
				return 0;
		}
	}
	return 1;
}


// submit writes [write_index][payload] through the ring with the kernel's
// answers (user_events_write_core's order), or says FALLBACK. kind says
// which call: write and pwrite take one buffer; writev and pwritev an
// array of cnt iovecs.
enum { K_WRITE, K_WRITEV };

static ssize_t submit(int fd, uint32_t e, const struct iovec *uv, int cnt, int kind)
{
	unsigned f = FD_FILE(e);
	struct share *s = &P->sh[f];
	if (unlikely(atomic_load_explicit(&s->state, acquire) != SH_READY)) {
		s = share_setup(f, fd);
		if (!s)
			goto fallback;
	}
	// The VFS's checks: the iovec count (0: 0, over UIO_MAXIOV: EINVAL,
	// through FUSE), the array readable, each length sane, 0 bytes: 0.
	if (cnt <= 0 || cnt > UIO_MAXIOV)
		goto fallback;
	struct iovs io;
	io.cnt = cnt;
	io.base = 0;
	io.have = 0;
	if (kind == K_WRITEV) {
		io.user = uv;
	} else {
		io.user = NULL;
		io.v[0] = uv[0];
		io.have = 1;
	}
	uint64_t total = 0;
	for (int i = 0; i < cnt; i++) {
		const struct iovec *v;
		if (iov_at(&io, i, &v))
			return fail(EFAULT);
		if ((int64_t)v->iov_len < 0 || v->iov_len > (1u << 30))
			goto fallback;
		total += v->iov_len;
	}
	if (total == 0 && kind == K_WRITEV)
		return 0; // the VFS returns before user_events
	// 2. fewer than 4 bytes, or an index that cannot be read: EFAULT
	uint32_t idx;
	if (total < 4)
		return fail(EFAULT);
	if (likely(io.base == 0 && io.v[0].iov_len >= 4)) {
		if (uet_copy_from_user(&idx, io.v[0].iov_base, 4))
			return fail(EFAULT);
	} else if (gather((uint8_t *)&idx, &io, 0, 4)) {
		return fail(EFAULT);
	}
	// 3. a negative index: EINVAL
	if ((int32_t)idx < 0)
		return fail(EINVAL);
	// 4. an index the table does not have (yet): the daemon's ENOENT
	if (idx >= s->nslots)
		goto fallback;
	const struct uet_slot *sl = &s->slots[idx];
	uint32_t w = __atomic_load_n(&sl->word, __ATOMIC_ACQUIRE);
	if (!(w & UET_W_READY))
		goto fallback;
	uint64_t plen = total - 4;
	// 5. shorter than the fields: EINVAL, enabled or not
	if (plen < sl->min_size)
		return fail(EINVAL);
	// 6. nothing attached: EBADF
	if (UET_W_STATUS(w) == 0)
		return fail(EBADF);
	if (plen > sl->ring_max || (UET_W_FLAGS(w) & UET_SLOT_FUSE))
		goto fallback;
	if (unlikely(atomic_load_explicit(&s->lossy, relaxed)))
		publish_losses(s, fd);
	// The ring of the CPU we run on, read right before the reservation
	// (shmring's set.go): a migration between the two puts the record in
	// another CPU's ring, which takes any number of producers.
	uint32_t cpu = cur_cpu();
	struct ring *r = ring_of(s, cpu);
	uint64_t word;
	uint8_t *rec = reserve(s, r, idx, plen, &word);
	if (unlikely(!rec)) {
		// The ring is full: the record is dropped, counted and told
		// later, and the write succeeds — as the kernel's with a full
		// ring buffer. Its step 7 still applies: a bad buffer is EFAULT.
		// But a ring nobody drains any more (the tree's server is gone:
		// its file answers ENOTCONN) is given up, and the file written
		// through FUSE, which says so, as without the library.
		if (look_gone(s) && drain_gone(s, fd))
			goto fallback;
		if (probe(&io, 4))
			return fail(EFAULT);
		drop(r, plen);
		lose(s, idx);
		return (ssize_t)total;
	}
	stamp_rec(rec, cpu);
	// 7. the payload: EFAULT where it faults; the reservation is given
	// back as a void record.
	if (unlikely(gather(rec + UET_REC_HEADER, &io, 4, plen))) {
		*(uint32_t *)(rec + 16) = UET_VOID_INDEX;
		commit(s, r, rec, word, fd);
		atomic_fetch_add_explicit(&s->voids, 1, relaxed);
		return fail(EFAULT);
	}
	// 8. the validators, on our copy. A record they refuse is the daemon's
	// to answer — EFAULT, or success where no consumer could hold it
	// (dropped unvalidated): it is voided here and written again
	// through FUSE.
	uint32_t nloc = UET_W_NLOC(w);
	if (nloc) {
		if (nloc > UET_SLOT_LOCS || !valid(sl, nloc, rec + UET_REC_HEADER, plen, *(int32_t *)(rec + 20))) {
			*(uint32_t *)(rec + 16) = UET_VOID_INDEX;
			commit(s, r, rec, word, fd);
			atomic_fetch_add_explicit(&s->voids, 1, relaxed);
			goto fallback;
		}
	}
	commit(s, r, rec, word, fd);
	return (ssize_t)total;
fallback:
	atomic_fetch_add_explicit(&P->fallbacks, 1, relaxed);
	return FALLBACK;
}

// The entry points: one load and a compare for a descriptor known foreign;
// the rest out of line.

static __attribute__((noinline)) ssize_t write_slow(int fd, const void *buf, size_t n, uint32_t e)
{
	if (!active())
		return FALLBACK;
	if (FD_STATE(e) == FD_UNKNOWN)
		e = classify(fd, e);
	if (FD_STATE(e) != FD_OURS)
		return FALLBACK;
	if (n == 0)
		return fail(EFAULT); // user_events_write cannot read the index (FUSE's VFS would say 0)
	struct iovec v = { (void *)buf, n };
	return submit(fd, e, &v, 1, K_WRITE);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	if (likely((unsigned)fd < FD_MAX)) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		if (likely(FD_STATE(e) == FD_FOREIGN))
			return next_write(fd, buf, n);
		ssize_t r = write_slow(fd, buf, n, e);
		if (r != FALLBACK)
			return r;
	}
	return next_write(fd, buf, n);
}

static __attribute__((noinline)) ssize_t writev_slow(int fd, const struct iovec *v, int cnt, uint32_t e)
{
	if (!active())
		return FALLBACK;
	if (FD_STATE(e) == FD_UNKNOWN)
		e = classify(fd, e);
	if (FD_STATE(e) != FD_OURS)
		return FALLBACK;
	return submit(fd, e, v, cnt, K_WRITEV);
}

EXPORT ssize_t writev(int fd, const struct iovec *v, int cnt)
{
	if (likely((unsigned)fd < FD_MAX)) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		if (likely(FD_STATE(e) == FD_FOREIGN))
			return next_writev(fd, v, cnt);
		ssize_t r = writev_slow(fd, v, cnt, e);
		if (r != FALLBACK)
			return r;
	}
	return next_writev(fd, v, cnt);
}

// pwrite: user_events_write checks the position (EFAULT unless 0) after
// the VFS has refused a negative one (EINVAL, through FUSE).
EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	if (likely((unsigned)fd < FD_MAX)) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		if (likely(FD_STATE(e) == FD_FOREIGN) || !active())
			return next_pwrite(fd, buf, n, off);
		if (FD_STATE(e) == FD_UNKNOWN)
			e = classify(fd, e);
		if (FD_STATE(e) == FD_OURS) {
			if (off > 0)
				return fail(EFAULT);
			if (off == 0) {
				ssize_t r = write_slow(fd, buf, n, e);
				if (r != FALLBACK)
					return r;
			}
		}
	}
	return next_pwrite(fd, buf, n, off);
}
EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));

// pwritev: user_events_write_iter never looks at the position; the VFS
// refuses a negative one.
EXPORT ssize_t pwritev(int fd, const struct iovec *v, int cnt, off_t off)
{
	if (likely((unsigned)fd < FD_MAX)) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		if (likely(FD_STATE(e) == FD_FOREIGN))
			return next_pwritev(fd, v, cnt, off);
		if (off >= 0) {
			ssize_t r = writev_slow(fd, v, cnt, e);
			if (r != FALLBACK)
				return r;
		}
	}
	return next_pwritev(fd, v, cnt, off);
}
EXPORT ssize_t pwritev64(int fd, const struct iovec *v, int cnt, off_t off) __attribute__((alias("pwritev")));

// pwritev2 with flags is the VFS's and FUSE's to answer; without, it is
// pwritev (an offset of -1 meaning the file position, which user_events
// ignores as well).
EXPORT ssize_t pwritev2(int fd, const struct iovec *v, int cnt, off_t off, int flags)
{
	if (likely((unsigned)fd < FD_MAX) && flags == 0) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		if (likely(FD_STATE(e) == FD_FOREIGN))
			return next_pwritev2(fd, v, cnt, off, flags);
		if (off >= -1) {
			ssize_t r = writev_slow(fd, v, cnt, e);
			if (r != FALLBACK)
				return r;
		}
	}
	return next_pwritev2(fd, v, cnt, off, flags);
}
EXPORT ssize_t pwritev64v2(int fd, const struct iovec *v, int cnt, off_t off, int flags) __attribute__((alias("pwritev2")));

// ---- what changes a descriptor number's meaning ----

// spare moves the library's own descriptors (each share's eventfd and its
// second descriptor) out of the way of one the program is about to close
// or replace.
static void spare(int fd)
{
	uint32_t n = atomic_load_explicit(&sh_high, acquire);
	for (unsigned i = 0; i < n; i++) {
		struct share *s = &P->sh[i];
		if (atomic_load_explicit(&s->state, acquire) != SH_READY)
			continue;
		for (_Atomic int *own = &s->wake_fd; own; own = own == &s->wake_fd ? &s->wake_ref : NULL) {
			if (atomic_load_explicit(own, relaxed) == fd) {
				long b = high_base();
				long h = sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, b > fd ? b : fd + 1);
				atomic_store_explicit(own, h >= 0 ? (int)h : -1, release);
			}
		}
	}
}

// before_close tells the losses of the file fd refers to while fd can
// still ask the daemon to make room.
static void before_close(int fd)
{
	if ((unsigned)fd >= FD_MAX)
		return;
	uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
	if (FD_STATE(e) != FD_OURS)
		return;
	struct share *s = &P->sh[FD_FILE(e)];
	if (atomic_load_explicit(&s->state, acquire) == SH_READY)
		tell_losses(s, fd);
}

EXPORT int close(int fd)
{
	if ((unsigned)fd >= FD_MAX || !active())
		return next_close(fd);
	before_close(fd);
	spare(fd);
	// Before and after: a classification racing with the close lands in
	// neither generation.
	forget((unsigned)fd);
	int r = next_close(fd);
	forget((unsigned)fd);
	return r;
}

// fclose closes with glibc's internal close, which the library does not
// see: the descriptor is forgotten around it.
EXPORT int fclose(FILE *fp)
{
	int fd = fp && active() ? fileno(fp) : -1;
	if (fd >= 0) {
		before_close(fd);
		spare(fd);
		forget((unsigned)fd);
	}
	if (unlikely(!next_fclose))
		next_fclose = early("fclose");
	int r = next_fclose(fp);
	if (fd >= 0)
		forget((unsigned)fd);
	return r;
}

// copy_entry gives descriptor to the state of from (dup and friends).
static int copy_entry(int from, int to)
{
	if (to < 0 || (unsigned)to >= FD_MAX || (unsigned)from >= FD_MAX)
		return to;
	uint32_t e = atomic_load_explicit(&fdtab[from], relaxed), t = atomic_load_explicit(&fdtab[to], relaxed);
	if (FD_STATE(e) != FD_UNKNOWN) {
		note_high((unsigned)to);
		atomic_store_explicit(&fdtab[to], FD_MAKE(FD_GEN(t) + 1, FD_FILE(e), FD_STATE(e)), release);
	}
	return to;
}

EXPORT int dup(int fd)
{
	int r = next_dup(fd);
	if (r >= 0 && active()) {
		forget((unsigned)r);
		copy_entry(fd, r);
	}
	return r;
}

EXPORT int dup3(int a, int b, int flags)
{
	if (!active() || (unsigned)b >= FD_MAX)
		return next_dup3(a, b, flags);
	if (a != b) {
		before_close(b);
		spare(b);
	}
	forget((unsigned)b);
	int r = next_dup3(a, b, flags);
	forget((unsigned)b);
	if (r >= 0)
		copy_entry(a, r);
	return r;
}

EXPORT int dup2(int a, int b)
{
	if (a == b || !active() || (unsigned)b >= FD_MAX)
		return next_dup2(a, b);
	before_close(b);
	spare(b);
	forget((unsigned)b);
	int r = next_dup2(a, b);
	forget((unsigned)b);
	if (r >= 0)
		copy_entry(a, r);
	return r;
}

EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	long arg = va_arg(ap, long);
	va_end(ap);
	int r = next_fcntl(fd, cmd, arg);
	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && active()) {
		forget((unsigned)r);
		copy_entry(fd, r);
	}
	return r;
}
EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

// forget_range forgets [a, b], bounded by the highest descriptor ever given
// a state.
static void forget_range(unsigned a, unsigned b)
{
	uint32_t h = atomic_load_explicit(&fd_high, relaxed);
	if (h == 0)
		return;
	if (b >= h)
		b = h - 1;
	for (unsigned fd = a; fd <= b && fd < FD_MAX; fd++)
		forget(fd);
}

// before_range is close's preparation for every descriptor of [a, b]: the
// losses of ours told, the library's eventfds moved above the range
// (where they cannot be, they are lost: a wake then goes through FUSE).
static void before_range(unsigned a, unsigned b)
{
	uint32_t h = atomic_load_explicit(&fd_high, relaxed);
	for (unsigned fd = a; fd <= b && fd < h && fd < FD_MAX; fd++)
		before_close((int)fd);
	uint32_t n = atomic_load_explicit(&sh_high, acquire);
	for (unsigned i = 0; i < n; i++) {
		struct share *s = &P->sh[i];
		if (atomic_load_explicit(&s->state, acquire) != SH_READY)
			continue;
		for (_Atomic int *own = &s->wake_fd; own; own = own == &s->wake_fd ? &s->wake_ref : NULL) {
			int w = atomic_load_explicit(own, relaxed);
			if (w >= 0 && (unsigned)w >= a && (unsigned)w <= b) {
				long n = b < 0x7fffffffu ? sys3(SYS_fcntl, w, F_DUPFD_CLOEXEC, (long)b + 1) : -1;
				atomic_store_explicit(own, n >= 0 ? (int)n : -1, release);
			}
		}
	}
}

EXPORT int close_range(unsigned a, unsigned b, int flags)
{
	if (!active() || (flags & CLOSE_RANGE_CLOEXEC) || a > b)
		return next_close_range(a, b, flags);
	before_range(a, b);
	forget_range(a, b);
	int r = next_close_range(a, b, flags);
	forget_range(a, b);
	return r;
}

// closefrom (glibc 2.34) closes with the internal close_range.
EXPORT void closefrom(int lowfd)
{
	unsigned a = lowfd < 0 ? 0 : (unsigned)lowfd;
	if (active()) {
		before_range(a, ~0u);
		forget_range(a, ~0u);
	}
	if (unlikely(!next_closefrom))
		next_closefrom = early("closefrom");
	if (next_closefrom)
		next_closefrom(lowfd);
	else
		sys3(SYS_close_range, a, ~0u, 0);
	if (active())
		forget_range(a, ~0u);
}

// ---- the v10 ABI's status page ----
//
// The first ABI of user_events (2022's v10 series; no Linux release
// enabled it) had processes map user_events_status — PROT_READ,
// MAP_SHARED, one page, at offset 0 — and check the byte of their event:
// its status. A FUSE file read with direct I/O cannot be mapped, so where
// uetrace run serves that ABI (UETRACE_ABI=v10) the library maps a page of
// its own in place of the file and hands it to the daemon
// (UET_IOC_STATUS), which keeps it written. Any other mmap is libc's.

static void *status_map(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct stat st;
	if ((uint64_t)len != (uint64_t)page_size || off != 0 || (prot & ~PROT_READ) || !(flags & MAP_SHARED) ||
	    sys2(SYS_fstat, fd, &st) != 0 || !is_tree(fd, &st, UET_STATUS_INO))
		return NULL;
	int page = make_memfd("uetrace-status", (uint64_t)page_size);
	if (page < 0)
		return NULL;
	struct uet_status_page req = { .size = sizeof req, .page_fd = page };
	void *p = NULL;
	if (sys3(SYS_ioctl, fd, UET_IOC_STATUS, &req) == 0)
		p = raw_mmap(addr, len, prot, flags, page, 0);
	sys1(SYS_close, page);
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (unlikely(abi_v10) && fd >= 0 && active()) {
		void *p = status_map(addr, len, prot, flags, fd, off);
		if (p)
			return p;
	}
	return next_mmap(addr, len, prot, flags, fd, off);
}
EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

// ---- the library's counts ----

// uetrace_preload_stats fills out with the library's counts in this
// process (size: the caller's sizeof, for later versions that add fields):
// shares set up, records the full rings dropped, records voided (a bad
// buffer, or a record the daemon had to judge), writes of the tree's file
// that went through FUSE, wake-ups that had to go through FUSE. Tests and
// benchmarks read it with dlsym; it is async-signal-safe.
struct uetrace_preload_stats {
	uint64_t shares, dropped, voided, fallbacks, wakes_lost;
};

EXPORT void uetrace_preload_stats(struct uetrace_preload_stats *out, size_t size)
{
	struct uetrace_preload_stats st = { 0 };
	if (P) {
		for (unsigned i = 0; i < NFILES; i++) {
			struct share *s = &P->sh[i];
			if (atomic_load_explicit(&s->state, acquire) != SH_READY)
				continue;
			st.shares++;
			for (uint32_t k = 0; k < s->nrings; k++)
				st.dropped += atomic_load_explicit(s->rings[k].dropped, relaxed);
			st.voided += atomic_load_explicit(&s->voids, relaxed);
			st.wakes_lost += atomic_load_explicit(&s->wakes_lost, relaxed);
		}
		st.fallbacks = atomic_load_explicit(&P->fallbacks, relaxed);
	}
	__builtin_memcpy(out, &st, size < sizeof st ? size : sizeof st);
}

// ---- start-up and exit ----

// any_fd is a descriptor of file slot f still open here, to ask the daemon
// through: checked to be the tree's file still, since a raw close may have
// freed the number.
static int any_fd(unsigned f)
{
	uint32_t h = atomic_load_explicit(&fd_high, relaxed);
	for (unsigned fd = 0; fd < h && fd < FD_MAX; fd++) {
		uint32_t e = atomic_load_explicit(&fdtab[fd], relaxed);
		struct stat st;
		if (FD_STATE(e) == FD_OURS && FD_FILE(e) == f && sys2(SYS_fstat, fd, &st) == 0 &&
		    (uint64_t)st.st_dev == files[f].dev && st.st_ino == UET_DATA_INO)
			return (int)fd;
	}
	return -1;
}

// At exit, the losses not told yet.
__attribute__((destructor)) static void uet_fini(void)
{
	if (!P || !active())
		return;
	for (unsigned i = 0; i < NFILES; i++) {
		struct share *s = &P->sh[i];
		if (atomic_load_explicit(&s->state, acquire) == SH_READY && atomic_load_explicit(&s->lossy, acquire))
			tell_losses(s, any_fd(i));
	}
}

#define NEXT(var, name)                            \
	do {                                       \
		void *p_ = dlsym(RTLD_NEXT, name); \
		if (p_)                            \
			var = p_;                  \
	} while (0)

__attribute__((constructor)) static void uet_init(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	if (ps > 0)
		page_size = ps;
	NEXT(next_write, "write");
	NEXT(next_writev, "writev");
	NEXT(next_pwrite, "pwrite64");
	NEXT(next_pwritev, "pwritev64");
	NEXT(next_pwritev2, "pwritev64v2");
	NEXT(next_close, "close");
	NEXT(next_dup, "dup");
	NEXT(next_dup2, "dup2");
	NEXT(next_dup3, "dup3");
	NEXT(next_fcntl, "fcntl");
	NEXT(next_close_range, "close_range");
	NEXT(next_mmap, "mmap");
	next_closefrom = dlsym(RTLD_NEXT, "closefrom");
	next_fclose = dlsym(RTLD_NEXT, "fclose");
	next_sigaction = dlsym(RTLD_NEXT, "sigaction");
	next_signal = dlsym(RTLD_NEXT, "signal");
	const char *off = getenv("UETRACE_PRELOAD");
	preload_off = off && strcmp(off, "off") == 0;
	const char *abi = getenv("UETRACE_ABI");
	abi_v10 = abi && strcmp(abi, "v10") == 0;
	// The per-process state, wiped in every fork child. Without
	// MADV_WIPEONFORK (Linux 4.14) a child would publish in its parent's
	// name: the library then stays out of the way.
	uint64_t len = (sizeof(struct proc) + (uint64_t)page_size - 1) & ~(uint64_t)(page_size - 1);
	long m = sys6(SYS_mmap, 0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sys_failed(m) || sys3(SYS_madvise, m, len, MADV_WIPEONFORK) != 0) {
		if (!sys_failed(m))
			sys2(SYS_munmap, m, len);
		preload_off = 1;
		return;
	}
	P = (struct proc *)m;
	const char *tree = getenv("UETRACE_TREE");
	if (tree)
		tree_dev = strtoull(tree, NULL, 10);
	const char *kb = getenv("UETRACE_RING_KB");
	if (kb) {
		uint64_t v = strtoull(kb, NULL, 10) * 1024;
		if (v >= (uint64_t)page_size && v <= (64u << 20) && (v & (v - 1)) == 0) // each ring's
			ring_size = v;
	}
	// The CPU from glibc's struct rseq, where it registered one.
	const ptrdiff_t *ro = dlsym(RTLD_DEFAULT, "__rseq_offset");
	const unsigned *rs = dlsym(RTLD_DEFAULT, "__rseq_size");
	unsigned kc = 0;
	sys3(SYS_getcpu, &kc, 0, 0);
	if (ro && rs && *rs >= 8) {
		int32_t c = *(volatile int32_t *)((char *)__builtin_thread_pointer() + *ro + 4);
		if (c >= 0 && (unsigned)c == kc)
			rseq_off = *ro;
	}
	if (!preload_off) {
		install_fault_handler(SIGSEGV);
		install_fault_handler(SIGBUS);
	}
	proc_init();
}
