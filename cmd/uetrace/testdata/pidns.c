// pidns: the programs of the pid-namespace tests (run_pidns_test.go).
//
//   pidns victim
//       holds a struct user_reg at VICTIM_ADDR — a registration of
//       victim_secret whose write_index is the sentinel 0xdeadbeef — prints
//       "ready PID", and waits for its stdin to close.
//   pidns attack PID DATA
//       only if its own pid is PID (else exit 3): DIAG_IOCSREG on DATA with
//       VICTIM_ADDR, where it has a zeroed page; prints "ioctl=R errno=E".
//   pidns produce DATA
//       registers pidns_ev through DATA, prints "registered PID" (its pid in
//       its own namespace), waits for a line on stdin, waits for its enable
//       bit, writes one record whose payload is that pid, prints "wrote",
//       and waits for its stdin to close.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define VICTIM_ADDR 0x5a5a00000000UL
#define DIAG_IOCSREG 0xc0082a00UL

struct user_reg {
	uint32_t size;
	uint8_t enable_bit;
	uint8_t enable_size;
	uint16_t flags;
	uint64_t enable_addr;
	uint64_t name_args;
	uint32_t write_index;
} __attribute__((__packed__));

static void wait_eof(void) {
	char buf[64];
	while (read(0, buf, sizeof buf) > 0)
		;
}

static int victim(void) {
	char *p = mmap((void *)VICTIM_ADDR, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED || p != (char *)VICTIM_ADDR) {
		perror("mmap");
		return 1;
	}
	struct user_reg *reg = (struct user_reg *)p;
	reg->size = sizeof *reg;
	reg->enable_bit = 0;
	reg->enable_size = 4;
	reg->enable_addr = VICTIM_ADDR + 64;
	reg->name_args = VICTIM_ADDR + 128;
	reg->write_index = 0xdeadbeef;
	strcpy(p + 128, "victim_secret u32 x");
	printf("ready %d\n", getpid());
	fflush(stdout);
	wait_eof();
	return 0;
}

static int attack(int want, const char *data) {
	if (getpid() != want)
		return 3;
	// FUSE copies the ioctl's 8-byte argument from the caller before the
	// server sees it: the page must be the caller's, zeroed here (size 0,
	// EINVAL from its own memory); the victim's has the registration.
	if (mmap((void *)VICTIM_ADDR, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != (void *)VICTIM_ADDR) {
		perror("mmap");
		return 1;
	}
	int fd = open(data, O_RDWR);
	if (fd < 0) {
		printf("open: %s\n", strerror(errno));
		return 1;
	}
	int r = ioctl(fd, DIAG_IOCSREG, (void *)VICTIM_ADDR);
	printf("ioctl=%d errno=%s\n", r, r < 0 ? strerrorname_np(errno) : "0");
	return 0;
}

static volatile uint32_t enabled;

static int produce(const char *data) {
	int fd = open(data, O_RDWR);
	if (fd < 0) {
		printf("open: %s\n", strerror(errno));
		return 1;
	}
	struct user_reg reg = {0};
	reg.size = sizeof reg;
	reg.enable_bit = 0;
	reg.enable_size = 4;
	reg.enable_addr = (uint64_t)(uintptr_t)&enabled;
	reg.name_args = (uint64_t)(uintptr_t)"pidns_ev u32 pid";
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		printf("register: %s\n", strerrorname_np(errno));
		return 1;
	}
	printf("registered %d\n", getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	// The bit is set from outside once the event is enabled: wait for
	// it, bounded (the test's deadline is longer).
	for (int i = 0; i < 60000 && !(enabled & 1); i++)
		usleep(1000);
	if (!(enabled & 1)) {
		printf("never enabled\n");
		return 1;
	}
	uint32_t pid = getpid();
	struct iovec io[2] = {{&reg.write_index, 4}, {&pid, 4}};
	if (writev(fd, io, 2) < 0) {
		printf("write: %s\n", strerrorname_np(errno));
		return 1;
	}
	printf("wrote\n");
	fflush(stdout);
	wait_eof();
	return 0;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && !strcmp(argv[1], "victim"))
		return victim();
	if (argc == 4 && !strcmp(argv[1], "attack"))
		return attack(atoi(argv[2]), argv[3]);
	if (argc == 3 && !strcmp(argv[1], "produce"))
		return produce(argv[2]);
	fprintf(stderr, "usage: pidns victim | attack PID DATA | produce DATA\n");
	return 2;
}
