package selftests_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/selftests"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestSelftestsOnKernel builds the kernel's user_events selftests and the
// example from linux-source-6.12 and runs them in the 6.12.117 test kernel
// (kernel/vmtest): every test must pass there, except the ones Binaries
// marks with a KernelRace, which may also fail with exactly that assertion.
// This is the baseline a run on uetrace's tracefs is compared with.
func TestSelftestsOnKernel(t *testing.T) {
	vmtest.Require(t)
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
	files := map[string]string{}
	for _, b := range selftests.Binaries {
		files[b.Name] = filepath.Join(bin, b.Name)
	}
	files[selftests.Example] = filepath.Join(bin, selftests.Example)
	script := filepath.Join(t.TempDir(), "selftests.sh")
	if err := os.WriteFile(script, []byte(selftests.Script()), 0o755); err != nil {
		t.Fatal(err)
	}
	files["selftests.sh"] = script

	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{Files: files}, "sh", "./selftests.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	run, err := selftests.ReadRun(res.Output)
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, res.Output)
	}
	t.Logf("on the 6.12.117 kernel:\n%s", run.Summary())
	if err := run.Check(true); err != nil {
		t.Errorf("%v\noutput:\n%s", err, res.Output)
	}
}
