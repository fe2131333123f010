package report_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/internal/report"
)

// A filtered report is the unfiltered one less the other tasks' lines: by
// process id (every thread of it), by the thread's name at the time (a
// rename moves the later samples), and by both.
func TestFilter(t *testing.T) {
	path := writeScenario(t, false)
	type task struct {
		PID  int    `json:"pid"`
		Comm string `json:"comm"`
	}
	for _, c := range []struct {
		name string
		f    report.Filter
		keep func(task) bool
	}{
		{"pid", report.Filter{PIDs: []int{100}}, func(k task) bool { return k.PID == 100 }},
		{"pids", report.Filter{PIDs: []int{200, 500}}, func(k task) bool { return k.PID == 200 || k.PID == 500 }},
		{"comm", report.Filter{Comms: []string{"worker"}}, func(k task) bool { return k.Comm == "worker" }},
		{"comms", report.Filter{Comms: []string{"renamed", "naïve"}}, func(k task) bool { return k.Comm == "renamed" || k.Comm == "naïve" }},
		{"pid and comm", report.Filter{PIDs: []int{100}, Comms: []string{"server", "new-task"}}, func(k task) bool { return k.PID == 100 && k.Comm == "server" }},
		{"nothing", report.Filter{PIDs: []int{999}}, func(task) bool { return false }},
	} {
		want := []string{}
		for _, line := range wantJSON {
			var k task
			if err := json.Unmarshal([]byte(line), &k); err != nil {
				t.Fatal(err)
			}
			if c.keep(k) {
				want = append(want, line+"\n")
			}
		}
		var out bytes.Buffer
		sum, err := report.WriteFilter(&out, open(t, path), report.JSON, c.f)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.SplitAfter(out.String(), "\n")
		got = slices.DeleteFunc(got, func(s string) bool { return s == "" })
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: (-want +got):\n%s", c.name, d)
		}
		if sum.Samples != uint64(len(want)) || sum.Samples+sum.Filtered != uint64(len(wantJSON)) {
			t.Errorf("%s: summary %+v for %d of %d lines", c.name, sum, len(want), len(wantJSON))
		}
		if len(want) == 0 && c.name != "nothing" {
			t.Errorf("%s keeps nothing: the test checks nothing", c.name)
		}
	}
}
