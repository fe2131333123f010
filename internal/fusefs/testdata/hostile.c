/* hostile is the callers of TestHostile: programs that misuse
 * user_events_data and trace_pipe as a hostile or broken program would, and
 * a well-behaved client that proves the tree still serves everyone else.
 *
 *   hostile faults DIR            DIAG_IOCSREG/UNREG with unmapped and
 *                                 read-only user_reg and enable_addr: prints
 *                                 "label: rc ERRNO" rows as kernel.golden's
 *   hostile client DIR NAME       register NAME, write, read status, unregister
 *   hostile spin DIR NAME N       N threads register, write, unregister, open
 *                                 and close for ever (to be SIGKILLed)
 *   hostile opens DIR N           N concurrent opens of user_events_data and N
 *                                 of user_events_status, a register on each
 *                                 data file, then every close
 *   hostile munmap DIR NAME       register, unmap the enable word's page, then
 *                                 wait for stdin's EOF
 *   hostile uffd DIR NAME         register, then make the enable word's page a
 *                                 userfaultfd page whose faults nobody serves;
 *                                 wait for stdin's EOF
 *   hostile uffdreg DIR           DIAG_IOCSREG with the name in a page whose
 *                                 faults nobody serves (to be SIGKILLed)
 *   hostile writer DIR NAME K     register NAME and write K records
 *   hostile tryopen FILE          open FILE read-only: "ok" or the errno name
 *   hostile hold FILE             open FILE, say "open", never read it
 *   hostile hoard DIR F R         open user_events_data and user_events_status
 *                                 until F files or a failure ("files N ERRNO"),
 *                                 then opendir events ("dir ERRNO"), then
 *                                 register R enablers until a failure
 *                                 ("regs N ERRNO"); with X, then register X
 *                                 events of their own names whose enable
 *                                 word cannot be written ("failed X");
 *                                 say "holding" and wait for stdin's EOF
 *
 * Every mode prints what it did on stdout and exits 1 on an unexpected
 * failure, saying what failed on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((__packed__));

struct user_unreg {
	uint32_t size;
	uint8_t disable_bit;
	uint8_t reserved;
	uint16_t reserved2;
	uint64_t disable_addr;
} __attribute__((__packed__));

#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)
#define DIAG_IOCSUNREG _IOW('*', 2, struct user_unreg *)
#define PAGE 4096

static const char *dir;

static void die(const char *what)
{
	fprintf(stderr, "hostile: %s: %s\n", what, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
	exit(1);
}

static int open_in(const char *name, int flags)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return open(p, flags | O_CLOEXEC);
}

/* reg registers cmd ("name u32 n") with its enable word at addr, bit 0;
 * the result and errno, with write_index in *idx. */
static int reg(int fd, void *r, uint64_t addr, const char *cmd, uint32_t *idx, int *err)
{
	struct user_reg *u = r;
	memset(u, 0, sizeof(*u));
	u->size = sizeof(*u);
	u->enable_size = 8;
	u->enable_addr = addr;
	u->name_args = (uintptr_t)cmd;
	u->write_index = 0xffffffff;
	int rc = ioctl(fd, DIAG_IOCSREG, u);
	*err = rc < 0 ? errno : 0;
	if (idx)
		*idx = u->write_index;
	return rc;
}

static int unreg(int fd, uint64_t addr, int *err)
{
	struct user_unreg u;
	memset(&u, 0, sizeof(u));
	u.size = sizeof(u);
	u.disable_addr = addr;
	int rc = ioctl(fd, DIAG_IOCSUNREG, &u);
	*err = rc < 0 ? errno : 0;
	return rc;
}

static void row(const char *label, int rc, int err)
{
	printf("%s: %d %s\n", label, rc, err ? strerrorname_np(err) : "0");
}

static void *map(int prot)
{
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	memset(p, 0, PAGE);
	if (prot != (PROT_READ | PROT_WRITE) && mprotect(p, PAGE, prot) < 0)
		die("mprotect");
	return p;
}

static void *unmapped(void)
{
	void *p = map(PROT_READ | PROT_WRITE);
	munmap(p, PAGE);
	return p;
}

