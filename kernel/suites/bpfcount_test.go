package suites_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestBPFCountOnKernel runs package internal/bpfcount's kernel tests
// inside the 6.12 kernel, as root: the counting program on user events
// registered through userevents, per event and process; a BPF program
// reading each record's fields; and the kernel's refusal to run a
// tracepoint program on a user event, which is why the package probes
// perf_tp_event. Every one must pass there.
func TestBPFCountOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "bpfcount.test")
	if err := vmtest.BuildTest("./internal/bpfcount", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"bpfcount.test": bin},
	}, "./bpfcount.test", "-test.v", "-test.count=1", "-test.run=^TestKernel")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	passed := regexp.MustCompile(`(?m)^--- PASS: (TestKernel\w+) `).FindAllStringSubmatch(out, -1)
	if res.ExitCode != 0 || len(passed) != 4 || strings.Contains(out, "--- SKIP") {
		t.Fatalf("the kernel tests did not all pass in the VM (exit %d, %d passed):\n%s", res.ExitCode, len(passed), out)
	}
}
