// The parts of <linux/user_events.h> (Linux 6.4 and later) the test
// programs use, for machines whose kernel headers predate it (Debian 12's).
#ifndef UETRACE_USER_EVENTS_ABI_H
#define UETRACE_USER_EVENTS_ABI_H
#include <linux/types.h>
#include <sys/ioctl.h>

struct user_reg {
	__u32 size;
	__u8 enable_bit;
	__u8 enable_size;
	__u16 flags;
	__u64 enable_addr;
	__u64 name_args;
	__u32 write_index;
} __attribute__((__packed__));

#define DIAG_IOC_MAGIC '*'
#define DIAG_IOCSREG _IOWR(DIAG_IOC_MAGIC, 0, struct user_reg *)
#endif
