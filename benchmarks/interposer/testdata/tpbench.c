/*
 * tpbench: a libtracepoint (microsoft/LinuxTracepoints) writer benchmark.
 *
 * Registers one tracepoint through libtracepoint and writes N events with a
 * 34-byte payload (u32 status; u64 duration_ns; char[22] name) as fast as it
 * can, each behind the enable check, then prints one line:
 *
 *   mode=tpp written=N errors=E ns=T events/s=R ns/write=W
 *
 * Modes:
 *   tpp  TPP_FUNCTION (tracepoint-provider.h): writev of 4 iovecs
 *        [write_index][u32][u64][char[22]]  (event "bench_tpp")
 *   raw  tracepoint_open_provider/tracepoint_connect/tracepoint_write with
 *        2 iovecs [write_index][34-byte blob]   (event "bench_tpraw")
 *
 * Options: -s  enable the event itself (write 1 to
 *              /sys/kernel/tracing/events/user_events/<name>/enable), for
 *              `uetrace run --private` and the VM where nobody else does;
 *          -w S wait at most S seconds for the enable bit (default 30);
 *          -r R write at R events a second, in batches of 100 with
 *              clock_nanosleep between (default: as fast as it can).
 * Usage: tpbench [-s] [-w S] [-r R] tpp|raw N
 *
 * (From the issue #30 baseline's benchmarks, /work/scratch/r1-baseline;
 * -r added for benchmarks/interposer.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tracepoint/tracepoint-provider.h>

TPP_DEFINE_PROVIDER(BenchProvider);
TPP_FUNCTION(BenchProvider, "bench_tpp", bench_tpp_func,
	TPP_UINT32("status", status),
	TPP_UINT64("duration_ns", duration_ns),
	TPP_CHAR_ARRAY("name", 22, name));

static tracepoint_provider_state raw_provider = TRACEPOINT_PROVIDER_STATE_INIT;
static tracepoint_state raw_tp = TRACEPOINT_STATE_INIT;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void self_enable(const char *name)
{
	char path[256];
	snprintf(path, sizeof path, "/sys/kernel/tracing/events/user_events/%s/enable", name);
	int fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		fprintf(stderr, "tpbench: enabling %s: %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
}

int main(int argc, char **argv)
{
	int self = 0, waits = 30, opt;
	double rate = 0;
	while ((opt = getopt(argc, argv, "sw:r:")) != -1) {
		if (opt == 's')
			self = 1;
		else if (opt == 'w')
			waits = atoi(optarg);
		else if (opt == 'r')
			rate = atof(optarg);
		else
			goto usage;
	}
	if (argc - optind != 2)
		goto usage;
	const char *mode = argv[optind];
	uint64_t n = strtoull(argv[optind + 1], NULL, 10);
	int tpp = strcmp(mode, "tpp") == 0;
	if (!tpp && strcmp(mode, "raw") != 0)
		goto usage;

	int err;
	if (tpp) {
		err = TPP_REGISTER_PROVIDER(BenchProvider);
		if (err) {
			fprintf(stderr, "tpbench: TPP_REGISTER_PROVIDER: %s\n", strerror(err));
			return 1;
		}
	} else {
		err = tracepoint_open_provider(&raw_provider);
		if (!err)
			err = tracepoint_connect(&raw_tp, &raw_provider,
				"bench_tpraw u32 status; u64 duration_ns; char[22] name");
		if (err) {
			fprintf(stderr, "tpbench: open/connect: %s\n", strerror(err));
			return 1;
		}
	}
#define ENABLED() (tpp ? bench_tpp_func_enabled() : TRACEPOINT_ENABLED(&raw_tp))
	if (self)
		self_enable(tpp ? "bench_tpp" : "bench_tpraw");
	uint64_t deadline = now_ns() + (uint64_t)waits * 1000000000u;
	while (!ENABLED()) {
		if (now_ns() > deadline) {
			fprintf(stderr, "tpbench: the tracepoint was not enabled within %d s\n", waits);
			return 1;
		}
		usleep(1000);
	}

	char name[22];
	memset(name, 0, sizeof name);
	strncpy(name, "tpbench-payload-xyz", sizeof name - 1);
	struct __attribute__((packed)) { uint32_t status; uint64_t dur; char name[22]; } blob;
	_Static_assert(sizeof(blob) == 34, "34-byte payload");
	memcpy(blob.name, name, sizeof name);

	uint64_t errors = 0, disabled = 0, i;
	struct timespec due;
	clock_gettime(CLOCK_MONOTONIC, &due);
	uint64_t t0 = now_ns();
	for (i = 0; i < n; i++) {
		if (rate > 0 && i % 100 == 0 && i > 0) {
			due.tv_nsec += (long)(100 * 1e9 / rate);
			while (due.tv_nsec >= 1000000000) {
				due.tv_nsec -= 1000000000;
				due.tv_sec++;
			}
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
		}
		if (tpp) {
			if (!bench_tpp_func_enabled()) { disabled++; continue; }
			if (bench_tpp_func((uint32_t)i, i, name))
				errors++;
		} else {
			if (!TRACEPOINT_ENABLED(&raw_tp)) { disabled++; continue; }
			blob.status = (uint32_t)i;
			blob.dur = i;
			struct iovec v[2] = { { 0, 0 }, { &blob, sizeof blob } };
			if (tracepoint_write(&raw_tp, 2, v))
				errors++;
		}
	}
	uint64_t t1 = now_ns();
	uint64_t written = n - disabled - errors;
	double s = (double)(t1 - t0) / 1e9;
	printf("mode=%s written=%llu errors=%llu disabled=%llu ns=%llu events/s=%.0f ns/write=%.0f\n",
	       mode, (unsigned long long)written, (unsigned long long)errors,
	       (unsigned long long)disabled, (unsigned long long)(t1 - t0),
	       (double)written / s, (double)(t1 - t0) / (double)(n ? n : 1));
	if (tpp)
		TPP_UNREGISTER_PROVIDER(BenchProvider);
	else
		tracepoint_close_provider(&raw_provider);
	return errors || disabled ? 1 : 0;
usage:
	fprintf(stderr, "usage: tpbench [-s] [-w S] [-r R] tpp|raw N\n");
	return 2;
}
