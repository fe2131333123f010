package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// ftraceEnabled is the sysctl trace-cmd record writes "1" to before it
// records, and back at the end (set_ftrace_proc), and without which it
// dies ("Can't enable ftrace"): the kernel's function tracer switch.
const ftraceEnabled = "/proc/sys/kernel/ftrace_enabled"

// privateFtraceEnabled puts a file of the command's own over
// /proc/sys/kernel/ftrace_enabled in its mount namespace, holding what the
// kernel's says: the tree has no function tracer, so what a program writes
// there concerns nothing, and must neither fail (a user namespace may not
// write sysctls: trace-cmd record dies) nor reach the host kernel (as root
// it would switch the machine's function tracing). The file is a tmpfs
// mounted nowhere else (fsopen, fsmount, open_tree; Linux 5.2). A kernel
// without the sysctl (no function tracer) needs nothing.
func privateFtraceEnabled() error {
	value, err := os.ReadFile(ftraceEnabled)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", ftraceEnabled, err)
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("a tmpfs for %s: %w", ftraceEnabled, err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("a tmpfs for %s: %w", ftraceEnabled, err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("a tmpfs for %s: %w", ftraceEnabled, err)
	}
	defer unix.Close(mnt)
	fd, err := unix.Openat(mnt, "ftrace_enabled", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("a file for %s: %w", ftraceEnabled, err)
	}
	_, err = unix.Write(fd, value)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("a file for %s: %w", ftraceEnabled, err)
	}
	tree, err := unix.OpenTree(mnt, "ftrace_enabled", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("a file for %s: %w", ftraceEnabled, err)
	}
	defer unix.Close(tree)
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, ftraceEnabled, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting a file of the command's own over %s: %w", ftraceEnabled, err)
	}
	return nil
}

// traceCPUs is how many CPU buffers a subsystem of run or serve has: one
// for each CPU online (the highest + 1), not only those this process may
// run on (runtime.NumCPU, fewer under taskset or a cgroup's cpuset), so
// that every CPU a writer is on has its own, and trace-cmd, which opens
// per_cpu/cpuN for each CPU of the machine, finds them. The kernel's
// per_cpu has each possible CPU, offline ones too; a buffer for each is
// memory no writer uses, so here a CPU that is offline when the
// subsystem starts has no per_cpu directory (trace-cmd record says it
// cannot open its file, and records the others).
func traceCPUs() int {
	online, _ := procfs.OnlineCPUs()
	return max(runtime.NumCPU(), procfs.MaxCPU(online)+1)
}
