package fusefs_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/fusefs"
	"github.com/uetrace/uetrace/internal/caps"
)

// A tree served for a user (Options.For) reaches a caller's memory only
// where that user could ptrace it, however the caller reached the mount:
// served for root without CAP_SYS_PTRACE, a caller of root's uid and gid is
// served (newHostile's warm-up client, and the client here), one of another
// gid is EPERM at DIAG_IOCSREG, its memory untouched — as ptrace would
// refuse that user. (A pid FUSE gave in another namespace than the one the
// tree was told, or one reused, thus never reaches another user's process.)
func TestHostileServedFor(t *testing.T) {
	e := newHostileWith(t, fusefs.Options{For: &caps.User{UID: 0, GID: 0}})
	e.client("served_for_same")

	ctx, cancel := context.WithTimeout(context.Background(), clientDeadline)
	defer cancel()
	c := e.cmd(ctx, "client", e.dir, "served_for_other")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 65534}}
	out, err := c.Output()
	stderr := c.Stderr.(*lockedBuffer).String()
	if err == nil || !strings.Contains(stderr, "DIAG_IOCSREG") || !strings.Contains(stderr, "EPERM") {
		t.Errorf("a caller of gid 65534 in a tree served for gid 0: %v, %q, %q; want DIAG_IOCSREG's EPERM", err, out, stderr)
	}
	if st := e.sh(`cat "$T/user_events_status"`); strings.Contains(st, "served_for_other") {
		t.Errorf("the refused caller's event was registered:\n%s", st)
	}
	e.client("served_for_after")
}
