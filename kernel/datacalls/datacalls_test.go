package datacalls

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

var update = flag.Bool("update", false, "rewrite testdata/kernel.golden from the kernel's answers")

// TestGoldenMatchesKernel builds datacalls.c, runs it in the reference
// kernel (kernel/vmtest) and checks that testdata/kernel.golden is what the
// kernel answers now; with -update it rewrites the golden instead.
func TestGoldenMatchesKernel(t *testing.T) {
	vmtest.Require(t)
	bin := filepath.Join(t.TempDir(), "datacalls")
	if err := Build(bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{Files: map[string]string{"datacalls": bin}}, "./datacalls")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("datacalls in the VM: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	if res.ExitCode != 0 {
		t.Fatalf("datacalls failed in the VM (exit %d):\n%s", res.ExitCode, res.Output)
	}
	got, err := Parse(res.Output)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Output)
	}
	if !strings.Contains(string(res.Output), "\n# end\n") {
		t.Fatalf("datacalls did not run to its end:\n%s", res.Output)
	}
	if *update {
		if err := os.WriteFile(GoldenPath(), res.Output, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d rows", GoldenPath(), len(got))
		return
	}
	want, err := ReadGolden()
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(want, got); d != nil {
		t.Fatalf("testdata/kernel.golden is not what the kernel answers now:\n%s\n"+
			"If the change is expected, run: go test ./kernel/datacalls -run TestGoldenMatchesKernel -update",
			strings.Join(d, "\n"))
	}
	t.Logf("%d rows as in the golden", len(got))
}

// TestGoldenParses keeps the golden readable without a VM.
func TestGoldenParses(t *testing.T) {
	rows, err := ReadGolden()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 90 {
		t.Errorf("the golden has %d rows, want at least 90", len(rows))
	}
	if d := Diff(rows, rows); d != nil {
		t.Errorf("Diff of the golden with itself: %v", d)
	}
}

func TestBuild(t *testing.T) {
	if err := Build(filepath.Join(t.TempDir(), "datacalls")); err != nil {
		t.Skipf("no C toolchain here: %v", err)
	}
}

func TestParse(t *testing.T) {
	rows, err := Parse([]byte("# comment\na.b: 0 0 write_index=3\n\nc: -1 EFAULT\nd: \"x: y\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{"a.b", "0 0 write_index=3"}, {"c", "-1 EFAULT"}, {"d", `"x: y"`}}
	if len(rows) != len(want) {
		t.Fatalf("got %v, want %v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: got %v, want %v", i, rows[i], want[i])
		}
	}
	for _, bad := range []string{"no separator\n", ": empty label\n", "a b: space\n", "a: 1\na: 2\n", "a:1\n", "a: x\x01\n", "a: \r\r\n"} {
		if _, err := Parse([]byte(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}

func TestDiff(t *testing.T) {
	want := []Row{{"a", "0 0"}, {"b", "-1 EFAULT"}, {"c", "0 0"}}
	got := []Row{{"b", "-1 EINVAL"}, {"a", "0 0"}, {"d", "0 0"}}
	d := Diff(want, got)
	joined := strings.Join(d, "\n")
	for _, s := range []string{`b: got "-1 EINVAL", want "-1 EFAULT"`, "b: out of order", "c: missing", "d: unexpected row"} {
		if !strings.Contains(joined, s) {
			t.Errorf("Diff says\n%s\nwithout %q", joined, s)
		}
	}
	if d := Diff(want, want); d != nil {
		t.Errorf("Diff(want, want) = %v", d)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("a: 0 0\nb: -1 EFAULT write_index=0x1\n"))
	f.Add([]byte("# c\n\nx.y: \"\\tfield:u32 a;\"\r\n"))
	f.Add([]byte("a: 1\na: 2\n"))
	f.Add([]byte(":\n: : :"))
	f.Add([]byte("a: \r\r\n")) // once printed as "a: \r", read back as "a: "
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		// Printing the rows and parsing again gives the same rows.
		var sb strings.Builder
		for _, r := range rows {
			sb.WriteString(r.String() + "\n")
		}
		again, err := Parse([]byte(sb.String()))
		if err != nil {
			t.Fatalf("rows %q print as unparsable text: %v", rows, err)
		}
		if d := Diff(rows, again); d != nil {
			t.Fatalf("round trip: %v", d)
		}
	})
}
