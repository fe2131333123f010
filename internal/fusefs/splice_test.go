package fusefs_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSendfileFromTree records what the package doc says of sendfile(2)
// from the tree: Linux's FUSE splices a FOPEN_DIRECT_IO file through the
// page cache up to the file's size since 6.5 (commit 2cb1e08985e3), and the
// tree's files have size 0 as tracefs's do, so busybox's cat, which copies
// by sendfile, prints nothing where on tracefs it prints the file. Either is
// what a kernel does; anything else is a bug of the tree. uetrace run fails
// these calls, and its command reads (package runguard). The copy runs in a
// process of its own: one that serves the tree and waits on it in the same
// system call can deadlock at exit.
func TestSendfileFromTree(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox (Debian's busybox-static)")
	}
	_, dir := mount(t)
	out := sh(t, dir, `echo 'u:my_ev u32 n' >> $T/dynamic_events
echo busybox:; `+busybox+` cat $T/user_events_status
echo read:; while IFS= read -r line; do echo "$line"; done < $T/user_events_status`)
	bb, rd, ok := strings.Cut(strings.TrimPrefix(out, "busybox:\n"), "read:\n")
	switch {
	case !ok || !strings.Contains(rd, "my_ev"):
		t.Fatalf("the script's output is not two copies of user_events_status:\n%s", out)
	case bb == "":
		t.Logf("busybox's cat (sendfile) printed nothing of the %d bytes read gives: this kernel's FUSE splices by the file's size (Linux 6.5 and later, unfixed)", len(rd))
	case bb == rd:
		t.Logf("busybox's cat (sendfile) printed what read gives: this kernel's FUSE splices a direct-I/O file by reading it")
	default:
		t.Errorf("busybox's cat printed\n%q\nwhile read gives\n%q: want all of it or, on Linux 6.5 and later, nothing", bb, rd)
	}
}
