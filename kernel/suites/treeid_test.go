package suites_test

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestTreeIDProgramOnKernel runs, on the 6.12 kernel, the program that
// cmd/uetrace's TestRunPerfEventOpenOfTreeID runs under uetrace run: it
// creates a user event, reads its id and opens it with perf_event_open as
// Microsoft's perf-collect does. On the kernel the open works, and the
// kernel's ids — every tracepoint's, the user event's too — are below
// subsys.DefaultFirstID, from where uetrace hands out its own: no id of
// uetrace's tree is one a kernel has.
func TestTreeIDProgramOnKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "uetrace.test")
	if err := vmtest.BuildTest("./cmd/uetrace", bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{
		Files: map[string]string{"uetrace.test": bin},
		Env:   []string{"UETRACE_TEST_HELPER=open-tree-id"},
	}, "sh", "-c", `./uetrace.test -test.run='^TestHelperOpenTreeID$' -test.v && echo "highest id: $(cat /sys/kernel/tracing/events/*/*/id | sort -n | tail -1)"`)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d:\n%s", res.ExitCode, out)
	}
	m := regexp.MustCompile(`helper: id (\d+): perf_event_open: ok(?:, file \S+)?\n(?s:.*)highest id: (\d+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("want the open of the user event's id to work, and the highest id:\n%s", out)
	}
	id, _ := strconv.Atoi(m[1])
	highest, _ := strconv.Atoi(m[2])
	if id > highest || highest >= subsys.DefaultFirstID {
		t.Errorf("the kernel's user event has id %d, its highest id is %d: want both below %d", id, highest, subsys.DefaultFirstID)
	}
	t.Logf("the kernel gave the user event id %d; its highest tracepoint id is %d", id, highest)
}
