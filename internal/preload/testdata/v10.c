// v10: a program of the first user_events ABI (the v10 series of January
// 2022, which no Linux release enabled), as that series' patch 1/12 tells
// a process to use it: map user_events_status, register with a 24-byte
// struct user_reg, and write when the event's byte of the page says
// something is attached. The calls are those of the series' "typical
// usage" example, in its order and with its arguments (paths relative to
// the tracefs directory, the event "test" with no fields), with checks and
// lines on stdout added for the test (tree_test.go):
//
//   status_index N write_index M   after registering, its byte 0
//   wrote                          once the byte said enabled (within 10 s)
//   disabled                       once it said disabled again (10 s)
//
// Usage: v10 DIR
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

// The v10 ABI: struct user_reg, not packed (24 bytes: 4 of padding after
// size), and the status bits of an event's byte.
struct user_reg {
	__u32 size;
	__u64 name_args;
	__u32 status_index;
	__u32 write_index;
};
_Static_assert(sizeof(struct user_reg) == 24, "the v10 struct user_reg is 24 bytes");
#define DIAG_IOCSREG _IOWR('*', 0, struct user_reg *)
#define EVENT_STATUS_FTRACE (1 << 0)

#define PAGE_SIZE 4096

static int wait_byte(volatile char *b, int want)
{
	for (int i = 0; i < 10000; i++) {
		if (*b == want)
			return 0;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2 || chdir(argv[1]) != 0) {
		fprintf(stderr, "usage: v10 DIR\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct user_reg reg;
	char payload[8] = "v10";

	int page_fd = open("user_events_status", O_RDWR);
	char *page_data = mmap(NULL, PAGE_SIZE, PROT_READ, MAP_SHARED, page_fd, 0);
	close(page_fd);
	if (page_data == MAP_FAILED) {
		printf("mmap of user_events_status: %s\n", strerrorname_np(errno));
		return 1;
	}

	int data_fd = open("user_events_data", O_RDWR);
	reg.size = sizeof(reg);
	reg.name_args = (__u64)"test";
	if (ioctl(data_fd, DIAG_IOCSREG, &reg) != 0) {
		printf("DIAG_IOCSREG: %s\n", strerrorname_np(errno));
		return 1;
	}
	int status_id = reg.status_index;
	int write_id = reg.write_index;
	// Nothing is attached until this line is read.
	if (page_data[status_id]) {
		printf("enabled before anything attached\n");
		return 1;
	}
	printf("status_index %d write_index %d\n", status_id, write_id);

	struct iovec io[2];
	io[0].iov_base = &write_id;
	io[0].iov_len = sizeof(write_id);
	io[1].iov_base = payload;
	io[1].iov_len = sizeof(payload);

	if (wait_byte(&page_data[status_id], EVENT_STATUS_FTRACE) != 0) {
		printf("the status byte did not say enabled\n");
		return 1;
	}
	if (page_data[status_id] && writev(data_fd, io, 2) != 4 + (ssize_t)sizeof(payload)) {
		printf("writev: %s\n", strerrorname_np(errno));
		return 1;
	}
	printf("wrote\n");
	if (wait_byte(&page_data[status_id], 0) != 0) {
		printf("the status byte did not say disabled\n");
		return 1;
	}
	printf("disabled\n");
	return 0;
}
