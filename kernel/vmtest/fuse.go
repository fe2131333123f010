package vmtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Uetrace is the other way the tooling runs programs against user_events:
// on this machine, under `uetrace run`, where /sys/kernel/tracing is
// uetrace's tree through FUSE — the same programs the VM runs on the
// kernel, to compare. It skips t unless this process may mount FUSE (root,
// /dev/fuse), and returns a uetrace built for it from this module (static,
// as Build makes it), in t's temporary directory.
func Uetrace(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: uetrace run mounts FUSE")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: uetrace run needs FUSE")
	}
	bin := filepath.Join(t.TempDir(), "uetrace")
	if err := Build("github.com/uetrace/uetrace/cmd/uetrace", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
