package selftests_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	runThroughTree(t, selftests.Build, false)
}

// TestSelftestsThroughInterposer runs the same selftests and sample linked
// dynamically, so that uetrace run's interposer is preloaded into them:
// their writes go through the daemon's shared-memory rings, answered from
// its validation tables, everything else through FUSE. Every test must
// pass as through FUSE alone, and the daemon must have taken the
// interposer's shares (its status says how many).
func TestSelftestsThroughInterposer(t *testing.T) {
	runThroughTree(t, selftests.BuildDynamic, true)
}

// runThroughTree builds the selftests with build and runs them under
// uetrace run --private.
func runThroughTree(t *testing.T, build func(string) error, interposed bool) {
	uetrace := vmtest.Uetrace(t) // root: the selftests refuse to run as anyone else
	if err := selftests.Available(); err != nil {
		if os.Getenv(vmtest.EnvRequire) == "require" {
			t.Fatalf("%v (%s=require)", err, vmtest.EnvRequire)
		}
		t.Skip(err)
	}
	bin := t.TempDir()
	if err := build(bin); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(bin, "selftests.sh")
	if err := os.WriteFile(script, []byte(selftests.Script()), 0o755); err != nil {
		t.Fatal(err)
	}
	// The run's own daemon says, at the end, how many shares it took.
	status := filepath.Join(bin, "status.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "run", "--private", "--", "sh", "-c", `sh "$1"; s=$?; "$2" --backend daemon status > "$3"; exit $s`, "sh", script, uetrace, status)
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
	t.Logf("through uetrace's tree (interposer %v):\n%s", interposed, run.Summary())
	if err := run.Check(false); err != nil {
		t.Errorf("%v\noutput:\n%s", err, out)
	}
	st, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`interposer_shares (\d+)\n`).FindSubmatch(st)
	if m == nil {
		t.Fatalf("no interposer_shares in the daemon's status:\n%s", st)
	}
	if n, _ := strconv.Atoi(string(m[1])); (n > 0) != interposed {
		t.Errorf("the daemon took %d interposer shares (interposer %v)", n, interposed)
	}
}
