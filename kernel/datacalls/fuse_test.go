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

func readFUSEDifferences(t *testing.T) map[string]fuseDifference {
	t.Helper()
	f, err := os.Open(filepath.Join(dir(), "testdata", "fuse.differences"))
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
			t.Fatalf("fuse.differences: %q is not \"label: result | why\"", line)
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
// with their reasons.
func TestThroughFUSE(t *testing.T) {
	uetrace := vmtest.Uetrace(t) // root: datacalls checks root's answers
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "datacalls")
	if err := Build(prog); err != nil {
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
		t.Fatalf("%d rows through FUSE, %d in the golden:\n%s", len(got), len(want), strings.Join(Diff(want, got), "\n"))
	}
	known := readFUSEDifferences(t)
	same := 0
	for i := range want {
		if got[i].Label != want[i].Label {
			t.Fatalf("row %d is %q through FUSE, %q on the kernel", i, got[i].Label, want[i].Label)
		}
		d, listed := known[want[i].Label]
		switch {
		case got[i].Result == want[i].Result && listed:
			t.Errorf("%s: now answered as Linux does (%s); take it out of fuse.differences", want[i].Label, got[i].Result)
		case got[i].Result == want[i].Result:
			same++
		case !listed:
			t.Errorf("%s: %s through FUSE, %s on Linux", want[i].Label, got[i].Result, want[i].Result)
		case got[i].Result != d.result:
			t.Errorf("%s: %s through FUSE, %s listed in fuse.differences (Linux: %s)", want[i].Label, got[i].Result, d.result, want[i].Result)
		}
		delete(known, want[i].Label)
	}
	for label := range known {
		t.Errorf("fuse.differences lists %s, which the golden does not have", label)
	}
	t.Logf("%d of %d rows as on Linux 6.12; %d differ as fuse.differences explains", same, len(want), len(want)-same)
}
