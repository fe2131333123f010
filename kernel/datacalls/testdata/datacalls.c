/*
 * datacalls: the system calls an unmodified C program makes on
 * user_events_data and on tracefs's user_events files, one output line each:
 *
 *     <label>: <return value> <errno name, or 0> [observed state]
 *
 * plus "<label>: \"text\"" lines for tracefs text (escaped). The output is
 * deterministic: no addresses, pids, timestamps or event IDs. Run it as root
 * with tracefs at /sys/kernel/tracing on a freshly booted kernel (the status
 * and dynamic_events snapshots assume no user event exists at the start).
 *
 * Package kernel/datacalls (datacalls.go) builds it, runs it on the real
 * kernel and keeps its output as the golden (kernel.golden).
 *
 * Build: gcc -static -O2 -Wall datacalls.c -o datacalls
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/types.h>

#if __has_include(<linux/user_events.h>)
#include <linux/user_events.h>
#else
/* From include/uapi/linux/user_events.h (Linux 6.12); this machine's kernel
 * headers do not have it. */
#define USER_EVENTS_SYSTEM "user_events"
#define USER_EVENTS_MULTI_SYSTEM "user_events_multi"
#define USER_EVENTS_PREFIX "u:"
#define DYN_LOC(offset, size) ((size) << 16 | (offset))

enum user_reg_flag {
	USER_EVENT_REG_PERSIST = 1U << 0,
	USER_EVENT_REG_MULTI_FORMAT = 1U << 1,
	USER_EVENT_REG_MAX = 1U << 2,
};

struct user_reg {
	__u32 size;
	__u8 enable_bit;
	__u8 enable_size;
	__u16 flags;
	__u64 enable_addr;
	__u64 name_args;
	__u32 write_index;
} __attribute__((__packed__));

struct user_unreg {
	__u32 size;
	__u8 disable_bit;
	__u8 __reserved;
	__u16 __reserved2;
	__u64 disable_addr;
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)
#define DIAG_IOCSDEL _IOW(DIAG_IOC_MAGIC, 1, char *)
#define DIAG_IOCSUNREG _IOW(DIAG_IOC_MAGIC, 2, struct user_unreg *)
#endif

#define T "/sys/kernel/tracing/"
#define DATA T "user_events_data"
#define PAGE 4096

/* How long a child waits for a condition the kernel brings about
 * asynchronously (a forked child's enable bit, a deferred delete). Only
 * whether it settled is printed, never how long it took. */
#define SETTLE_MS 20000

static const struct {
	int e;
	const char *name;
} errnames[] = {
	{EPERM, "EPERM"},	{ENOENT, "ENOENT"},	{ESRCH, "ESRCH"},
	{EINTR, "EINTR"},	{EIO, "EIO"},		{E2BIG, "E2BIG"},
	{EBADF, "EBADF"},	{EAGAIN, "EAGAIN"},	{ENOMEM, "ENOMEM"},
	{EACCES, "EACCES"},	{EFAULT, "EFAULT"},	{EBUSY, "EBUSY"},
	{EEXIST, "EEXIST"},	{ENODEV, "ENODEV"},	{ENOTDIR, "ENOTDIR"},
	{EISDIR, "EISDIR"},	{EINVAL, "EINVAL"},	{EMFILE, "EMFILE"},
	{ENOTTY, "ENOTTY"},	{ENOSPC, "ENOSPC"},	{ESPIPE, "ESPIPE"},
	{EROFS, "EROFS"},	{ERANGE, "ERANGE"},	{ENAMETOOLONG, "ENAMETOOLONG"},
	{ENOSYS, "ENOSYS"},	{EOPNOTSUPP, "EOPNOTSUPP"}, {EADDRINUSE, "EADDRINUSE"},
	{ENOTCONN, "ENOTCONN"}, {ETIMEDOUT, "ETIMEDOUT"}, {ENXIO, "ENXIO"},
};

static const char *ename(int e)
{
	static char buf[32];
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].e == e)
			return errnames[i].name;
	snprintf(buf, sizeof(buf), "E%d", e);
	return buf;
}

/* row prints "<label>: <ret> <errno name or 0>[ <state>]". */
static void row(const char *label, long ret, int err, const char *fmt, ...)
{
	printf("%s: %ld %s", label, ret, ret < 0 ? ename(err) : "0");
	if (fmt && *fmt) {
		va_list ap;
		va_start(ap, fmt);
		putchar(' ');
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
}

/* textrow prints "<label>: \"<line>\"" with tabs, quotes, backslashes and
 * other unprintable bytes escaped. */
static void textrow(const char *label, const char *s, size_t n)
{
	printf("%s: \"", label);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (c == '\t')
			fputs("\\t", stdout);
		else if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
	fputs("\"\n", stdout);
}

/* ---- memory ---- */

static uint64_t *pool; /* enable words, one page, faulted in */
static int pooln;
static char *edge;     /* end of a mapped page followed by an unmapped one */
static char *ro;       /* a read-only page */

/* All pages come from one arena mapped at the start, so that no later mmap
 * can land in the unmapped page after edge. */
#define ARENA_PAGES 64
static char *arena;
static int arenan;

static uint64_t *word(void)
{
	uint64_t *w = &pool[pooln++];
	*w = 0;
	return w;
}

static void *mapping(int prot)
{
	if (arenan == ARENA_PAGES) {
		fprintf(stderr, "arena exhausted\n");
		exit(2);
	}
	char *p = arena + (size_t)PAGE * arenan++;
	memset(p, 0, PAGE);
	if (prot != (PROT_READ | PROT_WRITE) && mprotect(p, PAGE, prot) != 0) {
		perror("mprotect");
		exit(2);
	}
	return p;
}

static void setup_memory(void)
{
	arena = mmap(NULL, (size_t)PAGE * (ARENA_PAGES + 2), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	/* arena's first two pages: a mapped one, then a hole */
	memset(arena, 0, PAGE);
	if (munmap(arena + PAGE, PAGE) != 0) {
		perror("munmap");
		exit(2);
	}
	edge = arena + PAGE;
	arena += 2 * PAGE;
	pool = mapping(PROT_READ | PROT_WRITE);
	ro = mapping(PROT_READ);
}

/* ---- calls ---- */

static int xopen(const char *path, int flags)
{
	int fd = open(path, flags);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		exit(2);
	}
	return fd;
}

/* regx registers with every field of struct user_reg given. */
static long regx(int fd, uint32_t size, void *addr, int esize, int bit, int flags, const char *name, uint32_t *idx, int *err)
{
	struct user_reg r;
	memset(&r, 0, sizeof(r));
	r.size = size;
	r.enable_bit = bit;
	r.enable_size = esize;
	r.flags = flags;
	r.enable_addr = (uintptr_t)addr;
	r.name_args = (uintptr_t)name;
	r.write_index = 0xffffffff;
	errno = 0;
	long ret = ioctl(fd, DIAG_IOCSREG, &r);
	*err = errno;
	if (idx)
		*idx = r.write_index;
	return ret;
}

/* reg registers on an 8-byte enable word and prints the row. */
static long reg(const char *label, int fd, void *addr, int esize, int bit, int flags, const char *name, uint32_t *idxp)
{
	uint32_t idx;
	int err;
	long ret = regx(fd, sizeof(struct user_reg), addr, esize, bit, flags, name, &idx, &err);
	if (ret == 0)
		row(label, ret, err, "write_index=%u", idx);
	else
		row(label, ret, err, NULL);
	if (idxp)
		*idxp = idx;
	return ret;
}

static long unregx(int fd, uint32_t size, void *addr, int bit, int res1, int res2, int *err)
{
	struct user_unreg u;
	memset(&u, 0, sizeof(u));
	u.size = size;
	u.disable_bit = bit;
	u.__reserved = res1;
	u.__reserved2 = res2;
	u.disable_addr = (uintptr_t)addr;
	errno = 0;
	long ret = ioctl(fd, DIAG_IOCSUNREG, &u);
	*err = errno;
	return ret;
}

static long unreg(const char *label, int fd, void *addr, int bit)
{
	int err;
	long ret = unregx(fd, sizeof(struct user_unreg), addr, bit, 0, 0, &err);
	if (label)
		row(label, ret, err, NULL);
	return ret;
}

static long del(const char *label, int fd, const char *name)
{
	errno = 0;
	long ret = ioctl(fd, DIAG_IOCSDEL, name);
	if (label)
		row(label, ret, errno, NULL);
	return ret;
}

/* enable writes "1" or "0" to events/user_events/<name>/enable. */
static long enable(const char *label, const char *sys, const char *name, int on)
{
	char path[512];
	snprintf(path, sizeof(path), T "events/%s/%s/enable", sys, name);
	int fd = open(path, O_WRONLY);
	long ret;
	int err;
	if (fd < 0) {
		ret = -1;
		err = errno;
	} else {
		errno = 0;
		ret = write(fd, on ? "1" : "0", 1);
		err = errno;
		close(fd);
	}
	if (label)
		row(label, ret, err, NULL);
	return ret;
}

static void msleep1(void)
{
	struct timespec ts = {0, 1000000};
	nanosleep(&ts, NULL);
}

/* settle waits up to SETTLE_MS for (*w & mask) == want. */
static int settle(volatile uint64_t *w, uint64_t mask, uint64_t want)
{
	for (int i = 0; i < SETTLE_MS; i++) {
		if ((__atomic_load_n(w, __ATOMIC_SEQ_CST) & mask) == want)
			return 1;
		msleep1();
	}
	return (*w & mask) == want;
}

static int exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* gone waits up to SETTLE_MS for path to disappear. */
static int gone(const char *path)
{
	for (int i = 0; i < SETTLE_MS; i++) {
		if (!exists(path))
			return 1;
		msleep1();
	}
	return !exists(path);
}

/* deleted calls DIAG_IOCSDEL until it answers something other than EBUSY
 * (the kernel drops an unregistered enabler's reference after an RCU grace
 * period), up to SETTLE_MS; it prints the last answer. */
static void deleted(const char *label, int fd, const char *name)
{
	long ret = 0;
	int err = 0;
	for (int i = 0; i < SETTLE_MS; i++) {
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSDEL, name);
		err = errno;
		if (!(ret < 0 && err == EBUSY))
			break;
		msleep1();
	}
	row(label, ret, err, NULL);
}

