// Package stamp says who wrote a record, where and when, for the price of a
// few nanoseconds instead of a gettid(2) and a getcpu(2) per record: the
// writer's CLOCK_MONOTONIC time, its process id, its thread id and the CPU
// it runs on — what a trace line and a perf sample show of the kernel's own
// writes. Nothing here allocates.
//
// It is not a clock source of its own, a thread registry or a scheduler
// probe: each value is read where the kernel keeps it, and this doc says
// for each where it can differ from what the kernel records for a
// write(2) on user_events_data.
//
// # Time: [Now]
//
// How: the Go runtime's monotonic clock (runtime.nanotime, reached by a
// linkname directive — one of the runtime's symbols kept linkable on purpose, see
// go.dev/issue/67401), which on Linux is clock_gettime(CLOCK_MONOTONIC)
// through the vDSO: no system call. The value is CLOCK_MONOTONIC itself, not
// an offset from it, so it is comparable with any other process's
// clock_gettime(CLOCK_MONOTONIC) and identical in base with the daemon's
// trace clock (internal/ftrace.LocalClock, subsys.Options.Clock's default).
//
// Cost: that of the vDSO call: 30 ns on the development machine (AMD EPYC
// under KVM, clocksource kvm-clock, loaded), against 1.6–1.9 µs for
// unix.ClockGettime, which makes the clock_gettime system call and not the
// vDSO call (BenchmarkNow, BenchmarkNowClockGettime).
//
// Where it differs: the kernel stamps user_events records with the ring
// buffer's trace clock ("local", sched_clock: not slewed by NTP) and perf
// samples with perf_clock (also sched_clock) unless -k CLOCK_MONOTONIC; on
// a kernel those clocks and CLOCK_MONOTONIC drift apart by the NTP
// correction. And the time is taken when the writer asks, before it
// reserves room for the record: records reserved in one order may carry
// times in another, by the time between the two steps (the kernel reads
// its clock inside the reservation).
//
// # CPU: [CPU]
//
// How, on amd64: from the thread's struct rseq (rseq(2), Linux 4.18), where
// the kernel keeps the CPU the thread runs on — it writes cpu_id before
// every return to user space that follows a migration or a preemption, so
// one load reads what getcpu(2) would answer. A thread has at most one
// struct rseq.
//
// In a Go program without cgo no one else registers one, and this package
// registers its own for each thread, on the thread's first stamp, in memory
// it maps for them and never unmaps (the kernel writes it for as long as
// the thread lives; the GC never moves or frees it), up to 1024 threads.
// Its address is kept in the per-P cache that also holds the thread id
// (see Thread), found when the P changes threads.
//
// In a cgo program glibc 2.35 and later has registered one for every
// thread, at the same offset from the thread pointer in each (its
// __rseq_offset); the kernel then refuses a second, and this package reads
// glibc's, at the calling thread's own thread pointer (FS:0, where glibc
// keeps a pointer to itself) plus that offset on every call — no address
// is kept, so none can outlive its thread, whose memory glibc frees. A
// cpu_id that says the registration failed sends the call to the fallback.
// The package finds the offset once, without cgo: around the thread
// pointer (arch_prctl(ARCH_GET_FS), read with process_vm_readv, which fails
// where a load would fault) it takes each place that looks like a struct
// rseq of the current CPU and asks the kernel whether it is the thread's
// registered one — rseq(2) answers EBUSY or EPERM for exactly the
// registered address and length, EINVAL for any other. So the offset is
// the kernel's answer, never a guess.
//
// The package registers no critical section: the struct is only read. At
// start-up the mode is checked against getcpu(2) on one thread, as LSL is.
//
// The fallback, where there is no rseq (the kernel lacks it, the struct
// rseq of a thread is one this package neither registered nor found, more
// than 1024 threads of its own): the LSL instruction on the per-CPU GDT segment the kernel sets
// up for the vDSO's getcpu (selector GDT_ENTRY_CPUNODE*8+3 = 0x7b, whose
// limit is cpu | node<<12 — arch/x86/include/asm/segment.h,
// vdso_read_cpunode): what __vdso_getcpu does on CPUs without RDPID, done
// inline, no vDSO lookup. At start-up LSL is checked against getcpu(2) on
// one thread; if the segment is missing (LSL fails) or disagrees, or the
// machine has more CPUs than the 12 bits hold, the fallback is the
// getcpu(2) system call, as on the other architectures.
//
// Cost: with rseq a load through the P's slot, which TidCPU reads for the
// thread id anyway, or at the thread pointer: [CPU] costs about what [Tid]
// does (12–17 ns against LSL's 20–29 ns in one run on the development
// machine, loaded), and [TidCPU] hardly more than [Tid]. LSL is microcoded but does not leave
// the guest: 18–22 ns; getcpu(2) 1.2–1.3 µs (BenchmarkCPU,
// BenchmarkCPUGetcpuSyscall). RDPID, where the CPU has it, would be cheaper
// than LSL; the development machine does not have it, so it is not used
// (an instruction this package could not test).
//
// Where it differs: the CPU is read at one instant; the thread can be
// moved to another CPU an instruction later, before its record is
// reserved. The kernel reads smp_processor_id() with preemption disabled
// around the reservation, so its CPU is the one whose buffer holds the
// record; ours is the CPU the writer was on a moment before — the same
// answer getcpu(2) or sched_getcpu(3) gives a C program. With this
// package's own struct rseq, the slot that holds its address is keyed by
// the M, like the thread id: in the cases where the thread id cache can be
// wrong (below), the CPU is read from the struct of the thread that is
// gone — a CPU that thread last ran on — for as long as the thread id is
// wrong.
//
// # Thread: [Tid]
//
// How: a cache per P (the runtime's processor a goroutine runs on, pinned
// with runtime.procPin for the few instructions of the lookup: another
// linkname the runtime keeps). Each P's slot holds the last thread id
// seen on it and, as its key, the runtime's M (the OS thread's structure)
// it was seen on; a lookup compares the current M, read from the current
// goroutine (g.m, an offset the compiler and linker hard-code: the only
// runtime structure read), with the key and makes the gettid(2) system
// call only when they differ. The M of a P changes when the scheduler
// hands the P to another thread (a blocking system call, a thread locked
// with runtime.LockOSThread taking its turn), and the next lookup on that
// P pays one gettid. The M's own thread id field (m.procid) is not read:
// its offset is not fixed across Go releases. Should g.m move in a later
// release, TestTidLockedThreads fails: it has goroutines locked to eight
// threads share one, two and four Ps and checks every answer against
// gettid(2). On architectures other than
// amd64 every call makes the gettid(2) system call.
//
// Cost: a pin, a few loads and a compare: 7 ns on the development machine,
// against 1.1 µs for gettid(2) (BenchmarkTid, BenchmarkTidGettid); a
// gettid(2) more each time a P changes threads.
//
// Where it differs: the answer is the thread that ran the goroutine when it
// asked; an unlocked goroutine can move to another thread before it writes
// its record, as it can after calling gettid(2) itself. The cache itself is
// wrong only when an M the slot saw comes back on another thread: the
// extra M a cgo callback from a thread created in C runs on goes to the
// next such thread once its own exits, and the memory of an M whose thread
// ended (a goroutine locked to it exited without unlocking) can be reused
// for a new M. Then a P whose slot still holds that M answers with the
// thread that is gone, until the P changes threads or for at most 4096
// lookups (refreshEvery), whichever comes first: after that many answers
// from the cache a slot asks the kernel again.
//
// # Process: [Pid]
//
// How: getpid(2) once, at package initialisation. A Go process keeps its
// pid: the runtime forks only to exec (syscall.ForkExec's child runs no Go
// code), and a raw fork(2) from Go leaves a child with only the forking
// thread, in which the runtime cannot be relied on to run. So the cached pid is the kernel's TGID for every
// record, except in a child of such a raw fork — unsupported by Go itself.
//
// Cost: a load.
//
// # All four: [Take]
//
// 38–57 ns, median 41 ns, on the development machine loaded by other work
// (load average 5, four runs), against 52–98 ns, median 58 ns, with LSL
// for the CPU in the same run; 47–49 ns with LSL on a quieter day
// (BenchmarkTake, BenchmarkTakeParallel); 3.7–4.9 µs for clock_gettime(2),
// gettid(2) and getcpu(2) (BenchmarkTakeSyscalls). What is left is mostly
// the vDSO clock. Reading the TSC instead (RDTSC, converted to
// CLOCK_MONOTONIC with a calibration against the vDSO clock) was measured
// and left out: on that machine RDTSC costs 17–33 ns (median 21),
// LFENCE;RDTSC — what a clock that must not go back needs — 23–37 ns
// (median 31), the vDSO clock 39–54 ns (median 45), in one run: 10–20 ns
// gained, for a clock that would differ from CLOCK_MONOTONIC by its
// calibration error and the NTP slew since, in every process differently,
// while the daemon merges records of many processes by time.
package stamp
