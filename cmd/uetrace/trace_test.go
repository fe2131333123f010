package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// trace -e enables what was disabled for the trace only, leaves what was
// enabled, and restores on SIGINT and SIGTERM alike.
func TestTraceEnableRestores(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	for _, ev := range []string{"hab_off u32 x", "hab_on u32 x"} {
		_, out := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", ev)
		testutil.Wait(t, "the held registration", func() bool { return strings.Contains(out.String(), "holding it") })
	}
	mustCLI(t, sock, "enable", "hab_on")
	enabled := func(name string) string {
		return mustCLI(t, sock, "cat", "events/user_events/"+name+"/enable")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		tr, out := background(t, "--backend", "daemon", "--socket", sock, "trace", "-e", "hab_*", "-e", "user_events:hab_off")
		testutil.Wait(t, "trace to enable hab_off", func() bool {
			return strings.Contains(out.String(), "uetrace trace: enabled user_events:hab_off until the trace ends\n") &&
				strings.Contains(out.String(), "uetrace trace: user_events:hab_on already enabled, left so\n")
		})
		if enabled("hab_off") != "1\n" || enabled("hab_on") != "1\n" {
			t.Fatalf("during the trace: hab_off %q, hab_on %q", enabled("hab_off"), enabled("hab_on"))
		}
		mustCLI(t, sock, "emit", "hab_off u32 x", "--field", "x=3")
		testutil.Wait(t, "the record", func() bool { return strings.Contains(out.String(), "hab_off: x=0x3 (3)\n") })
		tr.Process.Signal(sig)
		if err := tr.Wait(); err != nil {
			t.Errorf("trace -e after %v: %v\n%s", sig, err, out.String())
		}
		if !strings.HasSuffix(out.String(), "uetrace trace: disabled user_events:hab_off again\n") {
			t.Errorf("after %v:\n%s", sig, out.String())
		}
		if enabled("hab_off") != "0\n" || enabled("hab_on") != "1\n" {
			t.Errorf("after %v: hab_off %q, hab_on %q; want as before the trace", sig, enabled("hab_off"), enabled("hab_on"))
		}
	}
	// A pattern that selects nothing changes nothing.
	_, errs, code := cli(t, sock, "trace", "-e", "hab_on", "-e", "nothing_such")
	if code != 1 || !strings.Contains(errs, "(ENOENT)") || strings.Contains(errs, "enabled") {
		t.Errorf("trace -e of nothing: exit %d, %q", code, errs)
	}
	if enabled("hab_off") != "0\n" || enabled("hab_on") != "1\n" {
		t.Errorf("after a failed trace -e: hab_off %q, hab_on %q", enabled("hab_off"), enabled("hab_on"))
	}
}

