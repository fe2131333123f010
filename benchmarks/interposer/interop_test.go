package interposer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// thirdParty is a third-party program the comparison runs.
type thirdParty struct {
	name  string
	argv  []string
	stdin string
	// events are the register commands of the events it writes: they are
	// registered persistently and enabled before any client starts, since
	// a client writes as soon as it has registered (Linux matches a
	// program's registration to the persistent event of the same name and
	// fields).
	events []string
	// direct is set for a program that makes its system calls itself (Go):
	// the interposer is never in its path, which the comparison checks too.
	direct bool
	// quiet is set for a program that writes no enabled event.
	quiet bool
	// skip says why the client cannot run here.
	skip string
}

// TestThirdPartySameTrace is #30's check "tried again as a new user would,
// with third-party programs": each program runs under `uetrace run` twice
// against one daemon, with the interposer (the default) and without
// (--no-preload, every write through FUSE), while `uetrace record` records
// every user event into perf.data and the daemon's trace buffer takes them
// too; the trace file's text (uetrace trace), the recording's text (uetrace
// report, which decodes the EventHeader fields the trace file leaves as
// bytes), the records and drops uetrace status counted of its events, and
// the program's own output (what each call returned) must be byte for byte
// the same after Normalize, which rewrites only the task ids, CPUs and
// times. The programs:
//
//   - Microsoft's LinuxTracepoints samples (C: libtracepoint's provider
//     and API samples; C++: libeventheader-tracepoint's provider and
//     dynamic samples), from a cmake build in $UETRACE_LINUXTRACEPOINTS
//     (the package doc);
//   - the Go port of LinuxTracepoints ($UETRACE_LINUXTRACEPOINTS_GO, a
//     checkout of github.com/cataggar/LinuxTracepoints-Go): its own tests,
//     with its kernel test on (LINUXTRACEPOINTS_INTEGRATION=1), and
//     testdata/goport, a program written with it;
//   - testdata/pyclient.py, Python's standard library on the ABI.
//
// Each kind skips, saying why, where it cannot be had; where its variable
// is set (as .ci/run sets them) a build that fails is a failure.
func TestThirdPartySameTrace(t *testing.T) {
	uetrace := vmtest.Uetrace(t)
	if preload.Library == nil {
		t.Skip("no interposer for this architecture: run writes through FUSE alone")
	}
	tmp := t.TempDir()
	clients := append(linuxTracepointsClients(t), pythonClient())
	clients = append(clients, goPortClients(t, tmp)...)

	d := &daemon{uetrace: uetrace, sock: vmtest.Serve(t, uetrace, tmp), data: filepath.Join(tmp, "perf.data")}
	for _, c := range clients {
		if c.skip != "" {
			continue
		}
		for _, e := range c.events {
			d.run(t, "register", "--persist", "--", e)
		}
	}
	d.run(t, "enable", "user_events:*")

	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip(c.skip)
			}
			with := d.capture(t, c, true)
			without := d.capture(t, c, false)
			for _, k := range []struct {
				what string
				a, b []byte
			}{
				{"its output", with.stdout, without.stdout},
				{"uetrace trace", with.trace, without.trace},
				{"uetrace report", with.report, without.report},
				{"uetrace status's records and drops", with.counts, without.counts},
			} {
				if diff := firstDifference(Normalize(k.a), Normalize(k.b)); diff != "" {
					t.Errorf("%s differs with the interposer and without (normalized): %s", k.what, diff)
				}
			}
			// A comparison of nothing would prove nothing: the programs
			// that write must have written, the interposer must have
			// served those it can reach, and no other.
			if n := records(with.report); n == 0 && !c.quiet {
				t.Errorf("no record in uetrace report: the comparison is empty\n%s", with.report)
			}
			if c.direct && with.shares != 0 || !c.direct && with.shares == 0 {
				t.Errorf("with the interposer: %d processes shared a ring with the daemon (direct system calls: %v)", with.shares, c.direct)
			}
			if without.shares != 0 {
				t.Errorf("with --no-preload: %d processes shared a ring with the daemon, want none", without.shares)
			}
			if c.quiet {
				t.Logf("its output:\n%s", with.stdout)
			}
			t.Logf("%d trace lines, %d report lines, records and drops (%s) identical; %d interposer shares with it, none without",
				records(with.trace), records(with.report), bytes.ReplaceAll(bytes.TrimSpace(with.counts), []byte("\n"), []byte(", ")), with.shares)
		})
	}
}

// firstDifference says where a and b first differ, with the lines around,
// or is empty if they are the same.
func firstDifference(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	la, lb := strings.SplitAfter(string(a), "\n"), strings.SplitAfter(string(b), "\n")
	i := 0
	for i < len(la) && i < len(lb) && la[i] == lb[i] {
		i++
	}
	lines := func(l []string) string { return strings.Join(l[max(i-3, 0):min(i+4, len(l))], "") }
	return fmt.Sprintf("line %d of %d and %d lines:\n--- with\n%s--- without (--no-preload)\n%s", i+1, len(la), len(lb), lines(la), lines(lb))
}