static int faults(void)
{
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	static uint64_t word;
	static const char cmd[] = "hostile_faults u32 a";
	struct user_reg r;
	int rc, err;

	/* user_reg itself unmapped, and read-only (Linux ignores the failed
	 * write_index store). */
	rc = ioctl(fd, DIAG_IOCSREG, unmapped());
	row("reg.struct_unmapped", rc, rc < 0 ? errno : 0);
	struct user_reg *ro = map(PROT_READ | PROT_WRITE);
	ro->size = sizeof(*ro);
	ro->enable_size = 8;
	ro->enable_addr = (uintptr_t)&word;
	ro->name_args = (uintptr_t)cmd;
	ro->write_index = 0xdeadbeef;
	if (mprotect(ro, PAGE, PROT_READ) < 0)
		die("mprotect");
	rc = ioctl(fd, DIAG_IOCSREG, ro);
	row("reg.struct_readonly", rc, rc < 0 ? errno : 0);
	rc = unreg(fd, (uintptr_t)&word, &err);
	row("reg.struct_readonly.unreg", rc, err);

	/* The enable word unmapped, and read-only. */
	rc = reg(fd, &r, (uintptr_t)unmapped(), cmd, NULL, &err);
	row("reg.enable_addr_unmapped", rc, err);
	rc = reg(fd, &r, (uintptr_t)map(PROT_READ), cmd, NULL, &err);
	row("reg.enable_addr_readonly", rc, err);

	/* The name unmapped. */
	rc = reg(fd, &r, (uintptr_t)&word, (const char *)unmapped(), NULL, &err);
	row("reg.name_unmapped", rc, err);

	/* Registered, then the enable word's page unmapped or made read-only:
	 * DIAG_IOCSUNREG clears the bit, fails, and the enabler is gone. */
	uint64_t *w = map(PROT_READ | PROT_WRITE);
	if (reg(fd, &r, (uintptr_t)w, cmd, NULL, &err) < 0)
		die("register");
	munmap(w, PAGE);
	rc = unreg(fd, (uintptr_t)w, &err);
	row("unreg.addr_unmapped", rc, err);
	rc = unreg(fd, (uintptr_t)w, &err);
	row("unreg.addr_unmapped.again", rc, err);
	w = map(PROT_READ | PROT_WRITE);
	if (reg(fd, &r, (uintptr_t)w, cmd, NULL, &err) < 0)
		die("register");
	if (mprotect(w, PAGE, PROT_READ) < 0)
		die("mprotect");
	rc = unreg(fd, (uintptr_t)w, &err);
	row("unreg.addr_readonly", rc, err);
	rc = unreg(fd, (uintptr_t)w, &err);
	row("unreg.addr_readonly.again", rc, err);
	close(fd);
	return 0;
}

/* listed reports whether status lists event name on a line of its own
 * ("name" or "name # Used by ..."). */
static int listed(const char *status, const char *name)
{
	size_t n = strlen(name);
	for (const char *l = status; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, name, n) && (l[n] == '\n' || l[n] == ' '))
			return 1;
	return 0;
}

/* client is the well-behaved caller: everything must work. */
static int client(const char *name)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s u32 n", name);
	static uint64_t word;
	struct user_reg r;
	uint32_t idx;
	int err;
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("client: open user_events_data");
	if (reg(fd, &r, (uintptr_t)&word, cmd, &idx, &err) < 0) {
		errno = err;
		die("client: DIAG_IOCSREG");
	}
	/* A write to a disabled event is EBADF, as on Linux: either way the
	 * write was answered. */
	uint32_t rec[2] = {idx, 42};
	int enabled = word & 1;
	ssize_t w = write(fd, rec, sizeof(rec));
	if (enabled ? w != sizeof(rec) : w != -1 || errno != EBADF)
		die(enabled ? "client: write to the enabled event" : "client: write to the disabled event (want EBADF)");
	int st = open_in("user_events_status", O_RDONLY);
	if (st < 0)
		die("client: open user_events_status");
	char buf[1 << 16];
	ssize_t n = read(st, buf, sizeof(buf) - 1);
	if (n < 0)
		die("client: read user_events_status");
	buf[n] = 0;
	close(st);
	if (!listed(buf, name)) {
		fprintf(stderr, "hostile: client: %s not in user_events_status:\n%s", name, buf);
		return 1;
	}
	if (unreg(fd, (uintptr_t)&word, &err) < 0) {
		errno = err;
		die("client: DIAG_IOCSUNREG");
	}
	close(fd);
	printf("ok\n");
	return 0;
}

struct spinarg {
	const char *name;
	int n;
};

static volatile int started;

static void *spin1(void *a)
{
	struct spinarg *s = a;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s u32 n", s->name);
	uint64_t *words = map(PROT_READ | PROT_WRITE);
	struct user_reg r;
	uint32_t idx;
	int err;
	for (unsigned i = 0;; i++) {
		int fd = open_in("user_events_data", O_RDWR);
		if (fd < 0)
			continue;
		for (int k = 0; k < 8; k++) {
			if (reg(fd, &r, (uintptr_t)&words[k], cmd, &idx, &err) == 0) {
				__atomic_store_n(&started, 1, __ATOMIC_SEQ_CST);
				uint32_t rec[2] = {idx, i};
				(void)!write(fd, rec, sizeof(rec));
			}
		}
		for (int k = 0; k < 8; k += 2)
			unreg(fd, (uintptr_t)&words[k], &err);
		close(fd); /* the odd ones go with the close */
	}
	return NULL;
}

