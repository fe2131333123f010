package selftests

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The testdata files are real output: the four selftests on the 6.12.117
// test kernel, and abi_test where tracefs has no user_events (the host).
func TestParseTAPRealOutput(t *testing.T) {
	for _, tc := range []struct {
		file    string
		binary  string
		totals  Totals
		failed  []string
		skipped int
	}{
		{file: "abi_test.tap", binary: "abi_test",
			totals: Totals{Pass: 5, Fail: 1}, failed: []string{"user.flags"}},
		{file: "dyn_test.tap", binary: "dyn_test",
			totals: Totals{Pass: 2, Fail: 2}, failed: []string{"user.basic_types", "user.loc_types"}},
		{file: "ftrace_test.tap", binary: "ftrace_test", totals: Totals{Pass: 6}},
		{file: "perf_test-racefail.tap", binary: "perf_test",
			totals: Totals{Pass: 1, Fail: 1}, failed: []string{"user.perf_empty_events"}},
		{file: "perf_test-pass.tap", binary: "perf_test", totals: Totals{Pass: 2}},
		{file: "abi_test-no_user_events.tap", binary: "abi_test", totals: Totals{Skip: 6}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			res := parseFile(t, tc.file)
			if res.Version != 13 {
				t.Errorf("version %d, want 13", res.Version)
			}
			if err := res.Complete(); err != nil {
				t.Errorf("Complete: %v", err)
			}
			if *res.Totals != tc.totals || res.Counts() != tc.totals {
				t.Errorf("Totals line %v, counted %v, want %v", *res.Totals, res.Counts(), tc.totals)
			}
			var failed []string
			for _, x := range res.Tests {
				if x.Status == Fail {
					failed = append(failed, x.Name)
				}
			}
			if !reflect.DeepEqual(failed, tc.failed) {
				t.Errorf("failed %q, want %q", failed, tc.failed)
			}
			b := binary(t, tc.binary)
			kernelErr, uetraceErr := b.Check(&res, true), b.Check(&res, false)
			switch {
			case tc.totals.Skip > 0:
				if kernelErr == nil || uetraceErr == nil || !strings.Contains(uetraceErr.Error(), "skip, want pass") {
					t.Errorf("a skipped run passed Check: %v / %v", kernelErr, uetraceErr)
				}
			case len(tc.failed) > 0:
				if kernelErr != nil {
					t.Errorf("Check on the kernel: %v", kernelErr)
				}
				if uetraceErr == nil {
					t.Error("a run with failures passed Check off the kernel")
				}
			default:
				if kernelErr != nil || uetraceErr != nil {
					t.Errorf("Check: %v / %v", kernelErr, uetraceErr)
				}
			}
		})
	}
}

func TestParseTAPDetails(t *testing.T) {
	res := parseFile(t, "perf_test-racefail.tap")
	want := []Test{
		{Number: 1, Name: "user.perf_write", Status: Pass, Output: []string{
			"# Starting 2 tests from 1 test cases.",
			"#  RUN           user.perf_write ...",
			"WARNING: Clear didn't work!",
			"#            OK  user.perf_write",
		}},
		{Number: 2, Name: "user.perf_empty_events", Status: Fail, Output: []string{
			"#  RUN           user.perf_empty_events ...",
			"# perf_test.c:213:perf_empty_events:Expected 0 (0) == ioctl(self->data_fd, DIAG_IOCSREG, &reg) (-1)",
			"WARNING: Clear didn't work!",
			"# perf_empty_events: Test terminated by assertion",
			"#          FAIL  user.perf_empty_events",
		}},
	}
	if !reflect.DeepEqual(res.Tests, want) {
		t.Errorf("tests:\n%#v\nwant\n%#v", res.Tests, want)
	}
	if want := []string{"# FAILED: 1 / 2 tests passed."}; !reflect.DeepEqual(res.Trailing, want) {
		t.Errorf("trailing %q, want %q", res.Trailing, want)
	}
	skip := parseFile(t, "abi_test-no_user_events.tap")
	if got := skip.Tests[1]; got.Name != "user.flags" || got.Status != Skip ||
		got.Directive != "Skipping due to: user_events is not installed" {
		t.Errorf("skipped test: %+v", got)
	}
}

