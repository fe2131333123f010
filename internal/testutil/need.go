package testutil

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// NeedRoot skips the test unless it runs as root, saying why it needs to
// ("mounting FUSE", "acting as another user").
func NeedRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: " + why)
	}
}

// NeedFUSE skips the test unless it can mount a FUSE filesystem: root, and
// /dev/fuse. why says what for ("mounting FUSE", "uetrace run mounts
// FUSE").
func NeedFUSE(tb testing.TB, why string) {
	tb.Helper()
	NeedRoot(tb, why)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		tb.Skipf("needs /dev/fuse: %s: %v", why, err)
	}
}

// Capabilities perfmon_capable() counts (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// NeedPerfmon skips the test unless this process is perfmon_capable():
// CAP_PERFMON or CAP_SYS_ADMIN in its effective set — what user_events asks
// of whoever writes "u:" lines to dynamic_events (persistent events) — as
// capget(2) tells.
func NeedPerfmon(tb testing.TB, why string) {
	tb.Helper()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // version 3: capabilities 0-31, then 32-63
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		tb.Skipf("needs CAP_PERFMON or CAP_SYS_ADMIN: %s; capget: %v", why, err)
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if !has(capPerfmon) && !has(capSysAdmin) {
		tb.Skip("needs CAP_PERFMON or CAP_SYS_ADMIN (root): " + why)
	}
}

// NeedPerf returns the path of Linux's perf tool, skipping the test when it
// is not installed (Debian: apt-get install linux-perf).
func NeedPerf(tb testing.TB) string {
	tb.Helper()
	perf, err := exec.LookPath("perf")
	if err != nil {
		tb.Skipf("real perf is not installed (apt-get install linux-perf): skipping the check against it: %v", err)
	}
	return perf
}

// NeedGCC returns gcc's path, skipping the test when there is none.
func NeedGCC(tb testing.TB) string {
	tb.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		tb.Skip("no gcc to build the test's C program: apt-get install gcc libc6-dev")
	}
	return gcc
}
