/*
 * preloaded: a C producer for TestRunPreload. It registers "run_ip u32 n"
 * through /sys/kernel/tracing, enables it, writes ten records, and prints
 * what the interposer's counts say: "shares S fallbacks F", or "no
 * interposer" when none is loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/ioctl.h>
#include <linux/types.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

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

int main(void)
{
	static uint32_t enabled;
	struct user_reg reg = { .size = sizeof reg, .enable_size = 4, .enable_addr = (uintptr_t)&enabled,
				.name_args = (uintptr_t)"run_ip u32 n" };
	int fd = open("/sys/kernel/tracing/user_events_data", O_RDWR);
	int en;
	if (fd < 0 || ioctl(fd, DIAG_IOCSREG, &reg) < 0) {
		perror("register");
		return 1;
	}
	en = open("/sys/kernel/tracing/events/user_events/run_ip/enable", O_WRONLY);
	if (en < 0 || write(en, "1", 1) != 1) {
		perror("enable");
		return 1;
	}
	for (uint32_t n = 0; n < 10; n++) {
		struct iovec io[2] = { { &reg.write_index, 4 }, { &n, 4 } };
		if (writev(fd, io, 2) != 8) {
			perror("writev");
			return 1;
		}
	}
	void (*stats)(uint64_t *, size_t) = (void (*)(uint64_t *, size_t))dlsym(RTLD_DEFAULT, "uetrace_preload_stats");
	if (!stats) {
		printf("no interposer\n");
		return 0;
	}
	uint64_t st[5] = { 0 };
	stats(st, sizeof st);
	printf("shares %llu fallbacks %llu\n", (unsigned long long)st[0], (unsigned long long)st[3]);
	return 0;
}
