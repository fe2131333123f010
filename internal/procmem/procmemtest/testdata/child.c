// The child process of procmem's and callers' tests: it maps a read-write
// page, a read-only page and a hole, prints their addresses, and then does
// what its standard input tells it, one command a line, answering each with
// one line.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char *self;

static void *idle(void *arg) {
	(void)arg;
	printf("tid %ld\n", (long)syscall(SYS_gettid));
	fflush(stdout);
	for (;;)
		pause();
	return NULL;
}

static int vmchild(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static void ready(void) {
	long pg = sysconf(_SC_PAGESIZE);
	// rw, hole, rw2: three pages whose middle one is unmapped, so a read
	// that starts in rw runs into the hole.
	char *area = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *ro = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED || ro == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	munmap(area + pg, pg);
	for (int i = 0; i < pg; i++)
		area[i] = (char)i;
	strcpy(area + 64, "hello, world");
	// A string that ends exactly at the hole: no NUL before it.
	memset(area + pg - 16, 'x', 16);
	memset(ro, 0x5a, pg);
	mprotect(ro, pg, PROT_READ);
	printf("pid=%d rw=%lx hole=%lx rw2=%lx ro=%lx\n", getpid(), (unsigned long)area,
	       (unsigned long)(area + pg), (unsigned long)(area + 2 * pg), (unsigned long)ro);
	fflush(stdout);
}

static void *commands(void *arg);

int main(int argc, char **argv) {
	(void)argc;
	self = argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGCHLD, SIG_IGN); // forked children are reaped by the kernel
	ready();
	commands(NULL);
	return 0;
}

static void *commands(void *arg) {
	(void)arg;
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		unsigned long addr, n;
		if (sscanf(line, "word %lx", &addr) == 1) {
			printf("%016lx\n", (unsigned long)*(volatile uint64_t *)addr);
		} else if (sscanf(line, "poke %lx %lx", &addr, &n) == 2) {
			*(volatile uint64_t *)addr = n;
			printf("ok\n");
		} else if (sscanf(line, "protect %lx", &addr) == 1) {
			// Make the page at addr read-only.
			printf("%s\n", mprotect((void *)addr, sysconf(_SC_PAGESIZE), PROT_READ) ? strerror(errno) : "ok");
		} else if (sscanf(line, "spin %lx %lu", &addr, &n) == 2) {
			// Toggle bit 7 of the byte at addr n times with atomic
			// read-modify-writes, as a process sharing an enable byte
			// with the kernel may.
			for (unsigned long i = 0; i < n; i++)
				__atomic_fetch_xor((volatile uint8_t *)addr, 0x80, __ATOMIC_SEQ_CST);
			printf("%02x\n", *(volatile uint8_t *)addr);
		} else if (strcmp(line, "fork\n") == 0) {
			pid_t p = fork();
			if (p == 0) {
				for (;;)
					pause();
			}
			printf("%d\n", p);
		} else if (strcmp(line, "clonevm\n") == 0) {
			size_t sz = 64 * 1024;
			char *stack = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			int p = clone(vmchild, stack + sz, CLONE_VM | SIGCHLD, NULL);
			printf("%d\n", p);
		} else if (strcmp(line, "thread\n") == 0) {
			pthread_t t;
			pthread_create(&t, NULL, idle, NULL);
		} else if (strcmp(line, "exec\n") == 0) {
			fflush(stdout);
			execl("/proc/self/exe", self, (char *)NULL);
			printf("exec: %s\n", strerror(errno));
		} else if (strcmp(line, "leaderexit\n") == 0) {
			// Go on reading commands in another thread; the main
			// thread exits, leaving the thread group leader a zombie.
			pthread_t t;
			pthread_create(&t, NULL, commands, NULL);
			printf("ok\n");
			pthread_exit(NULL);
		} else if (strcmp(line, "exit\n") == 0) {
			exit(0);
		} else {
			printf("unknown command\n");
		}
	}
	exit(0);
}
