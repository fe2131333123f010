package suites_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestExportOnKernel runs package export's live test on the 6.12 kernel:
// inside the VM, a real OpenTelemetry Collector (otelcol/distribution, built
// static) listens on the guest's loopback, a process writes user events
// and EventHeader events on the kernel, and uetrace export takes them from
// the kernel's perf rings and sends them over gRPC and HTTP; the Collector
// must have every one, intact and timed. Then the Collector's own
// userevents receiver takes the Go SDK's logs, spans and metrics from the
// kernel (TestReceiverCollector/kernel).
func TestExportOnKernel(t *testing.T) {
	vmtest.Require(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the Collector with")
	}
	dir := t.TempDir()
	testBin, uetrace, otelcol := filepath.Join(dir, "export.test"), filepath.Join(dir, "uetrace"), filepath.Join(dir, "otelcol")
	if err := vmtest.BuildTest("./internal/export", testBin); err != nil {
		t.Fatal(err)
	}
	if err := vmtest.Build("./cmd/uetrace", uetrace); err != nil {
		t.Fatal(err)
	}
	// The Collector is a module of its own: built static as vmtest builds.
	bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer bcancel()
	build := exec.CommandContext(bctx, "go", "build", "-C", "../../otelcol/distribution", "-o", otelcol, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.WaitDelay = 10 * time.Second
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the Collector: %v\n%s", err, out)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"export.test": testBin, "uetrace": uetrace, "otelcol": otelcol},
		Env:   []string{"UETRACE_BIN=/test/uetrace", "UETRACE_OTELCOL=/test/otelcol"},
		MemMB: 2048,
	}, "sh", "-c", "ifconfig lo 127.0.0.1 up && exec ./export.test -test.v -test.count=1 '-test.run=^(TestCollectorLive|TestReceiverCollector)$/^kernel$'")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("the test failed in the VM (exit %d):\n%s", res.ExitCode, out)
	}
	for _, name := range []string{"TestCollectorLive/kernel/grpc", "TestCollectorLive/kernel/http", "TestReceiverCollector/kernel"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass on the kernel:\n%s", name, out)
		}
	}
}