// A run cut short (a crash, a timeout) parses, but is not complete.
func TestParseTAPTruncated(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "abi_test.tap"))
	if err != nil {
		t.Fatal(err)
	}
	cut := string(data[:strings.Index(string(data), "ok 4 ")])
	res, err := ParseTAP(strings.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tests) != 3 || res.Totals != nil {
		t.Fatalf("tests %d, totals %v", len(res.Tests), res.Totals)
	}
	err = res.Complete()
	if err == nil || !strings.Contains(err.Error(), "the plan is 6 tests but 3 result lines were printed") ||
		!strings.Contains(err.Error(), "no \"# Totals:\" line") {
		t.Errorf("Complete: %v", err)
	}
	if err := binary(t, "abi_test").Check(&res, true); err == nil {
		t.Error("Check passed a truncated run")
	}
}

// Forms kselftest.h prints that the user_events tests happen not to.
func TestParseTAPForms(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Test
	}{
		{"ok 1 a.b", Test{Number: 1, Name: "a.b", Status: Pass}},
		{"ok 1", Test{Number: 1, Status: Pass}},
		{"not ok 12 a.b", Test{Number: 12, Name: "a.b", Status: Fail}},
		{"not ok 2 a.b #  reason given", Test{Number: 2, Name: "a.b", Status: Fail, Directive: "reason given"}},
		{"ok 3 a.b # SKIP no such file", Test{Number: 3, Name: "a.b", Status: Skip, Directive: "no such file"}},
		{"ok 3 # SKIP no such file", Test{Number: 3, Status: Skip, Directive: "no such file"}},
		{"ok 4 a.b # XFAIL known", Test{Number: 4, Name: "a.b", Status: XFail, Directive: "known"}},
		{"ok 5 a.b # XPASS unknown", Test{Number: 5, Name: "a.b", Status: XPass, Directive: "unknown"}},
		{"not ok 6 # error cannot fork", Test{Number: 6, Status: Error, Directive: "cannot fork"}},
		{"not ok 7 a.b # TODO later", Test{Number: 7, Name: "a.b", Status: Fail, Directive: "later"}},
		{"ok 8 a.b\r", Test{Number: 8, Name: "a.b", Status: Pass}},
	} {
		res, err := ParseTAP(strings.NewReader(tc.line + "\n"))
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if len(res.Tests) != 1 || !reflect.DeepEqual(res.Tests[0], tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.line, res.Tests, tc.want)
		}
	}

	res, err := ParseTAP(strings.NewReader("TAP version 13\n1..0 # SKIP no user_events\n# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:0 error:0\n"))
	if err != nil || res.Plan != 0 || res.Complete() != nil {
		t.Errorf("empty plan: %+v, %v, %v", res, err, res.Complete())
	}
	res, err = ParseTAP(strings.NewReader("1..3\nok 1 a\nBail out! no memory\n"))
	if err != nil || !res.Bailed || res.Bailout != "no memory" {
		t.Errorf("bail out: %+v, %v", res, err)
	}
	if err := res.Complete(); err == nil || !strings.Contains(err.Error(), "bailed out: no memory") {
		t.Errorf("Complete after a bail-out: %v", err)
	}
	res, _ = ParseTAP(strings.NewReader("1..2\nok 1 a\nok 1 b\n# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0\n"))
	if err := res.Complete(); err == nil || !strings.Contains(err.Error(), "result line 2 is numbered 1") ||
		!strings.Contains(err.Error(), "the Totals line says pass:1") {
		t.Errorf("Complete with a repeated number and wrong totals: %v", err)
	}
}

