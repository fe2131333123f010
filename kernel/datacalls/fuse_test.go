package datacalls

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// fuseDifference is a row FUSE cannot answer as Linux does.
type fuseDifference struct {
	result, why string
}

// readDifferences reads a list of rows answered otherwise than on Linux.
func readDifferences(t *testing.T, name string) map[string]fuseDifference {
	t.Helper()
	f, err := os.Open(filepath.Join(dir(), "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]fuseDifference{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		label, rest, ok1 := strings.Cut(line, ": ")
		result, why, ok2 := strings.Cut(rest, " | ")
		if !ok1 || !ok2 || why == "" {
			t.Fatalf("%s: %q is not \"label: result | why\"", name, line)
		}
		out[label] = fuseDifference{result, why}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestThroughFUSE runs datacalls unmodified under uetrace run, where
// /sys/kernel/tracing is uetrace's FUSE tree, and compares every row with
// what Linux 6.12 answered: the same, but for the rows fuse.differences lists
// with their reasons. The program is static: the loader preloads nothing
// into it, and every call reaches the tree.
func TestThroughFUSE(t *testing.T) {
	compareRun(t, Build, "fuse.differences")
}

// TestThroughInterposer runs datacalls linked dynamically under uetrace
// run, which preloads its interposer: the writes go through the daemon's
// shared-memory rings, answered from the validation tables, and the rest
// through FUSE. The rows must be Linux's but for those
// interposer.differences lists — FUSE's own, less the 0-byte write, which
// the interposer answers as Linux does.
func TestThroughInterposer(t *testing.T) {
	compareRun(t, BuildDynamic, "interposer.differences")
}

// compareRun builds datacalls with build, runs it under uetrace run --private
// and compares its rows with the golden, less the differences listed.
func compareRun(t *testing.T, build func(string) error, differences string) {
	uetrace := vmtest.Uetrace(t) // root: datacalls checks root's answers
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "datacalls")
	if err := build(prog); err != nil {
		t.Skipf("no C toolchain: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "run", "--private", "--", prog)
	cmd.Dir = tmp
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("uetrace run -- datacalls: %v\n%s\n%s", err, stderr.String(), out)
	}
	got, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want, err := ReadGolden()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, %d in the golden:\n%s", len(got), len(want), strings.Join(Diff(want, got), "\n"))
	}
	known := readDifferences(t, differences)
	same := 0
	for i := range want {
		if got[i].Label != want[i].Label {
			t.Fatalf("row %d is %q here, %q on the kernel", i, got[i].Label, want[i].Label)
		}
		d, listed := known[want[i].Label]
		switch {
		case got[i].Result == want[i].Result && listed:
			t.Errorf("%s: now answered as Linux does (%s); take it out of %s", want[i].Label, got[i].Result, differences)
		case got[i].Result == want[i].Result:
			same++
		case !listed:
			t.Errorf("%s: %s here, %s on Linux", want[i].Label, got[i].Result, want[i].Result)
		case got[i].Result != d.result:
			t.Errorf("%s: %s here, %s listed in %s (Linux: %s)", want[i].Label, got[i].Result, d.result, differences, want[i].Result)
		}
		delete(known, want[i].Label)
	}
	for label := range known {
		t.Errorf("%s lists %s, which the golden does not have", differences, label)
	}
	t.Logf("%d of %d rows as on Linux 6.12; %d differ as %s explains", same, len(want), len(want)-same, differences)
}