static int spin(const char *name, int n)
{
	static struct spinarg a;
	a.name = name;
	a.n = n;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, spin1, &a) != 0)
			die("pthread_create");
	}
	while (!__atomic_load_n(&started, __ATOMIC_SEQ_CST))
		usleep(1000);
	printf("go\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

#define OPENERS 50

static int nopen;
static int *datafds, *statfds;
static pthread_barrier_t barrier;

static void *opener(void *a)
{
	long t = (long)a;
	static const char cmd[] = "hostile_opens u32 n";
	struct user_reg r;
	int err;
	uint64_t *words = map(PROT_READ | PROT_WRITE);
	pthread_barrier_wait(&barrier);
	for (int i = t; i < nopen; i += OPENERS) {
		datafds[i] = open_in("user_events_data", O_RDWR);
		statfds[i] = open_in("user_events_status", O_RDONLY);
	}
	for (int i = t, k = 0; i < nopen; i += OPENERS, k++) {
		if (datafds[i] >= 0 && reg(datafds[i], &r, (uintptr_t)&words[k], cmd, NULL, &err) < 0) {
			errno = err;
			die("opens: DIAG_IOCSREG");
		}
	}
	pthread_barrier_wait(&barrier);
	return NULL;
}

static int opens(int n)
{
	struct rlimit rl = {2 * n + 64, 2 * n + 64};
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("setrlimit");
	nopen = n;
	datafds = calloc(n, sizeof(int));
	statfds = calloc(n, sizeof(int));
	pthread_barrier_init(&barrier, NULL, OPENERS);
	pthread_t ts[OPENERS];
	for (long t = 0; t < OPENERS; t++)
		if (pthread_create(&ts[t], NULL, opener, (void *)t) != 0)
			die("pthread_create");
	for (int t = 0; t < OPENERS; t++)
		pthread_join(ts[t], NULL);
	int d = 0, s = 0, firsterr = 0;
	for (int i = 0; i < n; i++) {
		d += datafds[i] >= 0;
		s += statfds[i] >= 0;
	}
	(void)firsterr;
	printf("opened %d %d\n", d, s);
	for (int i = 0; i < n; i++) {
		if (datafds[i] >= 0)
			close(datafds[i]);
		if (statfds[i] >= 0)
			close(statfds[i]);
	}
	printf("closed\n");
	return d == n && s == n ? 0 : 1;
}

static void wait_stdin(void)
{
	char c;
	while (read(0, &c, 1) > 0)
		;
}

static int unmap_after(const char *name)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s u32 n", name);
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	uint64_t *w = map(PROT_READ | PROT_WRITE);
	struct user_reg r;
	int err;
	if (reg(fd, &r, (uintptr_t)w, cmd, NULL, &err) < 0) {
		errno = err;
		die("DIAG_IOCSREG");
	}
	munmap(w, PAGE);
	printf("ready\n");
	fflush(stdout);
	wait_stdin();
	return 0;
}

static int uffd(const char *name)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s u32 n", name);
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	uint64_t *w = map(PROT_READ | PROT_WRITE);
	struct user_reg r;
	int err;
	if (reg(fd, &r, (uintptr_t)w, cmd, NULL, &err) < 0) {
		errno = err;
		die("DIAG_IOCSREG");
	}
	int u = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (u < 0) {
		printf("no userfaultfd: %s\n", strerrorname_np(errno));
		return 0;
	}
	struct uffdio_api api = {.api = UFFD_API};
	if (ioctl(u, UFFDIO_API, &api) < 0)
		die("UFFDIO_API");
	/* The page is dropped and its next fault goes to u, which nobody
	 * reads: any access to it waits until this process exits. */
	if (madvise(w, PAGE, MADV_DONTNEED) < 0)
		die("madvise");
	struct uffdio_register ur = {.range = {.start = (uintptr_t)w, .len = PAGE}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(u, UFFDIO_REGISTER, &ur) < 0)
		die("UFFDIO_REGISTER");
	printf("ready\n");
	fflush(stdout);
	wait_stdin();
	return 0;
}

/* uffdreg calls DIAG_IOCSREG with the event's name in a page whose faults
 * nobody serves: the daemon's read of the name waits in the fault, and the
 * test kills this process in the middle of the ioctl. */
