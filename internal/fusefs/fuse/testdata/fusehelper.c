// fusehelper: what the fuse tests do to a mount that cat and sh cannot.
// It runs in a child process, never in the server's.
//
//   fusehelper ioctl PATH   _IOWR('*', 0, uint64_t) with a pointer to a value
//   fusehelper poll PATH    poll(2) for POLLIN, then read
//   fusehelper mmap PATH    mmap(2) two pages shared, print the first
//                           page's first word, write "child" at the second
//                           page's start, then read(2) the file
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: fusehelper ioctl|poll PATH\n");
		return 2;
	}
	int fd = open(argv[2], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	if (strcmp(argv[1], "ioctl") == 0) {
		uint64_t v = 0x1122334455667788ULL;
		int r = ioctl(fd, _IOWR('*', 0, uint64_t), &v);
		int e = errno;
		printf("arg=%" PRIu64 " tid=%ld ret=%d errno=%d v=%" PRIx64 "\n",
		       (uint64_t)(uintptr_t)&v, (long)syscall(SYS_gettid), r, r < 0 ? e : 0, v);
		return r < 0;
	}
	if (strcmp(argv[1], "poll") == 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, 30000);
		if (r <= 0) {
			printf("poll=%d errno=%d\n", r, errno);
			return 1;
		}
		char buf[64];
		ssize_t n = read(fd, buf, sizeof buf);
		printf("revents=%#x read=%.*s\n", p.revents, n > 0 ? (int)n : 0, buf);
		return 0;
	}
	if (strcmp(argv[1], "mmap") == 0) {
		long pg = sysconf(_SC_PAGESIZE);
		char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED) {
			printf("mmap errno=%d\n", errno);
			return 1;
		}
		uint64_t first;
		memcpy(&first, m, sizeof first);
		memcpy(m + pg, "child", 5);
		char buf[64];
		ssize_t n = read(fd, buf, sizeof buf);
		printf("first=%" PRIx64 " read=%.*s\n", first, n > 0 ? (int)n : 0, buf);
		return 0;
	}
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