// trace --pid and --comm keep some tasks' lines; status counts each
// event's records.
func TestTraceFiltersAndStatusCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	const ev = "habf u32 x"
	_, out := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", ev)
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(out.String(), "holding it") })

	status := regexp.MustCompile(`(?m)^habf\s+user_events\s+\d+\s+(\S+)\s+(\S+)\s+(\S+)\s+u32 x$`)
	counts := func() (string, string) {
		m := status.FindStringSubmatch(mustCLI(t, sock, "status"))
		if m == nil {
			t.Fatalf("no habf row in status:\n%s", mustCLI(t, sock, "status"))
		}
		return m[2], m[3]
	}
	if w, d := counts(); w != "0" || d != "0" {
		t.Errorf("status before any record: %s written, %s dropped", w, d)
	}

	mustCLI(t, sock, "enable", "habf")
	// The binary under another name writes too: another comm.
	other := filepath.Join(t.TempDir(), "habother")
	data, err := os.ReadFile(testutil.Uetrace(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, bin := range []string{testutil.Uetrace(t), testutil.Uetrace(t), other} {
		out, err := execOut(bin, "--backend", "daemon", "--socket", sock, "emit", ev, "--field", fmt.Sprintf("x=%d", i))
		if err != nil {
			t.Fatalf("emit: %v\n%s", err, out)
		}
	}
	if w, d := counts(); w != "3" || d != "0" {
		t.Errorf("status after 3 records: %s written, %s dropped", w, d)
	}

	all := recordLines(mustCLI(t, sock, "trace"))
	if len(all) != 3 {
		t.Fatalf("trace: %d records, want 3:\n%s", len(all), strings.Join(all, ""))
	}
	if got := recordLines(mustCLI(t, sock, "trace", "--comm", "habother")); len(got) != 1 || !strings.Contains(got[0], "habf: x=0x2 (2)") {
		t.Errorf("trace --comm habother: %q", got)
	}
	if got := recordLines(mustCLI(t, sock, "trace", "--comm", "uetrace", "--comm", "habother")); len(got) != 3 {
		t.Errorf("trace --comm uetrace --comm habother: %q", got)
	}
	ids := taskIDs(t, all)
	if got := recordLines(mustCLI(t, sock, "trace", "--pid", strconv.Itoa(ids[1]))); len(got) != 1 || got[0] != all[1] {
		t.Errorf("trace --pid %d: %q", ids[1], got)
	}
	if got := recordLines(mustCLI(t, sock, "trace", "--pid", fmt.Sprintf("%d,%d", ids[0], ids[2]))); !slices.Equal(got, []string{all[0], all[2]}) {
		t.Errorf("trace --pid %d,%d: %q", ids[0], ids[2], got)
	}
	if got := recordLines(mustCLI(t, sock, "trace", "--pid", strconv.Itoa(ids[2]), "--comm", "uetrace")); len(got) != 0 {
		t.Errorf("trace --pid of habother --comm uetrace: %q", got)
	}
	// The header lines stay.
	if out := mustCLI(t, sock, "trace", "--comm", "nobody"); !strings.HasPrefix(out, "# tracer: nop\n") {
		t.Errorf("trace --comm nobody:\n%s", out)
	}
	_, errs, code := cli(t, sock, "trace", "--pid", "-3")
	if code != 1 || !strings.Contains(errs, `trace --pid "-3": invalid argument (EINVAL): a process id is a positive number`) {
		t.Errorf("trace --pid -3: exit %d, %q", code, errs)
	}
}

func execOut(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// recordLines are the lines of trace output that are records.
func recordLines(trace string) []string {
	var out []string
	for _, l := range strings.SplitAfter(trace, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// taskIDs are the task ids of trace lines.
func taskIDs(t *testing.T, lines []string) []int {
	t.Helper()
	var ids []int
	for _, l := range lines {
		m := taskColumn.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("no task in %q", l)
		}
		id, _ := strconv.Atoi(m[2])
		ids = append(ids, id)
	}
	return ids
}

// The task column as Linux prints it: names with spaces and dashes, with
// and without the tgid column (options/record-tgid).
func TestTraceLineFilter(t *testing.T) {
	lines := []string{
		"# tracer: nop\n",
		"           <...>-1234    [001] .....  1234.567890: x: a=1\n",
		"    my-app worker-77      [000] d..1.    12.000001: x: a=2\n",
		"          server-1300    ( 1290) [003] .....   100.5: x: a=3\n",
		"          kworker-1301    (-------) [003] .....   100.6: x: a=4\n",
		"not a record line\n",
	}
	for _, c := range []struct {
		f    lineFilter
		want []int // indexes of the lines kept
	}{
		{lineFilter{pids: []int{1234}}, []int{0, 1, 5}},
		{lineFilter{pids: []int{77}}, []int{0, 2, 5}},
		{lineFilter{pids: []int{1290}}, []int{0, 3, 5}}, // by tgid
		{lineFilter{pids: []int{1300, 1301}}, []int{0, 3, 4, 5}},
		{lineFilter{comms: []string{"my-app worker"}}, []int{0, 2, 5}},
		{lineFilter{comms: []string{"<...>", "kworker"}}, []int{0, 1, 4, 5}},
		{lineFilter{pids: []int{77}, comms: []string{"server"}}, []int{0, 5}},
	} {
		var got []int
		for i, l := range lines {
			if c.f.keep([]byte(l)) {
				got = append(got, i)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v keeps lines %v, want %v", c.f, got, c.want)
		}
		// Written in pieces, the same lines come out.
		var sb strings.Builder
		w := c.f.writer(&sb)
		all := strings.Join(lines, "")
		for i := 0; i < len(all); i += 7 {
			w.Write([]byte(all[i:min(i+7, len(all))]))
		}
		var want strings.Builder
		for _, i := range c.want {
			want.WriteString(lines[i])
		}
		if sb.String() != want.String() {
			t.Errorf("%+v through the writer:\n%s\nwant:\n%s", c.f, sb.String(), want.String())
		}
	}
}