func TestParseTAPErrors(t *testing.T) {
	for _, in := range []string{
		"ok x name",
		"ok -1 name",
		"ok 01 name",
		"not ok",
		"ok  1 name",
		"1..x",
		"1..-1",
		"1..2\n1..2",
		"TAP version 13\nTAP version 13",
		"TAP version x",
		"# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0",
		"# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0 extra:1",
		"# Totals: pass:1 pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0",
		"# Totals: pass:x fail:0 xfail:0 xpass:0 skip:0 error:0",
		"# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0\n# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0",
		strings.Repeat("x", maxLine+1),
	} {
		if res, err := ParseTAP(strings.NewReader(in + "\n")); err == nil {
			t.Errorf("%.60q parsed: %+v", in, res)
		} else if !strings.HasPrefix(err.Error(), "TAP line ") {
			t.Errorf("%.60q: error %q does not say the line", in, err)
		}
	}
}

func TestBinaries(t *testing.T) {
	want := map[string][2]int{"abi_test": {4, 6}, "dyn_test": {2, 4}, "ftrace_test": {6, 6}, "perf_test": {1, 2}}
	if len(Binaries) != len(want) {
		t.Fatalf("%d binaries, want %d", len(Binaries), len(want))
	}
	for _, b := range Binaries {
		min, max := b.KernelPass()
		if w := want[b.Name]; min != w[0] || max != w[1] || b.Pass() != w[1] {
			t.Errorf("%s: kernel passes %d..%d, uetrace %d; want %d..%d, %d", b.Name, min, max, b.Pass(), w[0], w[1], w[1])
		}
		for _, c := range b.Tests {
			if c.KernelRace == "" {
				continue
			}
			if _, err := regexp.Compile(c.KernelRace); err != nil {
				t.Errorf("%s %s: KernelRace: %v", b.Name, c.Name, err)
			}
			if c.Why == "" || !strings.HasPrefix(c.KernelRace, b.Name+`\.c:`) {
				t.Errorf("%s %s: a KernelRace needs its Why and must match the harness's file.c:LINE line: %q", b.Name, c.Name, c.KernelRace)
			}
		}
	}
}

func FuzzParseTAP(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.tap"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "1..0 # SKIP x\n", "ok 1 # SKIP\n", "not ok 6 # error x\n", "Bail out!\n",
		"# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:0 error:0\n", "ok 1 a # XPASS\r\nok 2 a # XFAIL\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseTAP(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		// What parsed is self-consistent, and judging it never panics.
		for _, x := range res.Tests {
			if x.Number <= 0 {
				t.Fatalf("test number %d", x.Number)
			}
			if x.Status < Pass || x.Status > Error {
				t.Fatalf("status %v", x.Status)
			}
		}
		if res.Totals != nil && (res.Totals.Pass < 0 || res.Totals.Fail < 0) {
			t.Fatalf("negative totals %v", res.Totals)
		}
		c := res.Counts()
		if n := c.Pass + c.Fail + c.Skip + c.XFail + c.XPass + c.Error; n != len(res.Tests) {
			t.Fatalf("counts %v for %d tests", c, len(res.Tests))
		}
		_ = res.Complete()
		for _, b := range Binaries {
			_ = b.Check(&res, true)
			_ = b.Check(&res, false)
		}
	})
}

func parseFile(t *testing.T, name string) Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParseTAP(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func binary(t *testing.T, name string) Binary {
	t.Helper()
	for _, b := range Binaries {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no binary %s in Binaries", name)
	return Binary{}
}

// The fork race as CI met it on the kernel (2026-11-25), and the child's.
func TestForksKernelRace(t *testing.T) {
	var forks Case
	for _, c := range Binaries[0].Tests {
		if c.Name == "user.forks" {
			forks = c
		}
	}
	for _, line := range []string{
		"# abi_test.c:381:forks:Expected 0 (0) == self->check (1)",
		"# abi_test.c:371:forks:Expected 0 (0) == WEXITSTATUS(i) (1)",
	} {
		if !hasLine([]string{line}, forks.KernelRace) {
			t.Errorf("user.forks's KernelRace does not match %q", line)
		}
	}
	if hasLine([]string{"# abi_test.c:379:forks:Expected 1 (1) == self->check (0)"}, forks.KernelRace) {
		t.Error("user.forks's KernelRace matches another assertion")
	}
}
