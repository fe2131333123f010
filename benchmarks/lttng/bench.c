/*
 * bench measures what one enabled LTTng-UST tracepoint costs the thread that
 * fires it while a session records it: the per-event figure that uetrace's
 * DaemonRingWrite benchmark is compared with (see README.md beside this file).
 *
 * It waits until the event is enabled (the session daemon tells the process
 * when it registers, or later), fires it a number of times untimed to fault
 * in the ring and warm the caches, then times runs of N calls with
 * CLOCK_MONOTONIC read once before and once after each run: ns/event is the
 * run's elapsed time divided by N, as Go's testing.B reports ns/op. Beside
 * it, cpu-ns/event is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over
 * the same run: on a machine shared with other work it leaves out the time
 * the thread waited for a CPU, which the elapsed time includes. It does not
 * know what the session kept: lttng's discarded-events count says that (the
 * run script reads it).
 *
 * Usage: bench [-e bench_write|bench_string] [-n events (5000000)] [-r runs (5)]
 *              [-w warmup events (500000)] [-t seconds to wait for the enable (30)]
 *        bench -V   prints the LTTng-UST version it was built with
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lttng/ust-version.h>

#include "bench_tp.h"

/* 15 characters and the NUL: the 16 bytes of uetrace's char[16] field. */
static const char text16[16] = "uetrace-bench-d";

enum which { WRITE, STRING };

static int enabled(enum which w)
{
	if (w == WRITE)
		return lttng_ust_tracepoint_enabled(uetrace_bench, bench_write);
	return lttng_ust_tracepoint_enabled(uetrace_bench, bench_string);
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * fire calls the tracepoint n times. The arguments change with i, so the
 * compiler cannot hoist the record's preparation out of the loop; the
 * tracepoint's own enabled check stays in the loop, as it is in a program.
 * noinline keeps both events' loops the same shape.
 */
static __attribute__((noinline)) void fire(enum which w, uint64_t n)
{
	uint64_t i;

	if (w == WRITE) {
		for (i = 0; i < n; i++)
			lttng_ust_tracepoint(uetrace_bench, bench_write, (uint32_t)i,
					     i * 0x9e3779b97f4a7c15u, (uint32_t)~i,
					     text16, (uint16_t)i);
	} else {
		for (i = 0; i < n; i++)
			lttng_ust_tracepoint(uetrace_bench, bench_string, (uint32_t)i,
					     i * 0x9e3779b97f4a7c15u, (uint32_t)~i,
					     text16, (uint16_t)i);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static uint64_t parse_count(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v == 0) {
		fprintf(stderr, "bench: %s wants a positive whole number, not \"%s\"\n", opt, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	enum which w = WRITE;
	const char *name = "bench_write";
	uint64_t n = 5000000, warm = 500000, runs = 5, wait_s = 30;
	double *ns;
	uint64_t r, deadline;
	int opt;

	while ((opt = getopt(argc, argv, "e:n:r:w:t:V")) != -1) {
		switch (opt) {
		case 'e':
			if (strcmp(optarg, "bench_write") == 0) {
				w = WRITE;
			} else if (strcmp(optarg, "bench_string") == 0) {
				w = STRING;
			} else {
				fprintf(stderr, "bench: -e names bench_write or bench_string, not %s\n", optarg);
				return 2;
			}
			name = optarg;
			break;
		case 'n': n = parse_count("-n", optarg); break;
		case 'r': runs = parse_count("-r", optarg); break;
		case 'w': warm = parse_count("-w", optarg); break;
		case 't': wait_s = parse_count("-t", optarg); break;
		case 'V':
			printf("LTTng-UST %s (built with)\n", LTTNG_UST_VERSION);
			return 0;
		default:
			fprintf(stderr, "usage: bench [-e bench_write|bench_string] [-n events] [-r runs] [-w warmup events] [-t seconds]\n");
			return 2;
		}
	}

	/*
	 * liblttng-ust registers with the session daemon in a constructor and
	 * waits for it up to LTTNG_UST_REGISTER_TIMEOUT (3 s by default); a
	 * loaded machine can take longer, so wait for the enable itself.
	 */
	deadline = now_ns() + wait_s * 1000000000u;
	while (!enabled(w)) {
		struct timespec tick = { 0, 10000000 };

		if (now_ns() > deadline) {
			fprintf(stderr,
				"bench: uetrace_bench:%s is not enabled after %llu s: no session records it. "
				"Start lttng-sessiond, then lttng create, lttng enable-event -u uetrace_bench:%s, "
				"lttng start, and run bench again.\n",
				name, (unsigned long long)wait_s, name);
			return 1;
		}
		nanosleep(&tick, NULL);
	}

	fire(w, warm);

	ns = calloc(runs, sizeof(*ns));
	if (!ns) {
		perror("bench: calloc");
		return 1;
	}
	for (r = 0; r < runs; r++) {
		uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = now_ns(), t1, c1;

		fire(w, n);
		t1 = now_ns();
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		ns[r] = (double)(t1 - t0) / (double)n;
		printf("run %llu: %s %llu events %.3f s %.1f ns/event %.2f M events/s %.1f cpu-ns/event\n",
		       (unsigned long long)r + 1, name, (unsigned long long)n,
		       (double)(t1 - t0) / 1e9, ns[r], 1e3 / ns[r], (double)(c1 - c0) / (double)n);
		fflush(stdout);
	}
	qsort(ns, runs, sizeof(*ns), cmp_double);
	printf("median: %s %.1f ns/event %.2f M events/s over %llu runs of %llu events (min %.1f, max %.1f ns)\n",
	       name, runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2,
	       1e3 / (runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2),
	       (unsigned long long)runs, (unsigned long long)n, ns[0], ns[runs - 1]);
	free(ns);
	return 0;
}
