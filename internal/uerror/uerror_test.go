package uerror

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Diagnose explains the kernel's bare EINVAL the way the daemon does.
func TestDiagnose(t *testing.T) {
	for _, c := range []struct{ op, path, input, want string }{
		{"write", "dynamic_events", "u:x u32 a ", `field 1 "u32 a ": only struct fields take a size ("" after the name)`},
		{"write", "dynamic_events", "u:x u32 a # comment", `field 1 "u32 a ": only struct fields take a size ("" after the name)`},
		{"write", "dynamic_events", "u:ok u32 a\nu:bad char[0] b\n", `field 1 "char[0] b": array length is 0`},
		{"write", "dynamic_events", "u:ok u32 a\n", ""},
		{"register", "", "x u32", `field 1 "u32": field "u32" has no name`},
	} {
		if got := Diagnose(c.op, c.path, c.input); got != c.want {
			t.Errorf("Diagnose(%q) = %q, want %q", c.input, got, c.want)
		}
	}
}

// NoBackend's words for an ordinary user: the kernel's cause says whether
// the kernel has user_events when that can be known, and the hint does
// not claim it does — an ordinary user before tracefs's 0700 root was told
// "the kernel has user_events but this user may not open
// user_events_data" on a kernel without them.
func TestNoBackendDenied(t *testing.T) {
	const root, sock = "/sys/kernel/tracing", "/run/uetrace/uetrace.sock"
	kerr := &Error{Op: "open", Path: root + "/user_events_data", Errno: unix.EACCES,
		Reason: "this user may not enter " + root + ", so whether this kernel has user_events is not known"}
	derr := Dial(sock, fmt.Errorf("dial %s: %w", sock, unix.ENOENT))
	err := NoBackend(kerr, derr)
	want := "no user_events: kernel: open /sys/kernel/tracing/user_events_data: permission denied (EACCES): " +
		"this user may not enter /sys/kernel/tracing, so whether this kernel has user_events is not known; " +
		"daemon: connect /run/uetrace/uetrace.sock: no such file or directory (ENOENT): no uetrace daemon there: start one with `uetrace serve`; " +
		"where the kernel has user_events, run as root or give this user access to tracefs"
	if err.Error() != want {
		t.Errorf("NoBackend:\n got %s\nwant %s", err, want)
	}
	if !errors.Is(err, unix.EACCES) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("NoBackend: %v does not wrap both causes' errnos", err)
	}
	// With no errno of permission there is no hint: the causes say it.
	if err := NoBackend(&Error{Op: "open", Path: root + "/user_events_data", Errno: unix.ENOENT}, derr); strings.HasSuffix(err.Error(), "tracefs") {
		t.Errorf("NoBackend for ENOENT: %v, want no hint of permissions", err)
	}
}
