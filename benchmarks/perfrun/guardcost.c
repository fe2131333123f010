// guardcost: what uetrace run's guard (internal/runguard) costs a command,
// and what opening one of the tree's perf events costs. Run it plain, then
// under `uetrace run --private` (and under another build's run to compare),
// in the same minute; every figure is the best of 15 rounds:
//
//   cc -O2 -o guardcost guardcost.c
//   ./guardcost; uetrace run --private -- ./guardcost
//   uetrace run --private -- sh -c 'echo "u:my_ev u32 n" >> /sys/kernel/tracing/dynamic_events;
//     ./guardcost /sys/kernel/tracing/events/user_events/my_ev/id'
//
// CPU time (this thread's) for the calls the filter decides by itself —
// getppid, mmap and munmap of an anonymous page, ioctl — and wall time for
// a shared mapping of a file, which makes a round trip to uetrace run; with
// an event id file, also the wall time of perf_event_open and of close of
// that tracepoint's event.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double clk(clockid_t c) {
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
	char path[] = "/tmp/guardcost-XXXXXX";
	int n = 50000, fd = mkstemp(path), p[2], v;
	unlink(path);
	if (fd < 0 || ftruncate(fd, 4096) < 0 || pipe(p) < 0)
		return perror("setup"), 1;
	double best[5] = {1e18, 1e18, 1e18, 1e18, 1e18};
	for (int round = 0; round < 15; round++) {
		double t[5];
		t[0] = clk(CLOCK_THREAD_CPUTIME_ID);
		for (int i = 0; i < n; i++)
			syscall(SYS_getppid);
		t[1] = clk(CLOCK_THREAD_CPUTIME_ID);
		for (int i = 0; i < n; i++)
			munmap(mmap(0, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 4096);
		t[2] = clk(CLOCK_THREAD_CPUTIME_ID);
		for (int i = 0; i < n; i++)
			ioctl(p[0], FIONREAD, &v);
		t[3] = clk(CLOCK_THREAD_CPUTIME_ID);
		double w0 = clk(CLOCK_MONOTONIC);
		for (int i = 0; i < 2000; i++)
			munmap(mmap(0, 4096, PROT_READ, MAP_SHARED, fd, 0), 4096);
		double d[4] = {(t[1] - t[0]) / n, (t[2] - t[1]) / n, (t[3] - t[2]) / n, (clk(CLOCK_MONOTONIC) - w0) / 2000};
		for (int k = 0; k < 4; k++)
			if (d[k] < best[k])
				best[k] = d[k];
	}
	printf("cpu: getppid %.0f ns, mmap+munmap private anon %.0f ns, ioctl FIONREAD %.0f ns; wall: mmap+munmap shared file %.0f ns\n",
	       best[0], best[1], best[2], best[3]);
	if (argc < 2)
		return 0;
	FILE *f = fopen(argv[1], "r");
	int id;
	if (!f || fscanf(f, "%d", &id) != 1)
		return perror(argv[1]), 1;
	struct perf_event_attr a = {.type = PERF_TYPE_TRACEPOINT, .size = sizeof a, .config = id, .sample_period = 1, .sample_type = PERF_SAMPLE_RAW};
	double bo = 1e18, bc = 1e18;
	for (int r = 0; r < 50; r++) {
		double t0 = clk(CLOCK_MONOTONIC);
		int efd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		double t1 = clk(CLOCK_MONOTONIC);
		if (efd < 0)
			return perror("perf_event_open"), 1;
		close(efd);
		double t2 = clk(CLOCK_MONOTONIC);
		if (t1 - t0 < bo)
			bo = t1 - t0;
		if (t2 - t1 < bc)
			bc = t2 - t1;
	}
	printf("perf_event_open of %s: %.0f us, close %.0f us\n", argv[1], bo / 1000, bc / 1000);
	return 0;
}
