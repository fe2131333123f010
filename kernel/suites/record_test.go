package suites_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestRecordOnKernel runs package record's tests inside the 6.12 kernel
// (kernel/vmtest), with the uetrace command built for them, and requires
// every per-target test to have passed on the kernel.
func TestRecordOnKernel(t *testing.T) {
	vmtest.Require(t)
	dir := t.TempDir()
	testBin, uetrace := filepath.Join(dir, "record.test"), filepath.Join(dir, "uetrace")
	if err := vmtest.BuildTest("./internal/record", testBin); err != nil {
		t.Fatal(err)
	}
	if err := vmtest.Build("./cmd/uetrace", uetrace); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"record.test": testBin, "uetrace": uetrace},
		Env:   []string{"UETRACE_BIN=/test/uetrace"},
	}, "./record.test", "-test.v", "-test.count=1", "-test.run=/kernel$")
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("the tests failed in the VM (exit %d):\n%s", res.ExitCode, out)
	}
	tests := regexp.MustCompile(`(?m)^=== RUN   (Test\w+)/kernel$`).FindAllStringSubmatch(out, -1)
	if len(tests) < 4 {
		t.Fatalf("%d tests ran on the kernel in the VM, want 4 or more:\n%s", len(tests), out)
	}
	for _, m := range tests {
		if !strings.Contains(out, "--- PASS: "+m[1]+"/kernel ") {
			t.Errorf("%s did not pass on the kernel:\n%s", m[1], out)
		}
	}
	for _, line := range regexp.MustCompile(`(?m)^.*(written:|notices:).*$`).FindAllString(out, -1) {
		t.Log(strings.TrimSpace(line))
	}
	var names []string
	for _, m := range tests {
		names = append(names, m[1])
	}
	t.Logf("%d tests passed on the kernel: %s", len(tests), strings.Join(names, " "))
}