// records counts the record lines of a trace or report text.
func records(text []byte) int {
	n := 0
	for line := range bytes.Lines(text) {
		if len(bytes.TrimSpace(line)) > 0 && line[0] != '#' {
			n++
		}
	}
	return n
}

// linuxTracepointsClients are Microsoft's samples. The libtracepoint
// provider sample writes its 4 events once; the others are interactive:
// each line of input writes their events once more, "x" ends them — 1000
// rounds, so that the interposer's rings carry thousands of records, in
// between the writes that go through FUSE (a __data_loc field's record).
func linuxTracepointsClients(t *testing.T) []thirdParty {
	eh := func(names ...string) []string {
		var cmds []string
		for _, n := range names {
			tp, err := eventheader.ParseTracepointName(n)
			if err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, tp.Command())
		}
		return cmds
	}
	cs := []thirdParty{
		{name: "tracepoint-provider-sample", events: []string{
			"my_tracepoint1 u8 field1; __rel_loc char[] field2; char[5] field3", "my_tracepoint2",
			"my_tracepoint3 u8 field1; __rel_loc char[] field2; char[5] field3", "my_tracepoint4",
		}},
		{name: "tracepoint-api-sample", events: []string{
			"simple_tracepoint u32 field1", "empty_tracepoint",
			"tp_data_loc u32 field1; __data_loc char[] field2; u32 field3",
			"tp_rel_loc u32 field1; __rel_loc char[] field2; u32 field3",
		}},
		{name: "eventheader-provider-sample", events: eh("MyProviderName_L4K1", "OtherProviderName_L5K23Gmygroup")},
		{name: "eventheader-dynamic-sample", events: eh("EhdProv1_L5K1", "EhdProv2_L4K2Gmygroup")},
	}
	lt := os.Getenv("UETRACE_LINUXTRACEPOINTS")
	for i := range cs {
		c := &cs[i]
		c.stdin = strings.Repeat("\n", 999) + "x\n"
		if lt == "" {
			c.skip = "$UETRACE_LINUXTRACEPOINTS is not set: no LinuxTracepoints build (thirdparty.sh DIR makes one in DIR/LinuxTracepoints; it needs git, cmake, make and g++)"
			continue
		}
		c.argv = []string{filepath.Join(lt, "build", "bin", c.name)}
		if _, err := os.Stat(c.argv[0]); err != nil {
			t.Fatalf("$UETRACE_LINUXTRACEPOINTS has no %s: build LinuxTracepoints there with thirdparty.sh: %v", c.name, err)
		}
	}
	return cs
}

// pythonClient is testdata/pyclient.py under python3.
func pythonClient() thirdParty {
	c := thirdParty{name: "python", events: []string{
		"py_fixed u32 n; char[8] tag; s64 delta",
		"py_loc u32 n; __data_loc char[] d; __rel_loc char[] r",
		"py_empty",
	}}
	py, err := exec.LookPath("python3")
	if err != nil {
		c.skip = fmt.Sprintf("no python3 (apt-get install python3): %v", err)
		return c
	}
	c.argv = []string{py, Source("pyclient.py"), "/sys/kernel/tracing"}
	return c
}

// goPortClients are the Go port's tests and testdata/goport.
func goPortClients(t *testing.T, tmp string) []thirdParty {
	tests := thirdParty{name: "goport-tests", direct: true, quiet: true}
	prog := thirdParty{name: "goport", direct: true, events: []string{
		"goport_plain u32 n; __rel_loc char[] s",
	}}
	tp, err := eventheader.ParseTracepointName("GoPortProvider_L4K1")
	if err != nil {
		t.Fatal(err)
	}
	prog.events = append(prog.events, tp.Command())
	src := os.Getenv("UETRACE_LINUXTRACEPOINTS_GO")
	if src == "" {
		reason := "$UETRACE_LINUXTRACEPOINTS_GO is not set: no checkout of github.com/cataggar/LinuxTracepoints-Go (thirdparty.sh DIR makes one in DIR/LinuxTracepoints-Go)"
		tests.skip, prog.skip = reason, reason
		return []thirdParty{tests, prog}
	}
	p, err := BuildGoPort(tmp, src)
	if err != nil {
		t.Fatalf("$UETRACE_LINUXTRACEPOINTS_GO: %v", err)
	}
	prog.argv = []string{p.Client}
	// One run of every package's tests, each in its package's directory,
	// saying how each ended (and failing if one failed): its kernel test registers an event of its own
	// (named after its pid: nothing enables it) and checks that a write
	// is ErrDisabled, the rest never reach the tree.
	script := `s=0
for t; do
	d=${t%%=*} b=${t#*=}
	(cd "$d" && LINUXTRACEPOINTS_INTEGRATION=1 "$b" -test.count=1)
	r=$?; echo "${b##*/}: exit $r"; [ $r = 0 ] || s=1
done
exit $s`
	tests.argv = []string{"/bin/sh", "-c", script, "sh"}
	for _, gt := range p.Tests {
		tests.argv = append(tests.argv, gt.Dir+"="+gt.Binary)
	}
	return []thirdParty{tests, prog}
}

