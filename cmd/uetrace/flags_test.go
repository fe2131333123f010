package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Flags: one default each, and perf's -i where perf script takes it.

// TestCLIOneDefaultPerFlag: no flag's help line shows two defaults (as -e
// did: its text's "default every user event" and pflag's "(default [])").
func TestCLIOneDefaultPerFlag(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
			if n := strings.Count(line, "default"); n > 1 {
				t.Errorf("uetrace %s: %d defaults in\n%s", c.CommandPath(), n, line)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

// TestCLIReportInput: report takes its file as -i, as perf script and
// uetrace export do, and as its argument; not both.
func TestCLIReportInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const file = "../../perfdata/testdata/sched_switch_pipe.data"
	byArg, stderr, code := runCLI(t, nil, "report", file)
	if code != 0 || byArg == "" {
		t.Fatalf("report FILE: exit %d\n%s", code, stderr)
	}
	byFlag, stderr, code := runCLI(t, nil, "report", "-i", file)
	if code != 0 || byFlag != byArg {
		t.Errorf("report -i FILE: exit %d, %d bytes against report FILE's %d\n%s", code, len(byFlag), len(byArg), stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if byStdin, stderr, code := runCLI(t, data, "report", "--input", "-"); code != 0 || byStdin != byArg {
		t.Errorf("report --input -: exit %d\n%s", code, stderr)
	}
	_, stderr, code = runCLI(t, nil, "report", "-i", file, file)
	want := `uetrace: report: invalid argument (EINVAL): takes the file once: -i FILE or FILE, not both ("` + file + `"); see uetrace report --help`
	if strings.TrimSpace(stderr) != want || code != 1 {
		t.Errorf("report -i FILE FILE: exit %d, stderr\n%s\nwant\n%s", code, stderr, want)
	}
}
