// procs: a C program that writes user events through the tree, for the
// interposer's tests (tree_test.go). It registers its events itself
// (DIAG_IOCSREG through FUSE) and enables them through the tree's files.
//
//   procs DIR calls          the write path's answers, one line each:
//                            "label result errno", to compare preloaded
//                            with not (UETRACE_PRELOAD=off: FUSE)
//   procs DIR procs          dup, dup2, dup3, F_DUPFD, close, close_range,
//                            closefrom, fclose, fd reuse, SCM_RIGHTS, fork,
//                            raw clone, vfork, exec, a lost wake eventfd;
//                            "FAIL ..." lines and "wrote PID N" lines
//   procs DIR stress SECS    writes from the main thread, a second thread
//                            and a signal handler storm at once; prints
//                            "written N failed F"
//   procs DIR forever        writes sequence-numbered records until killed
//   procs DIR untilfail      writes until a write fails, then prints its
//                            errno
//   procs DIR hostile        scribbles its share's validation table, then
//                            writes records that break their event's layout
//
// Every record of event ue_a carries a checkable payload: a tag, its
// source, a sequence number and a pattern (tree_test.go checks it).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// include/uapi/linux/user_events.h, which libc's headers may lack.
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

static const char *dir;
static int fails;
#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			fails++;                                          \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);       \
			printf(__VA_ARGS__);                              \
			printf(" (errno %d)\n", errno);                   \
		}                                                         \
	} while (0)

static struct stats stats(void)
{
	struct stats s = { 0 };
	void (*f)(struct stats *, size_t) = (void (*)(struct stats *, size_t))dlsym(RTLD_DEFAULT, "uetrace_preload_stats");
	if (f)
		f(&s, sizeof s);
	return s;
}

static char *path(const char *rel)
{
	static char buf[4][512];
	static int k;
	char *b = buf[k++ % 4];
	snprintf(b, 512, "%s/%s", dir, rel);
	return b;
}

// The events: their write indexes in the file data_fd.
static int data_fd;
static uint32_t enable_words[8];
enum { EV_A, EV_OFF, EV_RL, EV_DL, EV_MANY, NEV };
static uint32_t idx[NEV];
static const char *cmds[NEV] = {
	"ue_a u32 tag; u64 seq; u32 src; char[16] pat; u16 end",
	"ue_off u32 a",
	"ue_rl __rel_loc char[] s",
	"ue_dl __data_loc char[] s",
	"ue_many __rel_loc char[] a; __rel_loc char[] b; __rel_loc char[] c; __rel_loc char[] d; __rel_loc char[] e",
};
static const char *names[NEV] = { "ue_a", "ue_off", "ue_rl", "ue_dl", "ue_many" };

static void enable(const char *name, int on)
{
	char rel[128];
	snprintf(rel, sizeof rel, "events/user_events/%s/enable", name);
	int e = open(path(rel), O_WRONLY);
	if (e < 0 || write(e, on ? "1" : "0", 1) != 1) {
		printf("FAIL enabling %s: %m\n", name);
		exit(2);
	}
	close(e);
}

static void setup(void)
{
	data_fd = open(path("user_events_data"), O_RDWR);
	if (data_fd < 0) {
		printf("FAIL open %s: %m\n", path("user_events_data"));
		exit(2);
	}
	for (int i = 0; i < NEV; i++) {
		struct user_reg r = { .size = sizeof r, .enable_bit = 0, .enable_size = 4,
				      .enable_addr = (uint64_t)&enable_words[i], .name_args = (uint64_t)cmds[i] };
		if (ioctl(data_fd, DIAG_IOCSREG, &r) < 0) {
			printf("FAIL register %s: %m\n", cmds[i]);
			exit(2);
		}
		idx[i] = r.write_index;
		if (i != EV_OFF)
			enable(names[i], 1);
	}
}

