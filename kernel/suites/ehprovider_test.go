package suites_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestEHProviderOnKernel runs package eventheader/ehprovider's kernel test
// inside the 6.12 kernel: EventHeader events written through a provider
// on the kernel's user_events, read back with perf_event_open and decoded.
func TestEHProviderOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "ehprovider.test")
	if err := vmtest.BuildTest("./eventheader/ehprovider", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"ehprovider.test": bin},
	}, "./ehprovider.test", "-test.v", "-test.count=1", "-test.run=^TestKernelReadBack$")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 || !strings.Contains(out, "--- PASS: TestKernelReadBack ") {
		t.Fatalf("TestKernelReadBack did not pass on the kernel (exit %d):\n%s", res.ExitCode, out)
	}
}
