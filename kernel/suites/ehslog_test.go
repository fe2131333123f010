package suites_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestEHSlogOnKernel runs package eventheader/ehslog's kernel test inside
// the 6.12 kernel: testing/slogtest through a log/slog Handler writing
// EventHeader events on the kernel's user_events, every record read back
// with perf_event_open and decoded.
func TestEHSlogOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "ehslog.test")
	if err := vmtest.BuildTest("./eventheader/ehslog", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"ehslog.test": bin},
	}, "./ehslog.test", "-test.v", "-test.count=1", "-test.run=^TestKernelSlogtest$")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 || !strings.Contains(out, "--- PASS: TestKernelSlogtest ") {
		t.Fatalf("TestKernelSlogtest did not pass on the kernel (exit %d):\n%s", res.ExitCode, out)
	}
}