// daemon is the comparison's `uetrace serve`.
type daemon struct {
	uetrace, sock string
	data          string // the recording's perf.data
}

// run runs a uetrace command on the daemon and returns its output.
func (d *daemon) run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(d.uetrace, append([]string{"--socket", d.sock}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("uetrace %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// shares is the daemon's count of processes that have shared an
// interposer's ring with it.
func (d *daemon) shares(t *testing.T) int {
	m := regexp.MustCompile(`(?m)^\s*interposer_shares (\d+)$`).FindSubmatch(d.run(t, "status"))
	if m == nil {
		t.Fatal("no interposer_shares in uetrace status")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// recording says whether `uetrace record` has started: it has a session
// on the daemon, attached to each of c's events (the USERS column of
// uetrace status shows perf). Other events are not looked at: one a
// previous client made may be on its way out.
func (d *daemon) recording(t *testing.T, c thirdParty) bool {
	status := d.run(t, "status")
	if m := regexp.MustCompile(`(?m)^\s*sessions (\d+)$`).FindSubmatch(status); m == nil || string(m[1]) == "0" {
		return false
	}
	users := map[string]string{}
	table, _, _ := bytes.Cut(status, []byte("\n\n"))
	for l := range bytes.Lines(table) {
		if f := strings.Fields(string(l)); len(f) >= 4 {
			users[f[0]] = f[3]
		}
	}
	for _, e := range c.events {
		name, _, _ := strings.Cut(e, " ")
		if !strings.Contains(users[name], "perf") {
			return false
		}
	}
	return true
}

// counts are uetrace status's RECORDS and DROPPED of every event, by name.
func (d *daemon) counts(t *testing.T) map[string][2]int {
	m := map[string][2]int{}
	table, _, _ := bytes.Cut(d.run(t, "status"), []byte("\n\n"))
	for l := range bytes.Lines(table) {
		f := strings.Fields(string(l))
		if len(f) < 6 {
			continue
		}
		records, err1 := strconv.Atoi(f[4])
		dropped, err2 := strconv.Atoi(f[5])
		if err1 == nil && err2 == nil {
			m[f[0]] = [2]int{records, dropped}
		}
	}
	return m
}

// captured is what one run of a client gave: its output, the trace text,
// the report text, what uetrace status counted of its events (records
// written, and dropped on their way: "name records dropped" lines) and
// the interposer's shares.
type captured struct {
	stdout, trace, report, counts []byte
	shares                        int
}

// capture runs c under `uetrace run`, with the interposer or without,
// while `uetrace record` records every user event there is (--no-follow:
// an event a client makes stays disabled, as the clients expect) and the
// trace buffer, emptied first, takes them.
func (d *daemon) capture(t *testing.T, c thirdParty, interposer bool) captured {
	t.Helper()
	d.run(t, "write", "--trunc", "trace", "")
	shares, counts := d.shares(t), d.counts(t)
	os.Remove(d.data)
	rec := exec.Command(d.uetrace, "--socket", d.sock, "record", "-q", "--no-follow", "-e", "user_events:*", "-o", d.data)
	var recErr bytes.Buffer
	rec.Stderr = &recErr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	defer rec.Process.Kill() // a no-op once it has been waited for
	for deadline := time.Now().Add(time.Minute); !d.recording(t, c); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("uetrace record has not attached to the events in a minute\n%s", recErr.Bytes())
		}
	}

	args := []string{"--socket", d.sock, "run"}
	if !interposer {
		args = append(args, "--no-preload")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.uetrace, append(append(args, "--"), c.argv...)...)
	cmd.Stdin = strings.NewReader(c.stdin)
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("uetrace %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}

	rec.Process.Signal(os.Interrupt)
	if err := rec.Wait(); err != nil {
		t.Fatalf("uetrace record: %v\n%s", err, recErr.Bytes())
	}
	report, err := exec.Command(d.uetrace, "report", "-i", d.data).Output()
	if err != nil {
		t.Fatalf("uetrace report: %v", err)
	}
	cap := captured{stdout: out, trace: d.run(t, "trace"), report: report, shares: d.shares(t) - shares}
	after := d.counts(t)
	for _, e := range c.events {
		name, _, _ := strings.Cut(e, " ")
		a, b := counts[name], after[name]
		cap.counts = fmt.Appendf(cap.counts, "%s %d %d\n", name, b[0]-a[0], b[1]-a[1])
	}
	return cap
}
