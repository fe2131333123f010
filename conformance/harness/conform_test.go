package harness

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

const (
	corpus       = "../scenarios"
	knownPath    = "../known-differences.txt"
	kernelGolden = "../kernel.results"
)

var update = flag.Bool("update", false, "rewrite conformance/kernel.results from the VM")

// TestConformance runs the corpus on the kernel (in the VM; without one,
// from the kernel results saved in conformance/kernel.results), the daemon,
// in-process subsys and (as root) the FUSE tree, and requires every
// difference from the kernel to be a known one. With the VM it also
// requires the saved kernel results to be what the kernel says now.
func TestConformance(t *testing.T) {
	if vmtest.InVM() {
		t.Skip("runs the VM itself")
	}
	if vmtest.RaceEnabled {
		t.Skip("every backend runs in a ueconform binary built without -race")
	}
	kernelResults := ""
	if err := vmtest.Available(); err != nil {
		if os.Getenv(vmtest.EnvRequire) == "require" {
			t.Fatal(err)
		}
		t.Logf("comparing with the saved kernel results: %v", err)
		kernelResults = kernelGolden
	}
	if testing.Short() {
		t.Skip("-short")
	}
	known, err := LoadKnown(knownPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range Backends {
		if err := Unavailable(b); err != nil {
			t.Logf("backend %s skipped: %v", b, err)
		}
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	kernel, backends, err := Differential(ctx, []string{corpus}, kernelResults)
	if err != nil {
		t.Fatal(err)
	}
	if kernelResults == "" {
		var b bytes.Buffer
		for _, n := range kernel.Names {
			b.WriteString("=== " + n + "\n" + kernel.Text[n])
		}
		saved, _ := os.ReadFile(kernelGolden)
		if *update {
			if err := os.WriteFile(kernelGolden, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if !bytes.Equal(saved, b.Bytes()) {
			t.Errorf("conformance/kernel.results is not what the kernel says now (run go test ./conformance/harness -update):\n%s",
				cmp.Diff(strings.Split(string(saved), "\n"), strings.Split(b.String(), "\n")))
		}
	}
	rep := Compare(kernel, backends, known)
	for _, s := range rep.Stale {
		t.Errorf("%s no longer differs: remove it from known-differences.txt", s)
	}
	for _, m := range rep.Missing {
		t.Errorf("no result for %s", m)
	}
	if len(rep.Unknown) > 0 {
		t.Errorf("%s\ndifferences not in known-differences.txt:\n  %s", rep.Diffs.String(), strings.Join(rep.Unknown, "\n  "))
	}
	t.Log(rep.Summary())
}

func TestParse(t *testing.T) {
	steps, err := Parse(`# comment
open d
reg d "x u32 a; char[${3*4}] s" bit=31 flags=multi
child
  open c
  writev c u32:0 str:"a b"
end
cat events/user_events/x/format
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 4 || steps[2].Verb != "child" || len(steps[2].Child) != 2 {
		t.Fatalf("steps = %+v", steps)
	}
	pos, kv := steps[1].options()
	if want := []string{"d", "x u32 a; char[444] s"}; !cmp.Equal(pos, want) {
		t.Errorf("positional = %q, want %q", pos, want)
	}
	if kv["bit"] != "31" || kv["flags"] != "multi" {
		t.Errorf("options = %v", kv)
	}
	if got := steps[2].Child[1].Args; !cmp.Equal(got, []string{"c", "u32:0", "str:a b"}) {
		t.Errorf("child args = %q", got)
	}
	again, err := Parse(source(steps))
	if err != nil || !cmp.Equal(again, steps, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Line" }, cmp.Ignore())) {
		t.Errorf("source does not round-trip: %v\n%s", err, source(steps))
	}
	// A quoted word is never an option, whatever it contains.
	st, _ := Parse(`reg d "bit=3"`)
	if pos, kv := st[0].options(); len(pos) != 2 || len(kv) != 0 {
		t.Errorf("quoted bit=3 taken as an option: %q %v", pos, kv)
	}
	for _, bad := range []string{"frobnicate", "child\nopen d", "end", "open", `reg d "unterminated`, "echo | x y"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestNormalise(t *testing.T) {
	raw := "| ID: ⟪ID 1030⟫\n| ⟪ID 1031⟫\n| __m.1f\n| __m.20 # Used by perf\n| == events/user_events_multi/__m.21/format\n" +
		"| x__m.5 stays\n"
	want := "| ID: <ID+0>\n| <ID+1>\n| __m.<M+0>\n| __m.<M+1> # Used by perf\n| == events/user_events_multi/__m.<M+2>/format\n" +
		"| x__m.5 stays\n"
	if got := normalise(raw, []string{"__m"}); got != want {
		t.Errorf("normalise:\n%s\nwant\n%s", got, want)
	}
	// uetrace's IDs count down from subsys.DefaultLastID: the first
	// handed out is the highest.
	if got, want := normalise("| ID: ⟪ID 32767⟫\n| ⟪ID 32765⟫\n| ⟪ID 32766⟫\n", nil), "| ID: <ID+0>\n| <ID+2>\n| <ID+1>\n"; got != want {
		t.Errorf("normalise of uetrace's IDs:\n%s\nwant\n%s", got, want)
	}
	line := "       ueconform-48      [001] .N...     1.492780: __t: a=1"
	if got, want := maskTraceLine(line), "<task>-<pid> [CPU] .?... <ts>: __t: a=1"; got != want {
		t.Errorf("maskTraceLine = %q, want %q", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("open d\nreg d \"x u32 a\" bit=1\nchild\nopen c\nend\n")
	f.Add("writev d u32:0 hex:0102 str:\"${3*ab}\"")
	f.Fuzz(func(t *testing.T, text string) {
		steps, err := Parse(text)
		if err != nil {
			return
		}
		if _, err := Parse(source(steps)); err != nil {
			t.Errorf("source of parsed steps does not parse: %v\n%s", err, source(steps))
		}
	})
}