// payload fills a record of ue_a: tag, sequence, source, pattern, end mark.
#define TAG 0xC0FFEE00u
static void payload(unsigned char p[34], uint32_t src, uint64_t seq)
{
	uint32_t tag = TAG | src;
	memcpy(p, &tag, 4);
	memcpy(p + 4, &seq, 8);
	memcpy(p + 12, &src, 4);
	memset(p + 16, (int)(seq & 0xff), 16);
	p[32] = p[33] = 0x5a;
}

static ssize_t wr(int fd, uint32_t i, const void *p, size_t n)
{
	struct iovec io[2] = { { &i, 4 }, { (void *)p, n } };
	return writev(fd, io, 2);
}

static ssize_t wr_a(int fd, uint32_t src, uint64_t seq)
{
	unsigned char p[34];
	payload(p, src, seq);
	return wr(fd, idx[EV_A], p, 34);
}

// ---- calls ----

static void show(const char *label, ssize_t r)
{
	printf("%s %zd %s\n", label, r, r < 0 ? strerrorname_np(errno) : "0");
	fflush(stdout);
}
#define SHOW(label, call)            \
	do {                         \
		errno = 0;           \
		ssize_t r_ = (call); \
		show(label, r_);     \
	} while (0)

static void calls(void)
{
	unsigned char p[34];
	payload(p, 9, 1);
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t a = idx[EV_A];
	SHOW("enabled_writev", wr(data_fd, a, p, 34));
	SHOW("disabled", wr(data_fd, idx[EV_OFF], p, 4));
	SHOW("short_payload", wr(data_fd, a, p, 10));
	SHOW("short_beats_disabled", wr(data_fd, idx[EV_OFF], p, 2));
	SHOW("negative_index", wr(data_fd, 0x80000000u, p, 34));
	SHOW("unknown_index", wr(data_fd, 1000, p, 34));
	SHOW("write_3_bytes", write(data_fd, &a, 3));
	SHOW("write_0_bytes", write(data_fd, &a, 0));
	{ struct iovec z = { p, 0 }; SHOW("writev_0_bytes", writev(data_fd, &z, 1)); }
	SHOW("writev_0_iovecs", writev(data_fd, NULL, 0));
	{ static struct iovec many[1025]; SHOW("writev_1025_iovecs", writev(data_fd, many, 1025)); }
	SHOW("writev_bad_array", writev(data_fd, (struct iovec *)hole, 2));
	{
		unsigned char b[38];
		memcpy(b, &a, 4);
		memcpy(b + 4, p, 34);
		SHOW("write_whole", write(data_fd, b, 38));
		SHOW("pwrite_0", pwrite(data_fd, b, 38, 0));
		SHOW("pwrite_5", pwrite(data_fd, b, 38, 5));
		SHOW("pwrite_negative", pwrite(data_fd, b, 38, -1));
		struct iovec io = { b, 38 };
		SHOW("pwritev_7", pwritev(data_fd, &io, 1, 7));
		SHOW("pwritev2_0", pwritev2(data_fd, &io, 1, 0, 0));
	}
	SHOW("enabled_fault", wr(data_fd, a, hole, 34));
	SHOW("disabled_fault", wr(data_fd, idx[EV_OFF], hole, 4));
	{ struct iovec io[2] = { { hole, 4 }, { p, 34 } }; SHOW("index_fault", writev(data_fd, io, 2)); }
	{
		// 40 iovecs of one byte or so: the ring path copies them in chunks.
		struct iovec io[40];
		unsigned char b[38];
		memcpy(b, &a, 4);
		memcpy(b + 4, p, 34);
		for (int i = 0; i < 37; i++) io[i] = (struct iovec){ b + i, 1 };
		io[37] = (struct iovec){ b + 37, 1 };
		io[38] = (struct iovec){ b, 0 };
		io[39] = (struct iovec){ b, 0 };
		SHOW("writev_40_iovecs", writev(data_fd, io, 40));
	}
	{
		// __rel_loc char[] s at offset 8: loc = len << 16 | offset from the field's end.
		unsigned char r[8] = { 0 };
		uint32_t loc = 4u << 16;
		memcpy(r, &loc, 4);
		memcpy(r + 4, "abc", 4);
		SHOW("rel_loc_valid", wr(data_fd, idx[EV_RL], r, 8));
		memcpy(r + 4, "abcd", 4);
		SHOW("rel_loc_no_nul", wr(data_fd, idx[EV_RL], r, 8));
		loc = 40u << 16;
		memcpy(r, &loc, 4);
		SHOW("rel_loc_past_end", wr(data_fd, idx[EV_RL], r, 8));
		loc = 0;
		memcpy(r, &loc, 4);
		SHOW("rel_loc_empty", wr(data_fd, idx[EV_RL], r, 8));
	}
	{
		// __data_loc char[] s at offset 8: loc = len << 16 | offset from the record's start.
		unsigned char r[8] = { 0 };
		uint32_t loc = (4u << 16) | 12;
		memcpy(r, &loc, 4);
		memcpy(r + 4, "xyz", 4);
		SHOW("data_loc_valid", wr(data_fd, idx[EV_DL], r, 8));
		loc = (2u << 16) | 0; // ends in the type id: the daemon's
		memcpy(r, &loc, 4);
		SHOW("data_loc_in_type_id", wr(data_fd, idx[EV_DL], r, 8));
		loc = (4u << 16) | 2; // ends in the flags and the pid's low byte
		memcpy(r, &loc, 4);
		SHOW("data_loc_in_header", wr(data_fd, idx[EV_DL], r, 8));
		loc = (40u << 16) | 12;
		memcpy(r, &loc, 4);
		SHOW("data_loc_past_end", wr(data_fd, idx[EV_DL], r, 8));
	}
	{
		unsigned char m[25] = { 0 };
		for (int i = 0; i < 5; i++) {
			uint32_t loc = (1u << 16) | (uint32_t)(20 - 4 * i); // each field's 1-byte string: the last byte, a NUL
			memcpy(m + 4 * i, &loc, 4);
		}
		SHOW("five_locs", wr(data_fd, idx[EV_MANY], m, 25));
	}
	{
		static unsigned char big[70000];
		memset(big, 'x', sizeof big);
		SHOW("payload_69996", wr(data_fd, a, big, sizeof big - 4));
	}
	int ro = open(path("user_events_data"), O_RDONLY);
	SHOW("read_only", wr(ro, a, p, 34));
	close(ro);
	struct stats s = stats();
	fprintf(stderr, "shares %llu voided %llu fallbacks %llu\n", (unsigned long long)s.shares,
		(unsigned long long)s.voided, (unsigned long long)s.fallbacks);
}