/* dump prints the lines of a tracefs file as text rows <label>.<n>. */
static void dump(const char *label, const char *path, int maxlines)
{
	static char buf[65536];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		row(label, -1, errno, NULL);
		return;
	}
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += r;
	close(fd);
	buf[n] = 0;
	char *p = buf, lab[128];
	for (int i = 0; *p && i < maxlines; i++) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		snprintf(lab, sizeof(lab), "%s.%d", label, i);
		if (strncmp(p, "ID: ", 4) == 0)
			textrow(lab, "ID: (masked)", 12);
		else
			textrow(lab, p, len);
		p += len + (nl != NULL);
	}
}

/* ---- sections ---- */

static int fd; /* the main O_RDWR user_events_data fd, open all along */

/* text: tracefs's text files after a few registrations on a fresh kernel. */
static void sec_text(void)
{
	uint32_t idx;
	reg("text.reg.dc_s1", fd, word(), 8, 0, 0, "dc_s1 u32 a", &idx);
	reg("text.reg.dc_s2", fd, word(), 8, 0, 0, "dc_s2 char[8] m;__rel_loc char[] r; struct st x 3", &idx);
	reg("text.reg.dc_s3", fd, word(), 8, 0, 0, "dc_s3", &idx);
	reg("text.reg.dc_sm", fd, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_sm u64 x", &idx);
	enable("text.enable.dc_s1", "user_events", "dc_s1", 1);
	dump("text.status", T "user_events_status", 20);
	dump("text.dynamic_events", T "dynamic_events", 20);
	dump("text.format.dc_s2", T "events/user_events/dc_s2/format", 20);
	dump("text.format.dc_s3", T "events/user_events/dc_s3/format", 20);
	dump("text.format.dc_sm", T "events/user_events_multi/dc_sm.0/format", 20);
	dump("text.enable_file.dc_s1", T "events/user_events/dc_s1/enable", 2);
	enable("text.disable.dc_s1", "user_events", "dc_s1", 0);
	dump("text.status_after_disable", T "user_events_status", 20);
}

static char longname[600];

/* reg: DIAG_IOCSREG's checks in order. */
static void sec_reg(void)
{
	uint32_t idx;
	int err;
	long ret;
	uint64_t *w;

	/* the struct itself */
	errno = 0;
	ret = ioctl(fd, DIAG_IOCSREG, edge);
	row("reg.struct_unmapped", ret, errno, NULL);
	{
		struct user_reg *r = (struct user_reg *)(edge - 20); /* size readable, rest not */
		r->size = 28;
		ret = ioctl(fd, DIAG_IOCSREG, r);
		row("reg.struct_spans_unmapped", ret, errno, NULL);
	}
	{
		char *page = mapping(PROT_READ | PROT_WRITE);
		struct user_reg *r = (struct user_reg *)page;
		w = word();
		r->size = sizeof(*r);
		r->enable_size = 8;
		r->enable_addr = (uintptr_t)w;
		r->name_args = (uintptr_t) "dc_rostruct u32 a";
		r->write_index = 0xdeadbeef;
		mprotect(page, PAGE, PROT_READ);
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSREG, r);
		row("reg.struct_readonly", ret, errno, "write_index=0x%x", r->write_index);
		/* the enabler exists although write_index could not be stored */
		ret = enable(NULL, "user_events", "dc_rostruct", 1);
		row("reg.struct_readonly.enabled", ret, errno, "enable_word=0x%llx", (unsigned long long)*w);
		enable(NULL, "user_events", "dc_rostruct", 0);
		unreg("reg.struct_readonly.unreg", fd, w, 0);
	}

	/* size */
	static const struct {
		const char *label;
		uint32_t size;
	} sizes[] = {
		{"reg.size_0", 0}, {"reg.size_27", 27}, {"reg.size_28", 28}, {"reg.size_29", 29},
		{"reg.size_4096", 4096}, {"reg.size_4097", 4097}, {"reg.size_max", 0xffffffff},
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *page = mapping(PROT_READ | PROT_WRITE); /* zero past 28 */
		struct user_reg *r = (struct user_reg *)page;
		w = word();
		r->size = sizes[i].size;
		r->enable_size = 8;
		r->enable_addr = (uintptr_t)w;
		r->name_args = (uintptr_t) "dc_size u32 a";
		r->write_index = 0xffffffff;
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSREG, r);
		row(sizes[i].label, ret, errno, ret == 0 ? "write_index=%u" : NULL, r->write_index);
	}
	{
		char *page = mapping(PROT_READ | PROT_WRITE);
		struct user_reg *r = (struct user_reg *)page;
		w = word();
		r->size = 32;
		r->enable_size = 8;
		r->enable_addr = (uintptr_t)w;
		r->name_args = (uintptr_t) "dc_size u32 a";
		page[31] = 1; /* a byte past the 28 the kernel knows */
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSREG, r);
		row("reg.size_32_tail_nonzero", ret, errno, NULL);
	}
	{
		/* size 64 but the struct ends 8 bytes past 28, at the unmapped page */
		struct user_reg *r = (struct user_reg *)(edge - 36);
		memset(r, 0, 36);
		w = word();
		r->size = 64;
		r->enable_size = 8;
		r->enable_addr = (uintptr_t)w;
		r->name_args = (uintptr_t) "dc_size u32 a";
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSREG, r);
		row("reg.size_64_tail_unmapped", ret, errno, NULL);
	}

	/* flags */
	ret = regx(fd, 28, word(), 8, 0, USER_EVENT_REG_MAX, "dc_flags u32 a", &idx, &err);
	row("reg.flags_4", ret, err, NULL);
	ret = regx(fd, 28, word(), 8, 0, 0x8000, "dc_flags u32 a", &idx, &err);
	row("reg.flags_0x8000", ret, err, NULL);

	/* enable_size */
	static const int esizes[] = {0, 1, 2, 3, 5, 16};
	for (size_t i = 0; i < sizeof(esizes) / sizeof(esizes[0]); i++) {
		char label[64];
		snprintf(label, sizeof(label), "reg.enable_size_%d", esizes[i]);
		ret = regx(fd, 28, word(), esizes[i], 0, 0, "dc_esize u32 a", &idx, &err);
		row(label, ret, err, NULL);
	}
	reg("reg.enable_size_4", fd, word(), 4, 0, 0, "dc_esize u32 a", NULL);
	reg("reg.enable_size_8", fd, word(), 8, 0, 0, "dc_esize u32 a", NULL);

	/* alignment and bits */
	w = word();
	ret = regx(fd, 28, (char *)w + 1, 4, 0, 0, "dc_align u32 a", &idx, &err);
	row("reg.misaligned_4_by_1", ret, err, NULL);
	ret = regx(fd, 28, (char *)w + 2, 4, 0, 0, "dc_align u32 a", &idx, &err);
	row("reg.misaligned_4_by_2", ret, err, NULL);
	ret = regx(fd, 28, (char *)w + 4, 8, 0, 0, "dc_align u32 a", &idx, &err);
	row("reg.misaligned_8_by_4", ret, err, NULL);
	reg("reg.aligned_4_at_4", fd, (char *)w + 4, 4, 3, 0, "dc_align u32 a", NULL);
	reg("reg.bit_31_size_4", fd, word(), 4, 31, 0, "dc_align u32 a", NULL);
	ret = regx(fd, 28, word(), 4, 32, 0, "dc_align u32 a", &idx, &err);
	row("reg.bit_32_size_4", ret, err, NULL);
	reg("reg.bit_63_size_8", fd, word(), 8, 63, 0, "dc_align u32 a", NULL);
	ret = regx(fd, 28, word(), 8, 64, 0, "dc_align u32 a", &idx, &err);
	row("reg.bit_64_size_8", ret, err, NULL);
	ret = regx(fd, 28, word(), 8, 255, 0, "dc_align u32 a", &idx, &err);
	row("reg.bit_255_size_8", ret, err, NULL);
	{
		/* the 4-byte word at +4 is written as bit+32 of the 8-byte word */
		w = word();
		reg("reg.flip.size4_at_4", fd, (char *)w + 4, 4, 1, 0, "dc_flip u32 a", NULL);
		uint64_t *w8 = word();
		reg("reg.flip.size8_bit40", fd, w8, 8, 40, 0, "dc_flip u32 a", NULL);
		uint64_t *w4 = word();
		reg("reg.flip.size4_bit5", fd, w4, 4, 5, 0, "dc_flip u32 a", NULL);
		enable("reg.flip.enable", "user_events", "dc_flip", 1);
		row("reg.flip.enabled_words", 0, 0, "size4_at_4=0x%016llx size8_bit40=0x%016llx size4_bit5=0x%016llx",
		    (unsigned long long)*w, (unsigned long long)*w8, (unsigned long long)*w4);
		uint64_t *late = word();
		reg("reg.flip.register_while_enabled", fd, late, 8, 7, 0, "dc_flip u32 a", NULL);
		row("reg.flip.register_while_enabled.word", 0, 0, "enable_word=0x%llx", (unsigned long long)*late);
		enable("reg.flip.disable", "user_events", "dc_flip", 0);
		row("reg.flip.disabled_words", 0, 0, "size4_at_4=0x%016llx size8_bit40=0x%016llx size4_bit5=0x%016llx late=0x%llx",
		    (unsigned long long)*w, (unsigned long long)*w8, (unsigned long long)*w4, (unsigned long long)*late);
		/* other bits of the word survive the kernel's writes */
		*w8 |= 0x5;
		enable(NULL, "user_events", "dc_flip", 1);
		row("reg.flip.neighbour_bits_kept", 0, 0, "enable_word=0x%016llx", (unsigned long long)*w8);
		enable(NULL, "user_events", "dc_flip", 0);
		row("reg.flip.neighbour_bits_kept_off", 0, 0, "enable_word=0x%016llx", (unsigned long long)*w8);
	}

	/* enable_addr */
	ret = regx(fd, 28, edge, 8, 0, 0, "dc_addr_unmapped u32 a", &idx, &err);
	row("reg.enable_addr_unmapped", ret, err, "write_index=0x%x", idx);
	ret = regx(fd, 28, ro, 8, 0, 0, "dc_addr_ro u32 a", &idx, &err);
	row("reg.enable_addr_readonly", ret, err, "write_index=0x%x", idx);
	ret = regx(fd, 28, (void *)0, 8, 0, 0, "dc_addr_null u32 a", &idx, &err);
	row("reg.enable_addr_null", ret, err, NULL);
	ret = regx(fd, 28, (void *)0xffff880000000000ull, 8, 0, 0, "dc_addr_kernel u32 a", &idx, &err);
	row("reg.enable_addr_kernel", ret, err, NULL);
	/* the ENOMEM registrations still created their events, held by this fd */
	row("reg.enable_addr_unmapped.event_exists", 0, 0, "exists=%d", exists(T "events/user_events/dc_addr_unmapped"));

	/* name */
	ret = regx(fd, 28, word(), 8, 0, 0, edge, &idx, &err);
	row("reg.name_unmapped", ret, err, NULL);
	{
		char *s = edge - 8;
		memcpy(s, "dc_edgen", 8); /* no NUL before the unmapped page */
		ret = regx(fd, 28, word(), 8, 0, 0, s, &idx, &err);
		row("reg.name_spans_unmapped", ret, err, NULL);
		memcpy(s, "dc_edge", 8); /* NUL in the last byte of the page */
		reg("reg.name_ends_at_page_end", fd, word(), 8, 0, 0, s, NULL);
	}
	{
		/* "dc_long u32 f000; u32 f001; ..." of exactly 511 and 512 bytes */
		char *p = longname;
		p += sprintf(p, "dc_long");
		for (int i = 0; p - longname < 490; i++)
			p += sprintf(p, " u32 f%03d;", i);
		p += sprintf(p, " u32 ");
		while (p - longname < 511)
			*p++ = 'z';
		*p = 0;
		reg("reg.name_511", fd, word(), 8, 0, 0, longname, NULL);
		longname[511] = 'z';
		longname[512] = 0;
		ret = regx(fd, 28, word(), 8, 0, 0, longname, &idx, &err);
		row("reg.name_512", ret, err, NULL);
		memset(longname, 'y', 599);
		longname[599] = 0;
		ret = regx(fd, 28, word(), 8, 0, 0, longname, &idx, &err);
		row("reg.name_599", ret, err, NULL);
	}
	ret = regx(fd, 28, word(), 8, 0, 0, "dc_colon:x u32 a", &idx, &err);
	row("reg.name_colon", ret, err, NULL);
	ret = regx(fd, 28, word(), 8, 0, 0, "dc_badtype long a", &idx, &err);
	row("reg.bad_field_type", ret, err, NULL);

	/* (addr, bit) in use */
	w = word();
	reg("reg.dup.first", fd, w, 8, 2, 0, "dc_dup u32 a", NULL);
	ret = regx(fd, 28, w, 8, 2, 0, "dc_dup u32 a", &idx, &err);
	row("reg.dup.same", ret, err, NULL);
	ret = regx(fd, 28, w, 8, 2, 0, "dc_dup_other u64 b", &idx, &err);
	row("reg.dup.other_event", ret, err, NULL);
	ret = regx(fd, 28, w, 8, 2, 0, edge, &idx, &err);
	row("reg.dup.name_unmapped", ret, err, NULL); /* checked before the name is read */
	ret = regx(fd, 28, w, 4, 2, 0, "dc_dup u32 a", &idx, &err);
	row("reg.dup.other_size", ret, err, NULL);
	reg("reg.dup.other_bit", fd, w, 8, 3, 0, "dc_dup u32 a", NULL);
	{
		int fd2 = xopen(DATA, O_RDWR);
		ret = regx(fd2, 28, w, 8, 2, 0, "dc_dup u32 a", &idx, &err);
		row("reg.dup.other_fd", ret, err, NULL);
		reg("reg.dup.other_fd_other_bit", fd2, w, 8, 4, 0, "dc_dup u32 a", NULL);
		close(fd2);
	}
	ret = regx(fd, 28, word(), 8, 0, 0, "dc_dup u64 a", &idx, &err);
	row("reg.same_name_other_fields", ret, err, NULL);
	reg("reg.same_name_fields_respaced", fd, word(), 8, 0, 0, "dc_dup   u32 a;", NULL);

	/* MULTI_FORMAT: its own system, a new tracepoint per format */
	reg("reg.multi.first", fd, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_dup u64 a", NULL);
	reg("reg.multi.second_format", fd, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_dup u32 b", NULL);
	reg("reg.multi.first_again", fd, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_dup u64 a", NULL);
	row("reg.multi.dirs", 0, 0, "dc_dup.1=%d dc_dup.2=%d dc_dup.3=%d",
	    exists(T "events/user_events_multi/dc_dup.1"), exists(T "events/user_events_multi/dc_dup.2"),
	    exists(T "events/user_events_multi/dc_dup.3"));
	ret = regx(fd, 28, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_multibad u32", &idx, &err);
	row("reg.multi.bad_field", ret, err, NULL); /* uses up an id */
	reg("reg.multi.after_bad", fd, word(), 8, 0, USER_EVENT_REG_MULTI_FORMAT, "dc_multibad u32 a", NULL);
	row("reg.multi.after_bad.dir", 0, 0, "dc_multibad.4=%d dc_multibad.3=%d",
	    exists(T "events/user_events_multi/dc_multibad.4"), exists(T "events/user_events_multi/dc_multibad.3"));
}

/* unreg: DIAG_IOCSUNREG. */
static void sec_unreg(void)
{
	int err;
	long ret;
	uint64_t *w = word();
	reg("unreg.setup", fd, w, 8, 6, 0, "dc_unreg u32 a", NULL);
	ret = unregx(fd, 0, w, 6, 0, 0, &err);
	row("unreg.size_0", ret, err, NULL);
	ret = unregx(fd, 15, w, 6, 0, 0, &err);
	row("unreg.size_15", ret, err, NULL);
	ret = unregx(fd, 4097, w, 6, 0, 0, &err);
	row("unreg.size_4097", ret, err, NULL);
	ret = unregx(fd, 16, w, 6, 1, 0, &err);
	row("unreg.reserved_nonzero", ret, err, NULL);
	ret = unregx(fd, 16, w, 6, 0, 1, &err);
	row("unreg.reserved2_nonzero", ret, err, NULL);
	{
		char *page = mapping(PROT_READ | PROT_WRITE);
		struct user_unreg *u = (struct user_unreg *)page;
		u->size = 24;
		u->disable_bit = 6;
		u->disable_addr = (uintptr_t)w;
		page[20] = 1;
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSUNREG, u);
		row("unreg.size_24_tail_nonzero", ret, errno, NULL);
		page[20] = 0;
		u->__reserved = 1;
		page[20] = 1;
		errno = 0;
		ret = ioctl(fd, DIAG_IOCSUNREG, u);
		row("unreg.reserved_and_tail_nonzero", ret, errno, NULL);
	}
	errno = 0;
	ret = ioctl(fd, DIAG_IOCSUNREG, edge);
	row("unreg.struct_unmapped", ret, errno, NULL);
	ret = unregx(fd, 16, w, 7, 0, 0, &err);
	row("unreg.wrong_bit", ret, err, NULL);
	ret = unregx(fd, 16, word(), 6, 0, 0, &err);
	row("unreg.unknown_addr", ret, err, NULL);
	ret = unregx(fd, 16, w, 200, 0, 0, &err);
	row("unreg.bit_200", ret, err, NULL);
	enable("unreg.enable", "user_events", "dc_unreg", 1);
	row("unreg.enabled_word", 0, 0, "enable_word=0x%llx", (unsigned long long)*w);
	unreg("unreg.ok_while_enabled", fd, w, 6);
	row("unreg.word_cleared", 0, 0, "enable_word=0x%llx", (unsigned long long)*w);
	unreg("unreg.again", fd, w, 6);
	enable("unreg.disable", "user_events", "dc_unreg", 0);
	{
		int fd2 = xopen(DATA, O_RDONLY);
		uint64_t *w2 = word();
		reg("unreg.other_fd.setup", fd, w2, 8, 0, 0, "dc_unreg u32 a", NULL);
		unreg("unreg.other_fd", fd2, w2, 0); /* enablers are per process, not per fd */
		close(fd2);
	}
	{
		/* the word's page goes away: the enabler is removed, the clear fails */
		uint64_t *gw = mapping(PROT_READ | PROT_WRITE);
		reg("unreg.addr_unmapped.setup", fd, gw, 8, 0, 0, "dc_unreg u32 a", NULL);
		munmap(gw, PAGE);
		unreg("unreg.addr_unmapped", fd, gw, 0);
		unreg("unreg.addr_unmapped.again", fd, gw, 0);
	}
	{
		uint64_t *rw = mapping(PROT_READ | PROT_WRITE);
		reg("unreg.addr_readonly.setup", fd, rw, 8, 0, 0, "dc_unreg u32 a", NULL);
		mprotect(rw, PAGE, PROT_READ);
		unreg("unreg.addr_readonly", fd, rw, 0);
		unreg("unreg.addr_readonly.again", fd, rw, 0);
	}
}

/* del: DIAG_IOCSDEL. */
static void sec_del(void)
{
	long ret;
	reg("del.setup", fd, word(), 8, 0, 0, "dc_del u32 a", NULL);
	del("del.busy", fd, "dc_del");
	del("del.unknown", fd, "dc_nosuch");
	del("del.with_fields", fd, "dc_del u32 a");
	del("del.name_unmapped", fd, edge);
	{
		char *s = edge - 6;
		memcpy(s, "dc_del", 6);
		del("del.name_spans_unmapped", fd, s);
	}
	memset(longname, 'x', 599);
	longname[599] = 0;
	del("del.name_599", fd, longname);
	longname[511] = 0;
	del("del.name_511_unknown", fd, longname);
	del("del.multi_busy", fd, "dc_dup"); /* single- and multi-format alike */
	errno = 0;
	ret = ioctl(fd, DIAG_IOCSDEL, NULL);
	row("del.name_null", ret, errno, NULL);
	/* a persistent event, once nothing holds it, goes */
	{
		int fd2 = xopen(DATA, O_RDWR);
		uint64_t *w = word();
		reg("del.persist.reg", fd2, w, 8, 0, USER_EVENT_REG_PERSIST, "dc_persist u32 a", NULL);
		del("del.persist.busy", fd, "dc_persist");
		unreg("del.persist.unreg", fd2, w, 0);
		close(fd2);
		row("del.persist.outlives_fd", 0, 0, "exists=%d", exists(T "events/user_events/dc_persist"));
		deleted("del.persist.deleted", fd, "dc_persist");
		row("del.persist.gone", 0, 0, "exists=%d", exists(T "events/user_events/dc_persist"));
		del("del.persist.again", fd, "dc_persist");
	}
	/* a non-persistent one goes by itself once its last reference does */
	{
		int fd2 = xopen(DATA, O_RDWR);
		uint64_t *w = word();
		reg("del.auto.reg", fd2, w, 8, 0, 0, "dc_auto u32 a", NULL);
		unreg("del.auto.unreg", fd2, w, 0);
		row("del.auto.held_by_fd", 0, 0, "exists=%d", exists(T "events/user_events/dc_auto"));
		close(fd2);
		row("del.auto.gone_after_close", 0, 0, "settled=%d", gone(T "events/user_events/dc_auto"));
	}
}

/* write: write(2), pwrite(2), writev(2) on user_events_data. */
static void sec_write(void)
{
	uint32_t idx, eidx;
	long ret;
	char buf[64];
	int fdn = xopen(DATA, O_RDWR);
	errno = 0;
	ret = write(fdn, "\0\0\0\0\1\0\0\0", 8);
	row("write.no_registrations", ret, errno, NULL);
	close(fdn);

	reg("write.reg", fd, word(), 8, 0, 0, "dc_w u32 a", &idx);
	reg("write.reg_empty", fd, word(), 8, 0, 0, "dc_wempty", &eidx);
	uint32_t rec[2] = {idx, 7};

	errno = 0;
	ret = write(fd, rec, 0);
	row("write.len_0", ret, errno, NULL);
	errno = 0;
	ret = write(fd, rec, 3);
	row("write.len_3", ret, errno, NULL);
	errno = 0;
	ret = write(fd, rec, 4);
	row("write.len_4_below_min_size", ret, errno, NULL);
	{
		uint32_t bad[2] = {9999, 7};
		errno = 0;
		ret = write(fd, bad, 8);
		row("write.index_unknown", ret, errno, NULL);
		bad[0] = 0xffffffff;
		errno = 0;
		ret = write(fd, bad, 8);
		row("write.index_negative", ret, errno, NULL);
		bad[0] = 0x80000000;
		errno = 0;
		ret = write(fd, bad, 8);
		row("write.index_0x80000000", ret, errno, NULL);
	}
	errno = 0;
	ret = write(fd, rec, 8);
	row("write.disabled", ret, errno, NULL);
	errno = 0;
	ret = write(fd, &eidx, 4);
	row("write.empty_event_disabled", ret, errno, NULL);

	enable("write.enable", "user_events", "dc_w", 1);
	enable("write.enable_empty", "user_events", "dc_wempty", 1);
	errno = 0;
	ret = write(fd, rec, 8);
	row("write.enabled", ret, errno, NULL);
	errno = 0;
	ret = write(fd, &eidx, 4);
	row("write.empty_event_enabled", ret, errno, NULL);
	errno = 0;
	ret = write(fd, rec, 4);
	row("write.enabled_len_4_below_min_size", ret, errno, NULL);
	memcpy(buf, rec, 8);
	memset(buf + 8, 0xee, 40);
	errno = 0;
	ret = write(fd, buf, 48);
	row("write.enabled_longer_than_fields", ret, errno, NULL);
	{
		/* Larger than a FUSE mount's max_write (1 MiB), which splits it:
		 * the kernel takes it in one piece (and drops the record, larger
		 * than any trace buffer page). */
		size_t big = 2u << 20;
		char *bb = calloc(1, big);
		memcpy(bb, rec, 8);
		errno = 0;
		ret = write(fd, bb, big);
		row("write.enabled_2MiB", ret, errno, NULL);
		free(bb);
	}
	errno = 0;
	ret = pwrite(fd, rec, 8, 0);
	row("write.pwrite_offset_0", ret, errno, NULL);
	errno = 0;
	ret = pwrite(fd, rec, 8, 8);
	row("write.pwrite_offset_8", ret, errno, NULL);
	{
		char *ib = (char *)&idx;
		uint32_t a = 9;
		struct iovec iov[4] = {{ib, 2}, {ib + 2, 2}, {NULL, 0}, {&a, 4}};
		errno = 0;
		ret = writev(fd, iov, 4);
		row("write.writev_index_split", ret, errno, NULL);
		struct iovec z[2] = {{buf, 0}, {NULL, 0}};
		errno = 0;
		ret = writev(fd, z, 2);
		row("write.writev_zero_total", ret, errno, NULL);
		errno = 0;
		ret = writev(fd, z, 0);
		row("write.writev_no_iovecs", ret, errno, NULL);
		struct iovec e[1] = {{edge, 8}};
		errno = 0;
		ret = writev(fd, e, 1);
		row("write.writev_iov_unmapped", ret, errno, NULL);
		struct iovec mixed[3] = {{&idx, 4}, {edge - 2, 2}, {edge, 2}};
		errno = 0;
		ret = writev(fd, mixed, 3);
		row("write.writev_second_payload_iov_unmapped", ret, errno, NULL);
		struct iovec split[2] = {{(char *)&idx, 2}, {edge, 6}};
		errno = 0;
		ret = writev(fd, split, 2);
		row("write.writev_index_half_unmapped", ret, errno, NULL);
		errno = 0;
		ret = writev(fd, (struct iovec *)edge, 1);
		row("write.writev_iov_array_unmapped", ret, errno, NULL);
		static struct iovec many[1025];
		many[0].iov_base = &idx;
		many[0].iov_len = 4;
		many[1].iov_base = &a;
		many[1].iov_len = 4;
		errno = 0;
		ret = writev(fd, many, 1024);
		row("write.writev_1024_iovecs", ret, errno, NULL);
		errno = 0;
		ret = writev(fd, many, 1025);
		row("write.writev_1025_iovecs", ret, errno, NULL);
		/* 1024 iovecs of a byte: more than a FUSE request carries pages
		 * (256, one at least for each iovec), which FUSE sends in pieces */
		static char spread[1024];
		for (int i = 1; i < 1024; i++) {
			many[i].iov_base = &spread[i];
			many[i].iov_len = 1;
		}
		errno = 0;
		ret = writev(fd, many, 1024);
		row("write.writev_1024_iovecs_of_a_byte", ret, errno, NULL);
		errno = 0;
		ret = pwritev(fd, iov, 4, 8);
		row("write.pwritev_offset_8", ret, errno, NULL);
	}
	/* faults: the buffer runs into the unmapped page */
	{
		char *p = edge - 2; /* half of the index is readable */
		memcpy(p, &idx, 2);
		errno = 0;
		ret = write(fd, p, 8);
		row("write.fault_in_index.enabled", ret, errno, NULL);
		char *q = edge - 6; /* index and 2 bytes of payload readable */
		memset(edge - 16, 0, 16);
		memcpy(q, &idx, 4);
		errno = 0;
		ret = write(fd, q, 8);
		row("write.fault_in_payload.enabled", ret, errno, NULL);
		char *r = edge - 4; /* index readable, payload not */
		memcpy(r, &idx, 4);
		errno = 0;
		ret = write(fd, r, 8);
		row("write.fault_whole_payload.enabled", ret, errno, NULL);
		enable("write.disable", "user_events", "dc_w", 0);
		memcpy(p, &idx, 2);
		errno = 0;
		ret = write(fd, p, 8);
		row("write.fault_in_index.disabled", ret, errno, NULL);
		memcpy(q, &idx, 4);
		errno = 0;
		ret = write(fd, q, 8);
		row("write.fault_in_payload.disabled", ret, errno, NULL);
		/* an index that faults cannot say which event: unknown index, fault */
		uint32_t bad = 9999;
		memcpy(r, &bad, 4);
		errno = 0;
		ret = write(fd, r, 8);
		row("write.fault_payload.index_unknown", ret, errno, NULL);
		errno = 0;
		ret = write(fd, r, 4);
		row("write.index_at_page_end.index_unknown", ret, errno, NULL);
		memcpy(r, &eidx, 4);
		errno = 0;
		ret = write(fd, r, 4);
		row("write.index_at_page_end.empty_enabled", ret, errno, NULL);
		errno = 0;
		ret = write(fd, r, 5);
		row("write.empty_enabled_one_byte_unmapped", ret, errno, NULL);
	}
	enable("write.disable_empty", "user_events", "dc_wempty", 0);

	/* other calls on the file */
	errno = 0;
	ret = read(fd, buf, sizeof(buf));
	row("file.read", ret, errno, NULL);
	errno = 0;
	ret = read(fd, buf, 0);
	row("file.read_0", ret, errno, NULL);
	errno = 0;
	ret = lseek(fd, 0, SEEK_SET);
	row("file.lseek_0_set", ret, errno, NULL);
	errno = 0;
	ret = lseek(fd, 8, SEEK_CUR);
	row("file.lseek_8_cur", ret, errno, NULL);
	errno = 0;
	ret = ioctl(fd, _IO('*', 3), 0);
	row("file.ioctl_unknown", ret, errno, NULL);
	errno = 0;
	ret = ioctl(fd, _IOWR('*', 0, struct user_reg), 0);
	row("file.ioctl_reg_struct_size", ret, errno, NULL);
	errno = 0;
	ret = ioctl(fd, FIONREAD, buf);
	row("file.ioctl_fionread", ret, errno, NULL);
	{
		int rfd = open(DATA, O_RDONLY);
		row("file.open_rdonly", rfd < 0 ? -1 : 0, errno, NULL);
		uint32_t ridx;
		reg("file.rdonly.reg", rfd, word(), 8, 0, 0, "dc_w u32 a", &ridx);
		uint32_t r2[2] = {ridx, 1};
		enable(NULL, "user_events", "dc_w", 1);
		errno = 0;
		ret = write(rfd, r2, 8);
		row("file.rdonly.write", ret, errno, NULL);
		struct iovec iov[1] = {{r2, 8}};
		errno = 0;
		ret = writev(rfd, iov, 1);
		row("file.rdonly.writev", ret, errno, NULL);
		enable(NULL, "user_events", "dc_w", 0);
		del("file.rdonly.del", rfd, "dc_nosuch");
		close(rfd);
		int wfd = open(DATA, O_WRONLY);
		row("file.open_wronly", wfd < 0 ? -1 : 0, errno, NULL);
		uint32_t widx;
		reg("file.wronly.reg", wfd, word(), 8, 0, 0, "dc_w u32 a", &widx);
		enable(NULL, "user_events", "dc_w", 1);
		uint32_t w2[2] = {widx, 1};
		errno = 0;
		ret = write(wfd, w2, 8);
		row("file.wronly.write", ret, errno, NULL);
		enable(NULL, "user_events", "dc_w", 0);
		errno = 0;
		ret = write(wfd, w2, 8);
		row("file.wronly.write_disabled", ret, errno, NULL);
		close(wfd);
		errno = 0;
		ret = write(wfd, w2, 8);
		row("file.closed.write", ret, errno, NULL);
	}
	{
		/* close does not drop enablers: they belong to the process */
		int cfd = xopen(DATA, O_RDWR);
		uint64_t *w = word();
		reg("close.reg", cfd, w, 8, 0, 0, "dc_close u32 a", NULL);
		close(cfd);
		enable("close.enable_after_close", "user_events", "dc_close", 1);
		row("close.enabler_survives", 0, 0, "enable_word=0x%llx", (unsigned long long)*w);
		enable("close.disable", "user_events", "dc_close", 0);
		row("close.enabler_survives_off", 0, 0, "enable_word=0x%llx", (unsigned long long)*w);
		del("close.del_busy", fd, "dc_close");
		unreg("close.unreg", fd, w, 0);
		row("close.event_gone_after_unreg", 0, 0, "settled=%d", gone(T "events/user_events/dc_close"));
	}
}

/* trace: records reaching the trace file, without the task/cpu/time columns. */
static void sec_trace(void)
{
	uint32_t idx;
	long ret;
	reg("trace.reg", fd, word(), 8, 0, 0, "dc_rec u32 n; char[4] s; s16 v; __rel_loc char[] r", &idx);
	int tfd = open(T "trace", O_WRONLY | O_TRUNC);
	row("trace.clear", tfd < 0 ? -1 : 0, errno, NULL);
	close(tfd);
	struct {
		uint32_t idx, n;
		char s[4];
		int16_t v;
		uint32_t loc;
		char r[8];
	} __attribute__((packed)) rec;
	rec.idx = idx;
	rec.n = 0;
	memcpy(rec.s, "off", 4);
	rec.v = -1;
	rec.loc = DYN_LOC(0, 3);
	memcpy(rec.r, "zz\0", 3);
	errno = 0;
	ret = write(fd, &rec, 4 + 14 + 3);
	row("trace.write_disabled", ret, errno, NULL);
	enable("trace.enable", "user_events", "dc_rec", 1);
	static const char *words[] = {"ab", "cde", "fghi"};
	for (int i = 0; i < 3; i++) {
		char label[64];
		rec.n = i + 1;
		memset(rec.s, 0, 4);
		memcpy(rec.s, words[i], strlen(words[i]));
		rec.v = -100 * (i + 1);
		rec.loc = DYN_LOC(0, i + 2);
		memset(rec.r, 0, 8);
		memset(rec.r, 'r', i + 1);
		snprintf(label, sizeof(label), "trace.write.%d", i);
		errno = 0;
		ret = write(fd, &rec, 4 + 14 + i + 2);
		row(label, ret, errno, NULL);
	}
	/* refused by the validator: no NUL at the end of the __rel_loc string */
	rec.loc = DYN_LOC(0, 2);
	memcpy(rec.r, "no", 2);
	errno = 0;
	ret = write(fd, &rec, 4 + 14 + 2);
	row("trace.write_not_nul_terminated", ret, errno, NULL);
	rec.loc = DYN_LOC(4, 2);
	errno = 0;
	ret = write(fd, &rec, 4 + 14 + 2);
	row("trace.write_loc_out_of_record", ret, errno, NULL);
	{
		/* the payload's last bytes unmapped: refused before a record is made */
		char *q = edge - 18;
		rec.loc = DYN_LOC(0, 3);
		memcpy(rec.r, "ok", 3);
		memcpy(q, &rec, 18);
		errno = 0;
		ret = write(fd, q, 4 + 14 + 3);
		row("trace.write_payload_fault", ret, errno, NULL);
		struct iovec iov[3] = {{&rec, 4}, {(char *)&rec + 4, 14}, {rec.r, 3}};
		errno = 0;
		ret = writev(fd, iov, 3);
		row("trace.writev", ret, errno, NULL);
	}
	{
		/*
		 * Records the trace buffer's page cannot hold (over 4072 bytes
		 * with the 8-byte header: a string over 4050 bytes here) are
		 * not reserved, so user_event_ftrace never validates them: the
		 * write succeeds without a NUL and nothing reaches the trace.
		 * One byte less is reserved, validated, and EFAULT.
		 */
		static char big[4 + 14 + 60000];
		static const uint32_t sizes[] = {4050, 4051, 4100, 5000, 60000};
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			char label[64];
			rec.loc = DYN_LOC(0, sizes[k]);
			memcpy(big, &rec, 18);
			memset(big + 18, 'L', sizes[k]);
			snprintf(label, sizeof(label), "trace.write_large_no_nul.%u", sizes[k]);
			errno = 0;
			ret = write(fd, big, 18 + sizes[k]);
			row(label, ret, errno, NULL);
		}
		big[18 + 4051 - 1] = 0;
		rec.loc = DYN_LOC(0, 4051u);
		memcpy(big, &rec, 18);
		errno = 0;
		ret = write(fd, big, 18 + 4051);
		row("trace.write_large_valid.4051", ret, errno, NULL);
	}
	enable("trace.disable", "user_events", "dc_rec", 0);

	static char buf[65536];
	int fdt = open(T "trace", O_RDONLY);
	size_t n = 0;
	ssize_t r;
	while (fdt >= 0 && n < sizeof(buf) - 1 && (r = read(fdt, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += r;
	if (fdt >= 0)
		close(fdt);
	buf[n] = 0;
	int i = 0;
	for (char *p = buf; *p;) {
		char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		if (len > 0 && p[0] != '#') {
			/* "   comm-pid   [cpu] flags   secs.usecs: event: fields" */
			char *rb = memchr(p, ']', len);
			char *c = rb ? strstr(rb, ": ") : NULL;
			char label[64];
			snprintf(label, sizeof(label), "trace.line.%d", i++);
			if (c && c < p + len)
				textrow(label, c + 2, len - (c + 2 - p));
			else
				textrow(label, p, len);
		}
		p += len + (nl != NULL);
	}
	row("trace.lines", i, 0, NULL);
}

/* wtext writes s to path opened with flags and prints the row. */
static void wtext(const char *label, const char *path, int flags, const char *s, size_t n)
{
	int f = open(path, flags);
	if (f < 0) {
		row(label, -1, errno, "(open)");
		return;
	}
	errno = 0;
	long ret = write(f, s, n);
	row(label, ret, errno, NULL);
	close(f);
}

/* dyn: creating and deleting through dynamic_events. */
static void sec_dyn(void)
{
	const int app = O_WRONLY | O_APPEND;
	const char *dyn = T "dynamic_events";
	wtext("dyn.create", dyn, app, "u:dc_dyn u32 a; char[4] b", 25);
	wtext("dyn.create_newline", dyn, app, "u:dc_dyn2 u64 x\n", 16);
	wtext("dyn.create_two_lines", dyn, app, "u:dc_dyn3 u8 a\nu:dc_dyn4 u8 a\n", 30);
	wtext("dyn.create_trailing_space", dyn, app, "u:dc_dynbad u32 a ", 18);
	wtext("dyn.create_colon", dyn, app, "u:dc_dyn:x u32 a", 16);
	wtext("dyn.create_leading_space", dyn, app, " u:dc_dynsp u32 a", 17);
	wtext("dyn.create_same", dyn, app, "u:dc_dyn u32 a;char[4] b", 24);
	wtext("dyn.create_other_fields", dyn, app, "u:dc_dyn u64 a", 14);
	wtext("dyn.comment_only", dyn, app, "# nothing\n", 10);
	wtext("dyn.empty_write", dyn, app, "", 0);
	wtext("dyn.truncate_busy", dyn, O_WRONLY | O_TRUNC, "", 0);
	row("dyn.created_dir", 0, 0, "dc_dyn=%d dc_dyn4=%d", exists(T "events/user_events/dc_dyn"),
	    exists(T "events/user_events/dc_dyn4"));
	/* the dynamic events are persistent: a registration uses them, and the bit follows */
	uint64_t *w = word();
	uint32_t idx;
	reg("dyn.reg_existing", fd, w, 8, 0, 0, "dc_dyn u32 a; char[4] b", &idx);
	del("dyn.del_busy", fd, "dc_dyn");
	unreg(NULL, fd, w, 0);
	wtext("dyn.delete_no_fields", dyn, app, "!u:dc_dyn", 9);
	wtext("dyn.delete_unspaced", dyn, app, "!u:dc_dyn u32 a;char[4] b", 25);
	wtext("dyn.delete_held_by_fd", dyn, app, "!u:dc_dyn u32 a; char[4] b", 26);
	wtext("dyn.delete_minus", dyn, app, "-:dc_dyn2 u64 x", 15);
	wtext("dyn.delete_system", dyn, app, "!u:user_events/dc_dyn3 u8 a", 27);
	wtext("dyn.delete_unknown", dyn, app, "!u:dc_nosuch", 12);
	wtext("dyn.delete_no_name", dyn, app, "!u:", 3);
	deleted("dyn.ioctl_delete", fd, "dc_dyn4");
	row("dyn.deleted_dirs", 0, 0, "dc_dyn2=%d dc_dyn3=%d dc_dyn4=%d", exists(T "events/user_events/dc_dyn2"),
	    exists(T "events/user_events/dc_dyn3"), exists(T "events/user_events/dc_dyn4"));
}

/* files: the other calls on tracefs's user_events files. */
static void sec_files(void)
{
	const char *en = T "events/user_events/dc_s1/enable";
	wtext("files.enable_newline", en, O_WRONLY, "1\n", 2);
	dump("files.enable_read", en, 2);
	wtext("files.enable_nul", en, O_WRONLY, "0\0", 2);
	wtext("files.enable_2", en, O_WRONLY, "2", 1);
	wtext("files.enable_empty", en, O_WRONLY, "", 0);
	wtext("files.enable_word", en, O_WRONLY, "on", 2);
	dump("files.enable_read_after", en, 2);
	wtext("files.status_write", T "user_events_status", O_WRONLY, "x", 1);
	int f = open(T "user_events_status", O_RDONLY);
	char b[8];
	errno = 0;
	long ret = pread(f, b, 5, 2);
	row("files.status_pread_2", ret, errno, NULL);
	if (ret > 0)
		textrow("files.status_pread_2.text", b, ret);
	errno = 0;
	ret = lseek(f, 0, SEEK_END);
	row("files.status_lseek_end", ret, errno, NULL);
	close(f);
	errno = 0;
	ret = open(T "user_events_data", O_RDWR | O_CREAT | O_EXCL, 0600);
	row("files.data_open_excl", ret < 0 ? -1 : 0, errno, NULL);
	errno = 0;
	ret = open(T "user_events_data", O_RDWR | O_TRUNC);
	row("files.data_open_trunc", ret < 0 ? -1 : 0, errno, NULL);
	if (ret >= 0)
		close(ret);
	errno = 0;
	ret = open(T "user_events_data", O_RDONLY | O_DIRECTORY);
	row("files.data_open_directory", ret < 0 ? -1 : 0, errno, NULL);
	errno = 0;
	ret = open(T "events/user_events/dc_nosuch/enable", O_WRONLY);
	row("files.enable_of_unknown_event", ret < 0 ? -1 : 0, errno, NULL);
}

/* priv: what a process without CAP_PERFMON/CAP_SYS_ADMIN may do. */
static void sec_priv(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		int err;
		long ret;
		if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) {
			perror("setresuid");
			_exit(2);
		}
		ret = open(DATA, O_RDWR);
		row("priv.open", ret < 0 ? -1 : 0, errno, NULL);
		ret = regx(fd, 28, word(), 8, 0, USER_EVENT_REG_PERSIST, "dc_privp u32 a", NULL, &err);
		row("priv.reg_persist", ret, err, NULL);
		ret = regx(fd, 28, word(), 8, 0, USER_EVENT_REG_PERSIST, "dc_w u32 a", NULL, &err);
		row("priv.reg_persist_existing", ret, err, NULL);
		reg("priv.reg", fd, word(), 8, 0, 0, "dc_privnp u32 a", NULL);
		del("priv.del_busy", fd, "dc_privnp");
		del("priv.del_unknown", fd, "dc_nosuch");
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	row("priv.child", 0, 0, "exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* fork: a child inherits the enablers; the kernel updates its copy later. */
static void sec_fork(void)
{
	uint64_t *w = mapping(PROT_READ | PROT_WRITE);
	reg("fork.reg", fd, w, 8, 0, 0, "dc_fork u32 a", NULL);
	fflush(stdout);
	int go[2];
	if (pipe(go) != 0)
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		int err;
		long ret;
		char c;
		close(go[1]);
		ret = regx(fd, 28, w, 8, 0, 0, "dc_fork u32 a", NULL, &err);
		row("fork.child.reg_same_addr", ret, err, NULL);
		if (read(go[0], &c, 1) != 1) /* the parent has enabled the event */
			_exit(2);
		row("fork.child.bit_set", 0, 0, "settled=%d", settle(w, 1, 1));
		unreg("fork.child.unreg", fd, w, 0);
		row("fork.child.word_after_unreg", 0, 0, "enable_word=0x%llx", (unsigned long long)*w);
		unreg("fork.child.unreg_again", fd, w, 0);
		fflush(stdout);
		_exit(0);
	}
	close(go[0]);
	long ret = enable(NULL, "user_events", "dc_fork", 1);
	int err = errno;
	if (write(go[1], "g", 1) != 1)
		exit(2);
	close(go[1]);
	int st;
	waitpid(pid, &st, 0);
	row("fork.enable", ret, err, NULL);
	row("fork.child", 0, 0, "exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	/* after fork the parent's page is copy-on-write too: its update may be deferred as well */
	row("fork.parent.bit_set", 0, 0, "settled=%d", settle(w, 1, 1));
	enable("fork.disable", "user_events", "dc_fork", 0);
	row("fork.parent.bit_clear", 0, 0, "settled=%d", settle(w, 1, 0));
	unreg("fork.parent.unreg", fd, w, 0);
}

/* exec: an exec'd process has no enablers, but keeps its fds' events. */
static void sec_exec(const char *self)
{
	uint32_t idx;
	uint64_t *w = mapping(PROT_READ | PROT_WRITE);
	reg("exec.reg", fd, w, 8, 0, 0, "dc_exec u32 a", &idx);
	/* held only by the child's copy of this enabler once the parent lets go */
	int cfd = xopen(DATA, O_RDWR | O_CLOEXEC);
	uint64_t *w2 = mapping(PROT_READ | PROT_WRITE);
	reg("exec.reg_held_by_child", cfd, w2, 8, 0, 0, "dc_execheld u32 a", NULL);
	fflush(stdout);
	int go[2];
	if (pipe(go) != 0)
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		char c, fds[16], idxs[16];
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(2);
		snprintf(fds, sizeof(fds), "%d", fd);
		snprintf(idxs, sizeof(idxs), "%u", idx);
		execl(self, self, "after-exec", fds, idxs, (char *)NULL);
		_exit(3);
	}
	close(go[0]);
	unreg("exec.parent_unreg_held", fd, w2, 0);
	close(cfd);
	row("exec.held_by_child_before_exec", 0, 0, "exists=%d", exists(T "events/user_events/dc_execheld"));
	fflush(stdout);
	if (write(go[1], "g", 1) != 1)
		exit(2);
	close(go[1]);
	int st;
	waitpid(pid, &st, 0);
	row("exec.child", 0, 0, "exit=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	unreg("exec.parent_unreg", fd, w, 0);
}

static int after_exec(int dfd, uint32_t idx)
{
	row("exec.after.held_event_gone", 0, 0, "settled=%d", gone(T "events/user_events/dc_execheld"));
	unreg("exec.after.unreg_inherited_addr", dfd, word(), 0);
	uint32_t rec[2] = {idx, 5};
	errno = 0;
	long ret = write(dfd, rec, 8);
	row("exec.after.write_disabled", ret, errno, NULL);
	enable("exec.after.enable", "user_events", "dc_exec", 1);
	errno = 0;
	ret = write(dfd, rec, 8);
	row("exec.after.write_enabled", ret, errno, NULL);
	enable("exec.after.disable", "user_events", "dc_exec", 0);
	uint64_t *w = word();
	reg("exec.after.reg_again", dfd, w, 8, 0, 0, "dc_exec u32 a", NULL);
	unreg("exec.after.unreg", dfd, w, 0);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_memory();
	if (argc == 4 && strcmp(argv[1], "after-exec") == 0)
		return after_exec(atoi(argv[2]), (uint32_t)strtoul(argv[3], NULL, 10));

	fd = open(DATA, O_RDWR);
	row("open.data_rdwr", fd < 0 ? -1 : 0, errno, NULL);
	if (fd < 0)
		return 1;
	sec_text();
	sec_reg();
	sec_unreg();
	sec_del();
	sec_write();
	sec_trace();
	sec_dyn();
	sec_files();
	/* forks last: after a fork the parent's pages are copy-on-write and the
	 * kernel's updates of its enable words become asynchronous */
	sec_priv();
	sec_fork();
	sec_exec(argv[0][0] == '/' ? argv[0] : "/proc/self/exe");
	/* nothing is waiting for a deferred delete now: every event left is
	 * held by fd or by an enabler of this process */
	dump("final.status", T "user_events_status", 100);
	dump("final.dynamic_events", T "dynamic_events", 100);
	printf("# end\n");
	return 0;
}
