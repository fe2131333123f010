// perfwriter N: registers user_events:my_ev (u32 n) and writes n = 0..N-1
// while the event is enabled, then says how many it wrote. TestRunLinuxPerf
// runs it under perf record and perf stat, under uetrace run.
#include <fcntl.h>
#include "user_events_abi.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 5;
	int fd = open("/sys/kernel/tracing/user_events_data", O_RDWR);
	if (fd < 0)
		return perror("user_events_data"), 1;
	static unsigned int enabled;
	struct user_reg reg = {.size = sizeof reg, .enable_bit = 0, .enable_size = 4,
			       .enable_addr = (unsigned long)&enabled, .name_args = (unsigned long)"my_ev u32 n"};
	if (ioctl(fd, DIAG_IOCSREG, &reg) < 0)
		return perror("DIAG_IOCSREG"), 1;
	int wrote = 0;
	for (int i = 0; i < n; i++) {
		if (enabled) {
			struct iovec io[2] = {{&reg.write_index, 4}, {&i, 4}};
			if (writev(fd, io, 2) < 0)
				perror("writev");
			else
				wrote++;
		}
	}
	printf("writer %d wrote %d of %d\n", getpid(), wrote, n);
	return 0;
}