static int uffdreg(void)
{
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	int u = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (u < 0) {
		printf("no userfaultfd: %s\n", strerrorname_np(errno));
		return 0;
	}
	struct uffdio_api api = {.api = UFFD_API};
	if (ioctl(u, UFFDIO_API, &api) < 0)
		die("UFFDIO_API");
	/* Never touched here: only the daemon's read faults on it. */
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	struct uffdio_register ur = {.range = {.start = (uintptr_t)p, .len = PAGE}, .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(u, UFFDIO_REGISTER, &ur) < 0)
		die("UFFDIO_REGISTER");
	/* FUSE itself copies the ioctl's first 8 bytes in this process; the
	 * name is read by the daemon only. */
	static uint64_t word;
	struct user_reg r;
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.enable_size = 8;
	r.enable_addr = (uintptr_t)&word;
	r.name_args = (uintptr_t)p;
	printf("calling\n");
	fflush(stdout);
	int rc = ioctl(fd, DIAG_IOCSREG, &r);
	printf("returned %d %s\n", rc, rc < 0 ? strerrorname_np(errno) : "0");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

static int writer(const char *name, int k)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "%s u32 n", name);
	static uint64_t word;
	struct user_reg r;
	uint32_t idx;
	int err;
	int fd = open_in("user_events_data", O_RDWR);
	if (fd < 0)
		die("open user_events_data");
	if (reg(fd, &r, (uintptr_t)&word, cmd, &idx, &err) < 0) {
		errno = err;
		die("DIAG_IOCSREG");
	}
	/* The event is enabled before the writers start. */
	if (!(word & 1)) {
		fprintf(stderr, "hostile: writer: the event %s is not enabled\n", name);
		return 1;
	}
	for (int i = 0; i < k; i++) {
		uint32_t rec[2] = {idx, i};
		if (write(fd, rec, sizeof(rec)) != sizeof(rec))
			die("write");
	}
	close(fd);
	printf("wrote %d\n", k);
	return 0;
}

static int hoard(int files, int regs, int failing)
{
	int data = open_in("user_events_data", O_RDWR);
	if (data < 0)
		die("open user_events_data");
	int n = 1, err = 0;
	for (; n < files; n++) {
		if (open_in("user_events_status", O_RDONLY) < 0) {
			err = errno;
			break;
		}
	}
	printf("files %d %s\n", n, err ? strerrorname_np(err) : "0");
	char p[4096];
	snprintf(p, sizeof(p), "%s/events", dir);
	int d = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	printf("dir %s\n", d < 0 ? strerrorname_np(errno) : "ok");
	uint64_t *words = map(PROT_READ | PROT_WRITE);
	struct user_reg r;
	int i = 0;
	err = 0;
	for (; i < regs; i++) {
		r.enable_bit = 0;
		if (reg(data, &r, (uintptr_t)&words[i], "hoard u32 n", NULL, &err) < 0)
			break;
	}
	printf("regs %d %s\n", i, err ? strerrorname_np(err) : "0");
	if (failing > 0) {
		/* Page 0 is never mapped: every registration fails, ENOMEM,
		 * leaving its event in the file as Linux does. */
		char name[64];
		for (i = 0; i < failing; i++) {
			snprintf(name, sizeof(name), "hoardfail_%d u32 n", i);
			reg(data, &r, 8, name, NULL, &err);
		}
		printf("failed %d\n", i);
	}
	printf("holding\n");
	wait_stdin();
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: hostile MODE DIR|FILE ...\n");
		return 2;
	}
	dir = argv[2];
	const char *m = argv[1];
	if (!strcmp(m, "faults"))
		return faults();
	if (!strcmp(m, "client") && argc == 4)
		return client(argv[3]);
	if (!strcmp(m, "spin") && argc == 5)
		return spin(argv[3], atoi(argv[4]));
	if (!strcmp(m, "opens") && argc == 4)
		return opens(atoi(argv[3]));
	if (!strcmp(m, "munmap") && argc == 4)
		return unmap_after(argv[3]);
	if (!strcmp(m, "uffd") && argc == 4)
		return uffd(argv[3]);
	if (!strcmp(m, "uffdreg"))
		return uffdreg();
	if (!strcmp(m, "writer") && argc == 5)
		return writer(argv[3], atoi(argv[4]));
	if (!strcmp(m, "hoard") && (argc == 5 || argc == 6))
		return hoard(atoi(argv[3]), atoi(argv[4]), argc == 6 ? atoi(argv[5]) : 0);
	if (!strcmp(m, "tryopen")) {
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		printf("%s\n", fd < 0 ? strerrorname_np(errno) : "ok");
		return 0;
	}
	if (!strcmp(m, "hold")) {
		int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("open");
		printf("open\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	fprintf(stderr, "hostile: unknown mode %s\n", m);
	return 2;
}