// ---- procs ----

// ten writes ten records of ue_a and prints who wrote them.
static void ten(int fd, const char *who)
{
	int n = 0;
	for (int i = 0; i < 10; i++)
		n += wr_a(fd, 3, (uint64_t)i) == 38;
	printf("wrote %d %d %s\n", getpid(), n, who);
	fflush(stdout);
}

// sendfd passes fd over a Unix socket pair and returns the descriptor
// received.
static int sendfd(int fd)
{
	int sp[2];
	socketpair(AF_UNIX, SOCK_DGRAM, 0, sp);
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iv = { "x", 1 };
	struct msghdr m = { .msg_iov = &iv, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	sendmsg(sp[0], &m, 0);
	char x;
	struct iovec ir = { &x, 1 };
	char rb[CMSG_SPACE(sizeof(int))];
	struct msghdr mr = { .msg_iov = &ir, .msg_iovlen = 1, .msg_control = rb, .msg_controllen = sizeof rb };
	recvmsg(sp[1], &mr, 0);
	int got;
	memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&mr)), sizeof(int));
	close(sp[0]);
	close(sp[1]);
	return got;
}

static void procs(char **argv)
{
	int fd = data_fd;
	struct stats s0 = stats();
	ten(fd, "main");
	struct stats s1 = stats();
	CHECK(s1.shares == 1 && s1.fallbacks == s0.fallbacks, "the writes went through one share: shares %llu fallbacks %llu",
	      (unsigned long long)s1.shares, (unsigned long long)s1.fallbacks);

	// The set's eventfd closed behind the library's back and its number
	// reused: a wake must never write into the new file. The library keeps
	// two descriptors of it, the one it writes and, just above, the one it
	// checks it against (kcmp): the lower of the two highest eventfds.
	{
		int w = -1, ref = -1;
		struct rlimit rl;
		getrlimit(RLIMIT_NOFILE, &rl);
		for (int i = (int)rl.rlim_cur - 1; i > 2 && w < 0; i--) {
			char path[64], link[64];
			snprintf(path, sizeof path, "/proc/self/fd/%d", i);
			ssize_t n = readlink(path, link, sizeof link - 1);
			if (n < 0)
				continue;
			link[n] = 0;
			if (strcmp(link, "anon_inode:[eventfd]") != 0)
				continue;
			if (ref < 0)
				ref = i;
			else
				w = i;
		}
		CHECK(w > 60 && ref == w + 1, "the set's eventfd at %d, its second descriptor at %d", w, ref);
		syscall(SYS_close, w); // raw: the library does not see it
		int r[2];
		CHECK(pipe2(r, O_NONBLOCK) == 0, "pipe");
		syscall(SYS_dup2, r[1], w);
		// The daemon sleeps after ~1 ms without records, for up to 200
		// ms at a time: a write 300 ms later finds it asleep, unless the
		// machine is so busy it just woke; a few tries.
		int tries = 0;
		do {
			usleep(300000);
			CHECK(wr_a(fd, 3, 6) == 38, "write after the daemon slept");
			tries++;
		} while (stats().wakes_lost == 0 && tries < 10);
		printf("wrote %d %d after-sleep\n", getpid(), tries);
		char b[8];
		CHECK(read(r[0], b, sizeof b) == -1 && errno == EAGAIN, "nothing went into the pipe at the eventfd's number");
		CHECK(stats().wakes_lost >= 1, "the wake went through FUSE (after %d writes)", tries);
	}
	// dup, dup2, dup3, F_DUPFD: the same open file, the same share.
	int d1 = dup(fd), d2 = dup2(fd, 40), d3 = dup3(fd, 41, O_CLOEXEC), d4 = fcntl(fd, F_DUPFD_CLOEXEC, 50);
	CHECK(d1 >= 0 && d2 == 40 && d3 == 41 && d4 >= 50, "dups %d %d %d %d", d1, d2, d3, d4);
	CHECK(wr_a(d1, 3, 0) == 38 && wr_a(d2, 3, 1) == 38 && wr_a(d3, 3, 2) == 38 && wr_a(d4, 3, 3) == 38, "the dups write");
	printf("wrote %d 4 dups\n", getpid());
	CHECK(stats().fallbacks == s0.fallbacks, "the dups went through the ring");

	// A number reused by another file: its writes are that file's.
	close(d2);
	int p[2];
	CHECK(pipe(p) == 0, "pipe");
	CHECK(dup2(p[1], 40) == 40, "40 is the pipe's now");
	CHECK(wr_a(40, 3, 0) == 38, "write to the pipe at 40");
	{ char b[64]; CHECK(read(p[0], b, sizeof b) == 38, "the pipe got the 38 bytes, not the ring"); }
	// dup2 over one of ours: 41 is the pipe's now.
	CHECK(dup2(p[1], 41) == 41, "dup2 over 41");
	CHECK(wr_a(41, 3, 0) == 38, "write to 41");
	{ char b[64]; CHECK(read(p[0], b, sizeof b) == 38, "the pipe got them"); }
	// Ours closed, the number reopened by open(2).
	int num = d1;
	close(d1);
	int dn = open("/dev/null", O_WRONLY);
	CHECK(dn == num, "/dev/null got number %d (%d)", num, dn);
	{ struct stats b = stats(); CHECK(wr_a(dn, 3, 0) == 38 && stats().fallbacks == b.fallbacks, "/dev/null's write"); }
	close(dn);
	// close_range and closefrom over ours.
	CHECK(close_range(50, 60, 0) == 0 && fcntl(d4, F_GETFD) == -1, "closed by close_range");
	int d5 = fcntl(fd, F_DUPFD, 70);
	closefrom(70);
	CHECK(fcntl(d5, F_GETFD) == -1, "closed by closefrom");
	int q[2];
	CHECK(pipe(q) == 0, "pipe");
	if (q[1] != d5)
		dup2(q[1], d5);
	CHECK(wr_a(d5, 3, 0) == 38, "write to the pipe at %d", d5);
	{ char b[64]; CHECK(read(q[0], b, sizeof b) == 38, "the pipe at a closefrom'd number got the write"); }
	// fclose of a stream on ours: the number is forgotten.
	int d6 = dup(fd);
	FILE *fp = fdopen(d6, "w");
	fclose(fp);
	int dz = open("/dev/zero", O_WRONLY);
	CHECK(dz == d6 && wr_a(dz, 3, 0) == 38, "the fclose'd number reused by /dev/zero");
	close(dz);

	// A descriptor received over a Unix socket.
	int got = sendfd(fd);
	{ struct stats b = stats(); CHECK(got != fd && wr_a(got, 3, 4) == 38 && stats().fallbacks == b.fallbacks, "SCM_RIGHTS"); }
	printf("wrote %d 1 scm\n", getpid());
	close(got);

	// fork and a raw clone: the child writes in its own name, through its
	// own share.
	pid_t c = fork();
	if (c == 0) {
		ten(fd, "fork-child");
		_exit(stats().shares == 1 && stats().fallbacks == 0 ? 0 : 3);
	}
	int st;
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: a share of its own (status %d)", st);
	c = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (c == 0) {
		ten(fd, "clone-child");
		_exit(stats().shares == 1 ? 0 : 3);
	}
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clone child");

	// vfork: the child must not publish in the parent's ring (its
	// record goes through FUSE under its own pid: the test reads the
	// trace), nor change the parent's state.
	struct stats v0 = stats();
	c = vfork();
	if (c == 0) {
		wr_a(fd, 3, 0);
		_exit(0);
	}
	waitpid(c, &st, 0);
	printf("wrote %d 1 vfork-child\n", c);
	CHECK(wr_a(fd, 3, 5) == 38 && stats().fallbacks == v0.fallbacks && stats().shares == 1, "the parent's ring after the vfork");
	printf("wrote %d 1 after-vfork\n", getpid());

	// exec: the library starts afresh in the new program.
	c = fork();
	if (c == 0) {
		char fds[16];
		snprintf(fds, sizeof fds, "%d", fd);
		execl("/proc/self/exe", argv[0], dir, "exec-child", fds, (char *)NULL);
		_exit(127);
	}
	waitpid(c, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exec child (status %d)", st);

	printf("%s %d\n", fails ? "FAIL" : "PASS", fails);
}

// ---- stress ----

static atomic_ulong st_written, st_failed;
static atomic_int st_stop;
static pthread_t main_thread;
static uint64_t hseq;

static void one(uint32_t src, uint64_t seq)
{
	int e = errno;
	if (wr_a(data_fd, src, seq) == 38)
		atomic_fetch_add(&st_written, 1);
	else
		atomic_fetch_add(&st_failed, 1);
	errno = e; // a handler leaves errno as it found it
}

static void handler(int sig)
{
	(void)sig;
	one(1, hseq++);
}

static void *writer(void *a)
{
	(void)a;
	for (uint64_t s = 0; !atomic_load(&st_stop); s++)
		one(2, s);
	return NULL;
}

static void *kicker(void *a)
{
	(void)a;
	struct timespec ts = { 0, 20000 };
	while (!atomic_load(&st_stop)) {
		pthread_kill(main_thread, SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void stress(double secs)
{
	main_thread = pthread_self();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t k, w;
	// The storm starts before the first write: handlers also interrupt
	// the share's set-up.
	pthread_create(&k, NULL, kicker, NULL);
	pthread_create(&w, NULL, writer, NULL);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t s = 0;
	do {
		for (int i = 0; i < 1000; i++)
			one(0, s++);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
	atomic_store(&st_stop, 1);
	pthread_join(k, NULL);
	pthread_join(w, NULL);
	struct stats us = stats();
	printf("written %lu failed %lu dropped %llu fallbacks %llu\n", atomic_load(&st_written), atomic_load(&st_failed),
	       (unsigned long long)us.dropped, (unsigned long long)us.fallbacks);
}

// ---- hostile ----

// hostile makes its own share's table say that every index is enabled,
// takes any payload and has no __data_loc rules, then writes records of
// ue_rl whose __rel_loc points past the record, and ue_a records too short:
// the library publishes them as they are; the daemon must deliver none.
static void hostile(void)
{
	unsigned char p[34];
	payload(p, 4, 0);
	CHECK(wr(data_fd, idx[EV_A], p, 34) == 38, "a first write sets the share up");
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t lo = 0, hi = 0;
	while (fgets(line, sizeof line, maps))
		if (strstr(line, "/memfd:uetrace-table")) {
			sscanf(line, "%lx-%lx", &lo, &hi);
			break;
		}
	fclose(maps);
	CHECK(lo != 0, "found the table's mapping");
	if (!lo)
		return;
	// The library maps it read-only; its memfd is ours, open read-write.
	CHECK(mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) == 0, "mprotect the table writable");
	for (uintptr_t o = 64; o + 32 <= hi - lo; o += 32) {
		uint32_t word = 1 | 1u << 8; // ready, enabled, no loc rules, no flags
		memcpy((void *)(lo + o), &word, 4);
		memset((void *)(lo + o + 4), 0, 4);         // min_size 0
		memset((void *)(lo + o + 8), 0xff, 4);      // ring_max: anything
		memset((void *)(lo + o + 16), 0, 16);       // no loc
	}
	unsigned char r[8] = { 0 };
	uint32_t loc = 200u << 16; // past the record's end
	memcpy(r, &loc, 4);
	memcpy(r + 4, "abcd", 4);
	int n = 0;
	for (int i = 0; i < 100; i++) {
		n += wr(data_fd, idx[EV_RL], r, 8) == 12;  // the layout broken
		n += wr(data_fd, idx[EV_A], p, 10) == 14;  // shorter than the fields
		n += wr(data_fd, idx[EV_OFF], p, 4) == 8;  // a disabled event
	}
	printf("hostile %d of 300 accepted by the library\n", n);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: procs DIR calls|procs|stress SECS|forever|hostile\n");
		return 2;
	}
	dir = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(argv[2], "exec-child") == 0) {
		// The descriptor inherited across exec, its events registered by
		// the parent: index 0 is ue_a.
		data_fd = atoi(argv[3]);
		idx[EV_A] = 0;
		ten(data_fd, "exec-child");
		struct stats s = stats();
		return s.shares == 1 && s.fallbacks == 0 ? 0 : 3;
	}
	setup();
	if (strcmp(argv[2], "calls") == 0)
		calls();
	else if (strcmp(argv[2], "procs") == 0)
		procs(argv);
	else if (strcmp(argv[2], "stress") == 0)
		stress(argc > 3 ? atof(argv[3]) : 2);
	else if (strcmp(argv[2], "forever") == 0) {
		printf("ready\n");
		for (uint64_t s = 0;; s++)
			wr_a(data_fd, 0, s);
	} else if (strcmp(argv[2], "untilfail") == 0) {
		// The share set up first: the ring takes the writes.
		for (int i = 0; i < 1000; i++)
			wr_a(data_fd, 0, 0);
		if (stats().shares != 1 || stats().fallbacks != 0) {
			printf("no share\n");
			return 1;
		}
		printf("ready\n");
		for (uint64_t s = 0;; s++)
			if (wr_a(data_fd, 0, s) != 38) {
				printf("%s\n", strerrorname_np(errno));
				return 0;
			}
	} else if (strcmp(argv[2], "hostile") == 0)
		hostile();
	else
		return 2;
	return fails != 0;
}
