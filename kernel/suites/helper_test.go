package suites_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// cmdHelper runs, as root on the 6.12 kernel, one of cmd/uetrace's helper
// programs — its test binary with UETRACE_TEST_HELPER=helper, the program
// a test of cmd/uetrace runs under uetrace run — by the command args
// (uetrace.test is the binary, in the working directory), and returns
// what it printed, once it has exited 0.
func cmdHelper(t *testing.T, helper string, args ...string) string {
	t.Helper()
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "uetrace.test")
	if err := vmtest.BuildTest("./cmd/uetrace", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"uetrace.test": bin},
		Env:   []string{"UETRACE_TEST_HELPER=" + helper},
	}, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", res.ExitCode, out)
	}
	return out
}
