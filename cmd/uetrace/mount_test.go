package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// TestCLIMountPoint: uetrace mount and serve --mount make a mount point that
// does not exist yet (the README's /run/uetrace/tracing on a fresh machine).
func TestCLIMountPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedFUSE(t, "mounting FUSE")
	sock, _, _ := startServe(t)
	dir := filepath.Join(t.TempDir(), "not", "yet", "tracing")
	if _, stderr, code := cli(t, sock, "mount", dir); code != 0 {
		t.Fatalf("mount %s: exit %d\n%s", dir, code, stderr)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	if b, err := os.ReadFile(filepath.Join(dir, "user_events_status")); err != nil || !bytes.Contains(b, []byte("Active:")) {
		t.Errorf("the mounted tree: %v\n%s", err, b)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, stderr, code := cli(t, sock, "mount", file); code == 0 || !strings.Contains(stderr, "is not a directory") {
		t.Errorf("mount on a file: exit %d\n%s", code, stderr)
	}
}
