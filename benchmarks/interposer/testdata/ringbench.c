/*
 * ringbench: a C producer of user_events for the interposer's benchmarks.
 * It opens DIR/user_events_data, registers "bench_write u32 a; u64 b; u32 c;
 * char[16] d; u16 e" (a 34-byte payload, as userevents' DaemonRingWrite
 * writes), enables the event through DIR's enable file, waits for its
 * enable bit, and then:
 *
 *   ringbench DIR ring N       N writev([write_index][34 bytes]) as fast as
 *                              it can, each behind the enable check:
 *     ring writes=N ns=T cpu_ns=C dropped=D fallbacks=F wakes_lost=W
 *   ringbench DIR paced RATE S writes at RATE a second for S seconds, in
 *                              batches of 100 with clock_nanosleep between
 *                              (a program that traces, not one that spins):
 *     paced writes=N ns=T dropped=D fallbacks=F
 *   ringbench DIR record N RATE
 *                              for a recording: does not enable the event
 *                              (a recorder attaching to it does: it stays
 *                              the event's only consumer, so the daemon
 *                              can hand the process's ring set to it),
 *                              waits for the enable bit, warms up, prints
 *                              "ready", reads a line from stdin, then
 *                              writes N records whose u64 b counts 0 to
 *                              N-1, at RATE a second in batches of 100
 *                              (0: as fast as it can):
 *     record writes=N ns=T cpu_ns=C dropped=D fallbacks=F wakes_lost=W
 *   ringbench DIR record N RATE fork
 *                              the same from two processes: it forks once
 *                              the event is enabled, and the child — which
 *                              shares the parent's user_events_data, and
 *                              sets up a ring set of its own — warms up and
 *                              writes its N records alongside; the line
 *                              sums both (writes=2N), its times the
 *                              parent's.
 *
 * dropped is what the interposer's rings had no room for (counted, told to
 * the daemon in loss records), fallbacks the writes that went through FUSE
 * (uetrace_preload_stats), wakes_lost the wake-ups that had to go through
 * FUSE (the library's eventfd was not its own any more).
 *
 *   ringbench foreign N        the interposer's check on a descriptor not
 *                              the tree's: N write(2)s to /dev/null through
 *                              the interposer, and N straight to the write
 *                              beneath it, which stub.so (preloaded after
 *                              the interposer) makes a function that
 *                              returns at once; 9 rounds, interleaved:
 *     foreign writes=N via_ns=A direct_ns=B added_ns=A-B (medians)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>

struct user_reg {
	__u32 size;
	__u8 enable_bit;
	__u8 enable_size;
	__u16 flags;
	__u64 enable_addr;
	__u64 name_args;
	__u32 write_index;
} __attribute__((__packed__));
#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)

struct stats {
	uint64_t shares, dropped, voided, fallbacks, wakes_lost;
};

static struct stats stats(void)
{
	struct stats s = { 0 };
	void (*f)(struct stats *, size_t) = (void (*)(struct stats *, size_t))dlsym(RTLD_DEFAULT, "uetrace_preload_stats");
	if (f)
		f(&s, sizeof s);
	return s;
}

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	fprintf(stderr, "ringbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

typedef ssize_t (*write_fn)(int, const void *, size_t);

static int foreign(long n)
{
	void *h = dlopen("stub.so", RTLD_NOLOAD | RTLD_NOW);
	write_fn direct = h ? (write_fn)dlsym(h, "write") : NULL;
	if (!direct || !dlsym(RTLD_DEFAULT, "uetrace_preload_stats")) {
		fprintf(stderr, "ringbench: foreign needs LD_PRELOAD='libuetrace-preload.so stub.so'\n");
		return 2;
	}
	write_fn volatile via = write;
	int fd = open("/dev/null", O_WRONLY);
	char c = 0;
	via(fd, &c, 1); // classified: foreign
	double a[9], b[9], d[9];
	for (int k = 0; k < 9; k++) {
		write_fn f = via, g = direct;
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
		for (long i = 0; i < n; i++)
			g(fd, &c, 1);
		uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
		for (long i = 0; i < n; i++)
			f(fd, &c, 1);
		uint64_t t2 = clock_ns(CLOCK_MONOTONIC);
		b[k] = (double)(t1 - t0) / n;
		a[k] = (double)(t2 - t1) / n;
		d[k] = a[k] - b[k];
	}
	qsort(a, 9, sizeof a[0], cmp);
	qsort(b, 9, sizeof b[0], cmp);
	qsort(d, 9, sizeof d[0], cmp);
	printf("foreign writes=%ld via_ns=%.2f direct_ns=%.2f added_ns=%.2f\n", n, a[4], b[4], d[4]);
	return 0;
}

// result prints a ring or record run's line: what, its writes, its wall
// and CPU time, what the interposer dropped and sent through FUSE meanwhile.
static int result(const char *what, long n, uint64_t t0, uint64_t t1, uint64_t c0, uint64_t c1, struct stats s0)
{
	struct stats s1 = stats();
	printf("%s writes=%ld ns=%llu cpu_ns=%llu dropped=%llu fallbacks=%llu wakes_lost=%llu\n", what, n, (unsigned long long)(t1 - t0),
	       (unsigned long long)(c1 - c0), (unsigned long long)(s1.dropped - s0.dropped),
	       (unsigned long long)(s1.fallbacks - s0.fallbacks), (unsigned long long)(s1.wakes_lost - s0.wakes_lost));
	return 0;
}

// pace moves due on by step nanoseconds and sleeps until then.
static void pace(struct timespec *due, uint64_t step)
{
	due->tv_nsec += (long)step;
	while (due->tv_nsec >= 1000000000) {
		due->tv_nsec -= 1000000000;
		due->tv_sec++;
	}
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, due, NULL);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "foreign") == 0)
		return foreign(atol(argv[2]));
	if (argc < 4) {
		fprintf(stderr, "usage: ringbench DIR ring N | DIR paced RATE SECONDS | DIR record N RATE | foreign N\n");
		return 2;
	}
	char path[512];
	snprintf(path, sizeof path, "%s/user_events_data", argv[1]);
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die(path);
	static uint32_t word;
	struct user_reg r = { .size = sizeof r, .enable_bit = 0, .enable_size = 4, .enable_addr = (uint64_t)&word,
			      .name_args = (uint64_t)"bench_write u32 a; u64 b; u32 c; char[16] d; u16 e" };
	if (ioctl(fd, DIAG_IOCSREG, &r) < 0)
		die("DIAG_IOCSREG");
	int recording = strcmp(argv[2], "record") == 0 && (argc == 5 || (argc == 6 && strcmp(argv[5], "fork") == 0));
	if (!recording) {
		snprintf(path, sizeof path, "%s/events/user_events/bench_write/enable", argv[1]);
		int en = open(path, O_WRONLY);
		if (en < 0 || write(en, "1", 1) != 1)
			die(path);
		close(en);
	}
	for (uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + (recording ? 60 : 10) * 1000000000ull; !__atomic_load_n(&word, __ATOMIC_RELAXED);) {
		if (clock_ns(CLOCK_MONOTONIC) > deadline) {
			fprintf(stderr, "ringbench: the event was not enabled within %d s\n", recording ? 60 : 10);
			return 1;
		}
		usleep(1000);
	}
	// fork: the child's ready and go, and its counts, through pipes.
	int up[2] = { -1, -1 }, down[2] = { -1, -1 };
	pid_t child = -1;
	if (recording && argc == 6) {
		if (pipe(up) < 0 || pipe(down) < 0)
			die("pipe");
		child = fork();
		if (child < 0)
			die("fork");
	}
	uint32_t idx = r.write_index;
	unsigned char payload[34];
	memset(payload, 0x41, sizeof payload);
	struct iovec io[2] = { { &idx, 4 }, { payload, sizeof payload } };
	for (int i = 0; i < 1000; i++) // warm up: the share is set up
		if (writev(fd, io, 2) != 38)
			die("writev");
	struct stats s0 = stats();
	if (strcmp(argv[2], "ring") == 0) {
		long n = atol(argv[3]);
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		for (long i = 0; i < n; i++)
			if (__atomic_load_n(&word, __ATOMIC_RELAXED) && writev(fd, io, 2) != 38)
				die("writev");
		return result("ring", n, t0, clock_ns(CLOCK_MONOTONIC), c0, clock_ns(CLOCK_THREAD_CPUTIME_ID), s0);
	}
	if (strcmp(argv[2], "paced") == 0 && argc == 5) {
		double rate = atof(argv[3]), secs = atof(argv[4]);
		struct timespec due;
		clock_gettime(CLOCK_MONOTONIC, &due);
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), end = t0 + (uint64_t)(secs * 1e9), step = (uint64_t)(100 * 1e9 / rate);
		long k = 0;
		while (clock_ns(CLOCK_MONOTONIC) < end) {
			for (int b = 0; b < 100; b++, k++)
				if (writev(fd, io, 2) != 38)
					die("writev");
			pace(&due, step);
		}
		uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
		struct stats s1 = stats();
		printf("paced writes=%ld ns=%llu dropped=%llu fallbacks=%llu\n", k, (unsigned long long)(t1 - t0),
		       (unsigned long long)(s1.dropped - s0.dropped), (unsigned long long)(s1.fallbacks - s0.fallbacks));
		return 0;
	}
	if (recording) {
		char line[16], c = 0;
		if (child == 0) {
			if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1)
				die("child's pipes");
		} else {
			if (child > 0 && read(up[0], &c, 1) != 1)
				die("the child's ready");
			printf("ready\n");
			fflush(stdout);
			if (!fgets(line, sizeof line, stdin))
				die("stdin");
			if (child > 0 && write(down[1], &c, 1) != 1)
				die("the child's go");
		}
		long n = atol(argv[3]);
		double rate = atof(argv[4]);
		uint64_t step = rate > 0 ? (uint64_t)(100 * 1e9 / rate) : 0, seq = 0;
		struct timespec due;
		clock_gettime(CLOCK_MONOTONIC, &due);
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		for (long i = 0; i < n; i++) {
			seq = (uint64_t)i;
			memcpy(payload + 4, &seq, 8); // b
			if (writev(fd, io, 2) != 38)
				die("writev");
			if (step && i % 100 == 99)
				pace(&due, step);
		}
		uint64_t t1 = clock_ns(CLOCK_MONOTONIC), c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		if (child == 0) {
			// The child's counts, for the parent's line.
			struct stats s1 = stats();
			s1.dropped -= s0.dropped;
			s1.fallbacks -= s0.fallbacks;
			s1.wakes_lost -= s0.wakes_lost;
			if (write(up[1], &s1, sizeof s1) != sizeof s1)
				die("the child's counts");
			return 0;
		}
		if (child > 0) {
			struct stats sc;
			int status;
			if (read(up[0], &sc, sizeof sc) != sizeof sc || waitpid(child, &status, 0) != child || status != 0) {
				fprintf(stderr, "ringbench: the child failed\n");
				return 1;
			}
			// Taken off the parent's start: result adds them.
			s0.dropped -= sc.dropped;
			s0.fallbacks -= sc.fallbacks;
			s0.wakes_lost -= sc.wakes_lost;
			n *= 2;
		}
		return result("record", n, t0, t1, c0, c1, s0);
	}
	fprintf(stderr, "ringbench: unknown mode %s\n", argv[2]);
	return 2;
}
