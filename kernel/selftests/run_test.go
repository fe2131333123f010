package selftests

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testdata/kernel-run.out is Script's output in the 6.12.117 test kernel.
func TestReadRunKernel(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "kernel-run.out"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Check(true); err != nil {
		t.Errorf("Check on the kernel: %v", err)
	}
	want := `abi_test: pass:5 fail:1 xfail:0 xpass:0 skip:0 error:0; not passed: user.flags (fail)
dyn_test: pass:2 fail:2 xfail:0 xpass:0 skip:0 error:0; not passed: user.basic_types (fail), user.loc_types (fail)
ftrace_test: pass:6 fail:0 xfail:0 xpass:0 skip:0 error:0
perf_test: pass:1 fail:1 xfail:0 xpass:0 skip:0 error:0; not passed: user.perf_empty_events (fail)
`
	if got := run.Summary(); got != want {
		t.Errorf("Summary:\n%s\nwant\n%s", got, want)
	}
	// Off the kernel, the races are failures, perf_test's too.
	err = run.Check(false)
	for _, name := range []string{"user.flags", "user.basic_types", "user.loc_types", "user.perf_empty_events"} {
		if err == nil || !strings.Contains(err.Error(), name+": fail, want pass") {
			t.Errorf("Check off the kernel does not fail %s: %v", name, err)
		}
	}

	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"example died", "@@example-EXIT 143@@", "@@example-EXIT 2@@", "the example exited with status 2"},
		{"no record", "example-122     [001] .....     3.683135: test: count=0x0 (0)", "", "the trace has no record"},
		{"not registered", "test\n__abi_event\n", "__abi_event\n", `does not list the example's event "test"`},
		{"another assertion", "# abi_test.c:265:flags:", "# abi_test.c:266:flags:", "user.flags failed, but not with its known kernel race"},
		{"exit status", "@@ftrace_test-EXIT 0@@", "@@ftrace_test-EXIT 1@@", "ftrace_test exited with status 1, want 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := strings.Replace(string(out), tc.old, tc.new, 1)
			if changed == string(out) {
				t.Fatalf("%q is not in the output", tc.old)
			}
			// The sections' checksums no longer hold where the text changed
			// inside one: set them right.
			run, err := ReadRun([]byte(resum(t, changed)))
			if err != nil {
				t.Fatal(err)
			}
			if err := run.Check(true); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check: %v, want %q", err, tc.want)
			}
		})
	}

	cut := string(out[:strings.Index(string(out), "@@perf_test-END")])
	if _, err := ReadRun([]byte(cut)); err == nil || !strings.Contains(err.Error(), "perf_test") {
		t.Errorf("ReadRun of a run cut short: %v", err)
	}
}

// resum sets each section's checksum to that of its body.
func resum(t *testing.T, out string) string {
	t.Helper()
	begin := regexp.MustCompile(`(?m)^@@([\w-]+)-BEGIN@@\n`)
	var sb strings.Builder
	for {
		m := begin.FindStringSubmatchIndex(out)
		if m == nil {
			return sb.String() + out
		}
		name := out[m[2]:m[3]]
		sb.WriteString(out[:m[1]])
		out = out[m[1]:]
		end := regexp.MustCompile(`(?m)^@@` + regexp.QuoteMeta(name) + `-END [0-9a-f]{64}@@\n`).FindStringIndex(out)
		if end == nil {
			t.Fatalf("section %s has no end", name)
		}
		body := out[:end[0]]
		fmt.Fprintf(&sb, "%s@@%s-END %x@@\n", body, name, sha256.Sum256([]byte(body)))
		out = out[end[1]:]
	}
}
