package runguard

import "golang.org/x/sys/unix"

// arm64; arm (32-bit) programs are not guarded.
var arches = []arch{
	{audit: unix.AUDIT_ARCH_AARCH64, nrs: [nCalls]uint32{unix.SYS_PERF_EVENT_OPEN, unix.SYS_MOUNT, unix.SYS_FSOPEN, unix.SYS_SENDFILE, unix.SYS_SENDFILE, unix.SYS_SPLICE, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_MMAP}},
}
