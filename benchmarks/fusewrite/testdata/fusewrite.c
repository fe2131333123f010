/*
 * fusewrite is a C producer of user_events, written as one is for the
 * kernel: it opens /sys/kernel/tracing/user_events_data, registers
 * "bench_fuse u32 a; u64 b" with DIAG_IOCSREG (enable bit 31 of a 32-bit word
 * in its own memory), and then, in two timed phases:
 *
 *   enabled:  enables the event itself (writes "1" to
 *             events/user_events/bench_fuse/enable), waits for the bit, and
 *             writes N records with writev([write_index][payload]) as fast as
 *             it can, each behind the enable-bit check a well-behaved
 *             producer makes;
 *   disabled: disables it ("0"), waits for the bit to clear, and makes M
 *             enable-bit checks — what the same producer costs while nothing
 *             traces it (no system call at all).
 *
 * Each phase is timed with CLOCK_MONOTONIC read once before and once after
 * (after an untimed warm-up of the enabled path), and prints one line:
 *
 *   enabled events=N ns=T events/s=R median_ns=W
 *   disabled checks=M ns=T checks/s=R
 *
 * where W is the median time of one write: each is timed on its own too
 * (two clock reads, ~20 ns, inside T), because a median says what a round
 * trip costs on a machine others share, where a mean says mostly how often
 * the writer was preempted.
 *
 * With -n PATH it writes the same records to PATH, a file of a FUSE server
 * that only answers (testdata/nullfuse.c), with no registration and the
 * enable bit set by itself: the same loop, the same writev, against the
 * bare round trip. M must then be 0.
 *
 * A phase with a count of 0 is skipped. Any failed call — a short write, an
 * enable bit that does not follow the enable file within 10 seconds — ends
 * the program with status 1 and a line on stderr saying what failed.
 *
 * Usage: fusewrite [-n PATH] N M
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>

#if __has_include(<linux/user_events.h>)
#include <linux/user_events.h>
#else
/* From include/uapi/linux/user_events.h (Linux 6.12). */
struct user_reg {
	__u32 size;
	__u8 enable_bit;
	__u8 enable_size;
	__u16 flags;
	__u64 enable_addr;
	__u64 name_args;
	__u32 write_index;
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)
#endif

#define T "/sys/kernel/tracing/"
#define ENABLE T "events/user_events/bench_fuse/enable"
#define BIT 31
#define WARMUP 1000

/* The enable word: the kernel (or uetrace's server) sets bit BIT in it. */
static volatile uint32_t enabled_word;

static int enabled(void)
{
	return (__atomic_load_n(&enabled_word, __ATOMIC_RELAXED) >> BIT) & 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "fusewrite: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void set_enable(const char *v)
{
	int fd = open(ENABLE, O_WRONLY);

	if (fd < 0)
		die("open " ENABLE);
	if (write(fd, v, 1) != 1)
		die("write " ENABLE);
	close(fd);
}

/* wait_bit waits until the enable bit is on (or off): the bit is written
 * into this process's memory by whoever serves tracefs, when the enable file
 * is written — here, before the write returns; the wait is for a server
 * that does it later. */
static void wait_bit(int on)
{
	uint64_t deadline = now_ns() + 10000000000u;

	while (enabled() != on) {
		if (now_ns() > deadline) {
			errno = ETIMEDOUT;
			die(on ? "the enable bit was not set after enabling"
			       : "the enable bit was not cleared after disabling");
		}
		sched_yield();
	}
}

static uint64_t count(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || end == s) {
		fprintf(stderr, "fusewrite: %s is not a count\nusage: fusewrite [-n PATH] N M\n", s);
		exit(2);
	}
	return v;
}

static int by_value(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct {
		uint32_t a;
		uint64_t b;
	} __attribute__((__packed__)) payload = { 0, 0 };
	struct user_reg reg;
	struct iovec iov[2];
	uint32_t idx;
	uint64_t n, m, i, t0, t1, w0, w1, skipped = 0;
	ssize_t want = sizeof(idx) + sizeof(payload);
	const char *null = NULL;
	uint32_t *times;
	int fd;

	if (argc == 5 && strcmp(argv[1], "-n") == 0) {
		null = argv[2];
		argv += 2;
		argc -= 2;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: fusewrite [-n PATH] N M\n");
		return 2;
	}
	n = count(argv[1]);
	m = count(argv[2]);
	if (null && m > 0) {
		fprintf(stderr, "fusewrite: -n writes only: M must be 0\n");
		return 2;
	}
	times = malloc((n ? n : 1) * sizeof(*times));
	if (!times)
		die("malloc");

	if (null) {
		fd = open(null, O_WRONLY);
		if (fd < 0)
			die(null);
		idx = 0;
		enabled_word = 1u << BIT;
	} else {
		fd = open(T "user_events_data", O_RDWR);
		if (fd < 0)
			die("open " T "user_events_data");
		memset(&reg, 0, sizeof(reg));
		reg.size = sizeof(reg);
		reg.enable_bit = BIT;
		reg.enable_size = sizeof(enabled_word);
		reg.enable_addr = (uint64_t)(uintptr_t)&enabled_word;
		reg.name_args = (uint64_t)(uintptr_t)"bench_fuse u32 a; u64 b";
		if (ioctl(fd, DIAG_IOCSREG, &reg) < 0)
			die("DIAG_IOCSREG bench_fuse");
		idx = reg.write_index;
	}
	iov[0].iov_base = &idx;
	iov[0].iov_len = sizeof(idx);
	iov[1].iov_base = &payload;
	iov[1].iov_len = sizeof(payload);

	if (n > 0) {
		if (!null) {
			set_enable("1");
			wait_bit(1);
		}
		for (i = 0; i < WARMUP; i++)
			if (enabled() && writev(fd, iov, 2) != want)
				die("writev (warm-up)");
		t0 = now_ns();
		for (i = 0; i < n; i++) {
			if (!enabled()) {
				skipped++;
				continue;
			}
			payload.a = (uint32_t)i;
			payload.b = i;
			w0 = now_ns();
			if (writev(fd, iov, 2) != want)
				die("writev");
			w1 = now_ns();
			times[i] = w1 - w0 > UINT32_MAX ? UINT32_MAX : (uint32_t)(w1 - w0);
		}
		t1 = now_ns();
		if (skipped) {
			fprintf(stderr, "fusewrite: the event was disabled for %llu of %llu writes\n",
				(unsigned long long)skipped, (unsigned long long)n);
			return 1;
		}
		qsort(times, n, sizeof(*times), by_value);
		printf("enabled events=%llu ns=%llu events/s=%.0f median_ns=%u\n", (unsigned long long)n,
		       (unsigned long long)(t1 - t0), (double)n * 1e9 / (double)(t1 - t0 ? t1 - t0 : 1),
		       times[n / 2]);
	}

	if (m > 0) {
		set_enable("0");
		wait_bit(0);
		t0 = now_ns();
		for (i = 0; i < m; i++) {
			if (enabled()) {
				payload.a = (uint32_t)i;
				if (writev(fd, iov, 2) != want)
					die("writev");
			} else {
				skipped++;
			}
		}
		t1 = now_ns();
		if (skipped != m) {
			fprintf(stderr, "fusewrite: the event was enabled for %llu of %llu checks\n",
				(unsigned long long)(m - skipped), (unsigned long long)m);
			return 1;
		}
		printf("disabled checks=%llu ns=%llu checks/s=%.0f\n", (unsigned long long)m,
		       (unsigned long long)(t1 - t0), (double)m * 1e9 / (double)(t1 - t0 ? t1 - t0 : 1));
	}
	return 0;
}
