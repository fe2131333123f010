package runguard

import "golang.org/x/sys/unix"

// x86-64, with x32 (the same AUDIT_ARCH, numbers with bit 30 set), and
// i386 programs, whose numbers are their own.
var arches = []arch{
	{audit: unix.AUDIT_ARCH_X86_64, mask: 0x40000000, nrs: [nCalls]uint32{unix.SYS_PERF_EVENT_OPEN, unix.SYS_MOUNT, unix.SYS_FSOPEN, unix.SYS_SENDFILE, unix.SYS_SENDFILE, unix.SYS_SPLICE, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_MMAP}},
	// i386's mmap2 (192) has mmap's arguments in registers; its old mmap
	// (90) takes them in memory, which the filter cannot read: such a
	// program's mapping of a perf event's ring is not sized (SIGBUS).
	{audit: unix.AUDIT_ARCH_I386, nrs: [nCalls]uint32{336, 21, 430, 187, 239, 313, 11, 358, 192}},
}
