/*
 * nullfuse is the cheapest FUSE write round trip there is: a FUSE server of
 * one regular file, /data, opened with FOPEN_DIRECT_IO (as uetrace's tree
 * opens user_events_data), whose WRITE answers that every byte was written
 * and does nothing else. It is what uetrace's FUSE write path is measured
 * against (BENCHMARKS.md, "FUSE write path").
 *
 * It speaks /dev/fuse itself, without libfuse, so that it builds static
 * with nothing but a C library, as the benchmark's other C does. Its loop
 * is libfuse's single-threaded fuse_session_loop: one thread, a blocking
 * read(2) of the next request, one write(2) of the answer. (A libfuse 3.14
 * low-level server of the same file, in its single-threaded loop, measured
 * within 1% of it on the machine BENCHMARKS.md was measured on: medians of
 * 5 rounds of 20 000 writes, on one CPU and unpinned.)
 *
 * It mounts itself (mount(2): it needs root or CAP_SYS_ADMIN), prints
 * "ready" once mounted, and serves until the mount is unmounted (the read
 * fails with ENODEV) or it is killed.
 *
 * Usage: nullfuse MOUNTPOINT
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* From include/uapi/linux/fuse.h. */
enum {
	FUSE_LOOKUP = 1,
	FUSE_FORGET = 2,
	FUSE_GETATTR = 3,
	FUSE_OPEN = 14,
	FUSE_WRITE = 16,
	FUSE_RELEASE = 18,
	FUSE_FLUSH = 25,
	FUSE_INIT = 26,
	FUSE_INTERRUPT = 36,
	FUSE_DESTROY = 38,
	FUSE_BATCH_FORGET = 42,
};

#define FUSE_ASYNC_READ (1u << 0)
#define FUSE_BIG_WRITES (1u << 5)
#define FUSE_MAX_PAGES (1u << 22)
#define FOPEN_DIRECT_IO (1u << 0)
#define ROOT_ID 1
#define DATA_ID 2
#define MAX_WRITE (1u << 20)

struct in_header {
	uint32_t len, opcode;
	uint64_t unique, nodeid;
	uint32_t uid, gid, pid;
	uint16_t total_extlen, padding;
};

struct out_header {
	uint32_t len;
	int32_t error;
	uint64_t unique;
};

struct init_in {
	uint32_t major, minor, max_readahead, flags;
};

struct init_out {
	uint32_t major, minor, max_readahead, flags;
	uint16_t max_background, congestion_threshold;
	uint32_t max_write, time_gran;
	uint16_t max_pages, map_alignment;
	uint32_t flags2, max_stack_depth;
	uint32_t unused[6];
};

struct attr {
	uint64_t ino, size, blocks, atime, mtime, ctime;
	uint32_t atimensec, mtimensec, ctimensec, mode, nlink, uid, gid, rdev, blksize, flags;
};

struct entry_out {
	uint64_t nodeid, generation, entry_valid, attr_valid;
	uint32_t entry_valid_nsec, attr_valid_nsec;
	struct attr attr;
};

struct attr_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec, dummy;
	struct attr attr;
};

struct open_out {
	uint64_t fh;
	uint32_t open_flags;
	int32_t backing_id;
};

struct write_out {
	uint32_t size, padding;
};

/* The request being answered, and the answer. */
static unsigned char req[MAX_WRITE + 4096];
static unsigned char rep[4096];
static int dev;

/* reply answers request h with errno err (0: success) and n bytes of body
 * already placed after the header in rep. A request whose caller is gone
 * fails with ENOENT, which is no error. */
static void reply(const struct in_header *h, int err, size_t n)
{
	struct out_header *o = (struct out_header *)rep;

	o->len = sizeof(*o) + n;
	o->error = -err;
	o->unique = h->unique;
	if (write(dev, rep, o->len) < 0 && errno != ENOENT) {
		perror("nullfuse: write /dev/fuse");
		exit(1);
	}
}

static void fill_attr(struct attr *a, uint64_t id)
{
	memset(a, 0, sizeof(*a));
	a->ino = id;
	a->mode = id == ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0666;
	a->nlink = id == ROOT_ID ? 2 : 1;
	a->blksize = 4096;
}

static void *body(void) { return rep + sizeof(struct out_header); }

int main(int argc, char **argv)
{
	char opts[128];

	if (argc != 2) {
		fprintf(stderr, "usage: nullfuse MOUNTPOINT\n");
		return 2;
	}
	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		perror("nullfuse: open /dev/fuse");
		return 1;
	}
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other", dev);
	if (mount("nullfuse", argv[1], "fuse.nullfuse", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("nullfuse: mount");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = read(dev, req, sizeof(req));
		struct in_header *h = (struct in_header *)req;
		void *in = req + sizeof(*h);

		if (n < 0) {
			if (errno == ENOENT || errno == EINTR || errno == EAGAIN)
				continue; /* interrupted before it was read */
			if (errno == ENODEV)
				return 0; /* unmounted */
			perror("nullfuse: read /dev/fuse");
			return 1;
		}
		if ((size_t)n < sizeof(*h))
			continue;
		switch (h->opcode) {
		case FUSE_INIT: {
			const struct init_in *i = in;
			struct init_out *o = body();

			memset(o, 0, sizeof(*o));
			o->major = 7;
			o->minor = i->minor < 31 ? i->minor : 31;
			o->max_readahead = i->max_readahead;
			o->flags = i->flags & (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES);
			o->max_write = MAX_WRITE;
			o->time_gran = 1;
			o->max_pages = MAX_WRITE / 4096;
			reply(h, 0, sizeof(*o));
			break;
		}
		case FUSE_LOOKUP: {
			struct entry_out *o = body();

			if (h->nodeid != ROOT_ID || strcmp(in, "data") != 0) {
				reply(h, ENOENT, 0);
				break;
			}
			memset(o, 0, sizeof(*o));
			o->nodeid = DATA_ID;
			o->entry_valid = o->attr_valid = 3600;
			fill_attr(&o->attr, DATA_ID);
			reply(h, 0, sizeof(*o));
			break;
		}
		case FUSE_GETATTR: {
			struct attr_out *o = body();

			memset(o, 0, sizeof(*o));
			o->attr_valid = 3600;
			fill_attr(&o->attr, h->nodeid);
			reply(h, 0, sizeof(*o));
			break;
		}
		case FUSE_OPEN: {
			struct open_out *o = body();

			if (h->nodeid != DATA_ID) {
				reply(h, EISDIR, 0);
				break;
			}
			memset(o, 0, sizeof(*o));
			o->fh = 1;
			o->open_flags = FOPEN_DIRECT_IO;
			reply(h, 0, sizeof(*o));
			break;
		}
		case FUSE_WRITE: {
			/* fuse_write_in: fh, offset, size, write_flags, lock_owner, flags, padding */
			struct write_out *o = body();

			o->size = *(const uint32_t *)((const unsigned char *)in + 16);
			o->padding = 0;
			reply(h, 0, sizeof(*o));
			break;
		}
		case FUSE_FLUSH:
		case FUSE_RELEASE:
		case FUSE_DESTROY:
			reply(h, 0, 0);
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:
			break; /* no answer: the writes it could interrupt are answered at once */
		default:
			reply(h, ENOSYS, 0);
		}
	}
}
