package selftests_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/selftests"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestSelftestsThroughFUSE runs the kernel's user_events selftests and its
// sample, unmodified, under uetrace run — /sys/kernel/tracing being uetrace's
// FUSE tree on this machine's kernel, which has no user_events — and requires
// every test to pass, perf_test's too: uetrace run answers its
// perf_event_open of the tree's event ids itself.
func TestSelftestsThroughFUSE(t *testing.T) {
	uetrace := vmtest.Uetrace(t) // root: the selftests refuse to run as anyone else
	if err := selftests.Available(); err != nil {
		if os.Getenv(vmtest.EnvRequire) == "require" {
			t.Fatalf("%v (%s=require)", err, vmtest.EnvRequire)
		}
		t.Skip(err)
	}
	bin := t.TempDir()
	if err := selftests.Build(bin); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(bin, "selftests.sh")
	if err := os.WriteFile(script, []byte(selftests.Script()), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "run", "--private", "--", "sh", script)
	cmd.Dir = bin
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("uetrace run -- selftests.sh: %v\n%s", err, out)
	}
	run, err := selftests.ReadRun(out)
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	t.Logf("through uetrace's FUSE tree:\n%s", run.Summary())
	if err := run.Check(false); err != nil {
		t.Errorf("%v\noutput:\n%s", err, out)
	}
}
