package suites_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/uetrace/uetrace/internal/subsys"
)

// TestTreeIDProgramOnKernel runs, on the 6.12 kernel, the program that
// cmd/uetrace's TestRunPerfEventOpenOfTreeID runs under uetrace run: it
// creates a user event, reads its id and opens it with perf_event_open as
// Microsoft's perf-collect does. On the kernel the open works, and the
// kernel's ids — every tracepoint's, the user event's too — are below
// subsys.DefaultFirstID, from where uetrace hands out its own: no id of
// uetrace's tree is one a kernel has.
func TestTreeIDProgramOnKernel(t *testing.T) {
	out := cmdHelper(t, "open-tree-id", "sh", "-c", `./uetrace.test -test.run='^TestHelperOpenTreeID$' -test.v && echo "highest id: $(cat /sys/kernel/tracing/events/*/*/id | sort -n | tail -1)"`)
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
