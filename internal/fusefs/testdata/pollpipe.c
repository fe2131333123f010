// pollpipe: poll(2)s trace_pipe for POLLIN, as select-based tools do, then
// reads what made it ready. Usage: pollpipe PATH. Prints "revents=0x..."
// and the line read.
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, 0);
	printf("empty: %d revents=0x%x\n", n, p.revents);
	fflush(stdout);
	n = poll(&p, 1, -1);
	printf("poll: %d revents=0x%x\n", n, p.revents);
	char buf[4096];
	ssize_t got = read(fd, buf, sizeof buf - 1);
	if (got < 0) {
		perror("read");
		return 1;
	}
	buf[got] = 0;
	printf("%s", buf);
	return 0;
}
