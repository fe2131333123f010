package runguard

import "golang.org/x/sys/unix"

// x86-64, with x32 (the same AUDIT_ARCH, numbers with bit 30 set), and
// i386 programs, whose numbers are their own.
var arches = []arch{
	{audit: unix.AUDIT_ARCH_X86_64, mask: 0x40000000, nrs: [nCalls]uint32{unix.SYS_PERF_EVENT_OPEN, unix.SYS_MOUNT, unix.SYS_FSOPEN, unix.SYS_SENDFILE, unix.SYS_SENDFILE, unix.SYS_SPLICE}},
	{audit: unix.AUDIT_ARCH_I386, nrs: [nCalls]uint32{336, 21, 430, 187, 239, 313}},
}
