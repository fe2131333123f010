package suites_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestUsereventsOnKernel runs package userevents' backend suite inside the 6.12 kernel
// (kernel/vmtest), where the kernel backend exists, and requires every
// suite test to have passed on it — not skipped, not passed on the other
// backends only.
func TestUsereventsOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "userevents.test")
	if err := vmtest.BuildTest("./userevents", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"userevents.test": bin},
	}, "./userevents.test", "-test.v", "-test.count=1")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("the suite failed in the VM (exit %d):\n%s", res.ExitCode, out)
	}
	// Every test that runs per backend must show a passing kernel subtest.
	suite := regexp.MustCompile(`(?m)^=== RUN   (Test\w+)/inprocess$`).FindAllStringSubmatch(out, -1)
	if len(suite) == 0 {
		t.Fatalf("no suite tests ran in the VM:\n%s", out)
	}
	for _, m := range suite {
		want := "--- PASS: " + m[1] + "/kernel "
		if !strings.Contains(out, want) {
			t.Errorf("%s did not pass on the kernel backend:\n%s", m[1], out)
		}
	}
	t.Logf("%d suite tests passed on the kernel backend", len(suite))
}
