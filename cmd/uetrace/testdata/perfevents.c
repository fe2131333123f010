// perfevents: perf_event_open(2) of one of the tree's tracepoints under
// uetrace run, checked call by call against what Linux answers — the
// enable bit, counting, read_format, the ring's records, poll, filters,
// lost records, and hostile arguments — printing "ok NAME" or "FAIL NAME:
// why" for each check. TestRunPerfEvents runs it.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include "user_events_abi.h"
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int fails;
#define CHECK(name, cond, ...)                                  \
	do {                                                    \
		if (cond) {                                     \
			printf("ok %s\n", name);                \
		} else {                                        \
			printf("FAIL %s: ", name);              \
			printf(__VA_ARGS__);                    \
			printf("\n");                           \
			fails++;                                \
		}                                               \
	} while (0)

static int data_fd;
static uint32_t enabled;
static struct user_reg reg;

static void emit(uint32_t n) {
	struct iovec io[2] = {{&reg.write_index, 4}, {&n, 4}};
	if (writev(data_fd, io, 2) != 8)
		printf("FAIL writev: %s\n", strerror(errno)), fails++;
}

static long peo(struct perf_event_attr *a, int pid, int cpu, int group, unsigned long flags) {
	return syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

static int open_ev(int id, uint64_t st, uint64_t rf, int disabled) {
	struct perf_event_attr a = {0};
	a.type = PERF_TYPE_TRACEPOINT;
	a.size = sizeof a;
	a.config = id;
	a.sample_type = st;
	a.read_format = rf;
	a.sample_period = 1;
	a.wakeup_events = 1;
	a.disabled = disabled;
	return peo(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int main(void) {
	long pg = sysconf(_SC_PAGESIZE);
	data_fd = open("/sys/kernel/tracing/user_events_data", O_RDWR);
	if (data_fd < 0)
		return perror("user_events_data"), 2;
	reg.size = sizeof reg;
	reg.enable_bit = 0;
	reg.enable_size = 4;
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.name_args = (uint64_t)(uintptr_t) "my_ev u32 n";
	if (ioctl(data_fd, DIAG_IOCSREG, &reg) < 0)
		return perror("DIAG_IOCSREG"), 2;
	FILE *f = fopen("/sys/kernel/tracing/events/user_events/my_ev/id", "r");
	int id = 0;
	if (!f || fscanf(f, "%d", &id) != 1)
		return perror("id"), 2;
	fclose(f);

	const uint64_t st = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_RAW;
	const uint64_t rf = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID | PERF_FORMAT_LOST;
	int fd = open_ev(id, st, rf, 1);
	CHECK("open", fd >= 0, "perf_event_open: %s", strerror(errno));
	if (fd < 0)
		return 1;
	CHECK("cloexec", fcntl(fd, F_GETFD) == FD_CLOEXEC, "flags %d", fcntl(fd, F_GETFD));
	CHECK("bit-set-while-disabled", enabled == 1, "enable word %u", enabled);

	uint64_t v[5] = {0};
	emit(100); // disabled: not counted
	CHECK("read-disabled", read(fd, v, sizeof v) == 40 && v[0] == 0, "count %llu", (unsigned long long)v[0]);
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	emit(1), emit(2), emit(3);
	uint64_t evid = 0;
	CHECK("ioc-id", ioctl(fd, PERF_EVENT_IOC_ID, &evid) == 0 && evid != 0, "%s", strerror(errno));
	memset(v, 0, sizeof v);
	ssize_t n = read(fd, v, sizeof v);
	CHECK("read-count", n == 40 && v[0] == 3 && v[1] == v[2] && v[1] > 0 && v[3] == evid && v[4] == 0,
	      "read %zd: %llu %llu %llu %llu %llu (id %llu)", n, (unsigned long long)v[0], (unsigned long long)v[1],
	      (unsigned long long)v[2], (unsigned long long)v[3], (unsigned long long)v[4], (unsigned long long)evid);
	char small[8];
	CHECK("read-short-enospc", read(fd, small, sizeof small) < 0 && errno == ENOSPC, "%s", strerror(errno));
	CHECK("write-einval", write(fd, "x", 1) < 0 && errno == EINVAL, "%s", strerror(errno));
	ioctl(fd, PERF_EVENT_IOC_RESET, 0);
	read(fd, v, sizeof v);
	CHECK("reset", v[0] == 0, "count %llu", (unsigned long long)v[0]);

	// Hostile and wrong arguments.
	CHECK("ioc-unknown-enotty", ioctl(fd, _IO('$', 99), 0) < 0 && errno == ENOTTY, "%s", strerror(errno));
	uint64_t zero = 0;
	CHECK("ioc-period-zero-einval", ioctl(fd, PERF_EVENT_IOC_PERIOD, &zero) < 0 && errno == EINVAL, "%s", strerror(errno));
	CHECK("ioc-period-efault", ioctl(fd, PERF_EVENT_IOC_PERIOD, (void *)8) < 0 && errno == EFAULT, "%s", strerror(errno));
	CHECK("ioc-id-efault", ioctl(fd, PERF_EVENT_IOC_ID, (void *)8) < 0 && errno == EFAULT, "%s", strerror(errno));
	CHECK("set-output-self-einval", ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, fd) < 0 && errno == EINVAL, "%s", strerror(errno));
	int p[2];
	pipe(p);
	CHECK("set-output-pipe-ebadf", ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, p[0]) < 0 && errno == EBADF, "%s", strerror(errno));
	CHECK("set-output-closed-ebadf", ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, 999) < 0 && errno == EBADF, "%s", strerror(errno));
	struct perf_event_attr sw = {.type = PERF_TYPE_SOFTWARE, .size = sizeof sw, .config = PERF_COUNT_SW_DUMMY};
	int kfd = peo(&sw, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (kfd >= 0) {
		char link[64] = "";
		char path[64];
		snprintf(path, sizeof path, "/proc/self/fd/%d", kfd);
		readlink(path, link, sizeof link - 1);
		CHECK("kernel-event-untouched", strcmp(link, "anon_inode:[perf_event]") == 0, "the software event's fd is %s", link);
		CHECK("set-output-kernel-einval", ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, kfd) < 0 && errno == EINVAL, "%s", strerror(errno));
		CHECK("kernel-set-output-to-ours-ebadf", ioctl(kfd, PERF_EVENT_IOC_SET_OUTPUT, fd) < 0 && errno == EBADF, "%s", strerror(errno));
		close(kfd);
	} else {
		printf("ok kernel-event-untouched (skipped: %s)\n", strerror(errno));
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	CHECK("reopen-enxio", open(path, O_RDWR) < 0 && errno == ENXIO, "%s", strerror(errno));
	CHECK("mmap-3-data-pages-einval", mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EINVAL, "%s", strerror(errno));
	CHECK("mmap-offset-einval", mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, pg) == MAP_FAILED && errno == EINVAL, "%s", strerror(errno));
	CHECK("mmap-huge-eperm", mmap(NULL, (1 + (1 << 16)) * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EPERM, "%s", strerror(errno));
	struct perf_event_attr bad = {.type = PERF_TYPE_TRACEPOINT, .size = sizeof bad, .config = id, .sample_period = 1,
				      .sample_type = PERF_SAMPLE_CALLCHAIN};
	CHECK("callchain-eopnotsupp", peo(&bad, 0, -1, -1, 0) < 0 && errno == EOPNOTSUPP, "%s", strerror(errno));
	bad.sample_type = 0;
	bad.size = 8;
	CHECK("attr-size-e2big", peo(&bad, 0, -1, -1, 0) < 0 && errno == E2BIG && bad.size == 136 /* PERF_ATTR_SIZE_VER8, the struct of the 6.12 kernel uetrace answers as */, "%s, size %u", strerror(errno), bad.size);
	bad.size = sizeof bad;
	CHECK("pid-cpu-both-minus-one-einval", peo(&bad, -1, -1, -1, 0) < 0 && errno == EINVAL, "%s", strerror(errno));
	CHECK("bad-flags-einval", peo(&bad, 0, -1, -1, 1 << 20) < 0 && errno == EINVAL, "%s", strerror(errno));
	CHECK("attr-efault", peo((void *)8, 0, -1, -1, 0) < 0 && errno == EFAULT, "%s", strerror(errno));

	// The ring: one data page, read and written.
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK("mmap", m != MAP_FAILED, "%s", strerror(errno));
	if (m == MAP_FAILED)
		return 1;
	struct perf_event_mmap_page *up = (void *)m;
	CHECK("userpg", up->data_offset == (uint64_t)pg && up->data_size == (uint64_t)pg, "data_offset %llu data_size %llu",
	      (unsigned long long)up->data_offset, (unsigned long long)up->data_size);
	emit(7);
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	CHECK("poll-pollin", poll(&pfd, 1, 10000) == 1 && pfd.revents == POLLIN, "revents %#x", pfd.revents);
	uint64_t head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	struct {
		struct perf_event_header h;
		uint64_t ident;
		uint32_t pid, tid;
		uint64_t time;
		uint32_t cpu, res;
		uint64_t period;
		uint32_t size;
		uint16_t common_type;
		uint8_t flags, preempt;
		int32_t common_pid;
		uint32_t n;
	} __attribute__((packed)) *s = (void *)(m + pg);
	CHECK("sample", head == s->h.size && s->h.type == PERF_RECORD_SAMPLE && s->ident == evid && s->pid == (uint32_t)getpid() &&
			    s->tid == (uint32_t)gettid() && s->period == 1 && s->size == 12 && s->common_type == id && s->common_pid == gettid() && s->n == 7,
	      "head %llu type %u size %u ident %llu pid %u tid %u period %llu raw %u type %u common_pid %d n %u", (unsigned long long)head,
	      s->h.type, s->h.size, (unsigned long long)s->ident, s->pid, s->tid, (unsigned long long)s->period, s->size, s->common_type,
	      s->common_pid, s->n);
	CHECK("poll-taken", poll(&pfd, 1, 0) == 0, "revents %#x", pfd.revents);

	// Lost: the page filled, then read; the next record says how many.
	for (int i = 0; i < 200; i++)
		emit(i);
	read(fd, v, sizeof v);
	uint64_t lost = v[4];
	CHECK("lost-counted", lost > 0 && v[0] == 201, "count %llu lost %llu", (unsigned long long)v[0], (unsigned long long)lost);
	head = __atomic_load_n(&up->data_head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&up->data_tail, head, __ATOMIC_RELEASE);
	emit(9);
	struct perf_event_header *lh = (void *)(m + pg + (head & (pg - 1)));
	uint64_t *lb = (void *)(lh + 1);
	CHECK("lost-record", lh->type == PERF_RECORD_LOST && lb[0] == evid && lb[1] == lost, "type %u id %llu lost %llu (want %llu)",
	      lh->type, (unsigned long long)lb[0], (unsigned long long)lb[1], (unsigned long long)lost);
	// A hostile tail: far ahead of the head. The ring looks full; nothing
	// is written out of it and the writer is not stuck.
	__atomic_store_n(&up->data_tail, head + (1ull << 40), __ATOMIC_RELEASE);
	emit(10);
	printf("ok hostile-tail\n");

	// A filter: only n > 1.
	int fd2 = open_ev(id, PERF_SAMPLE_RAW, 0, 0);
	CHECK("set-filter", ioctl(fd2, PERF_EVENT_IOC_SET_FILTER, "n > 1") == 0, "%s", strerror(errno));
	CHECK("set-filter-again-eexist", ioctl(fd2, PERF_EVENT_IOC_SET_FILTER, "n > 2") < 0 && errno == EEXIST, "%s", strerror(errno));
	CHECK("set-filter-efault", ioctl(fd2, PERF_EVENT_IOC_SET_FILTER, (void *)8) < 0 && errno == EFAULT, "%s", strerror(errno));
	emit(0), emit(1), emit(2), emit(3);
	read(fd2, v, 8);
	CHECK("filtered-count", v[0] == 2, "count %llu", (unsigned long long)v[0]);
	int fd3 = open_ev(id, PERF_SAMPLE_RAW, 0, 0);
	CHECK("set-filter-bad-einval", ioctl(fd3, PERF_EVENT_IOC_SET_FILTER, "n >>") < 0 && errno == EINVAL, "%s", strerror(errno));

	// Close: the enable bit goes with the last event, before close returns;
	// the descriptor's number is then another event's.
	munmap(m, 2 * pg);
	close(fd2), close(fd3);
	CHECK("bit-kept-while-one-open", enabled == 1, "enable word %u", enabled);
	close(fd);
	CHECK("bit-cleared-at-close", enabled == 0, "enable word %u", enabled);
	int fd4 = open_ev(id, 0, 0, 0);
	CHECK("fd-reused", fd4 == fd, "new fd %d, old %d", fd4, fd);
	emit(5);
	read(fd4, v, 8);
	CHECK("reused-fd-is-new-event", v[0] == 1 && enabled == 1, "count %llu enabled %u", (unsigned long long)v[0], enabled);
	close(fd4);
	printf("%s\n", fails ? "FAILED" : "PASSED");
	return fails != 0;
}
