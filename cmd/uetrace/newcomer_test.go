package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/uetrace/uetrace/internal/testutil"
)

// The fixes a newcomer's first hour asked for: each message names its errno
// once and says what to do; -i where perf script takes it; one default per
// flag; an unknown command points to the list; mount points made.

// runCLI runs the binary with args (no daemon) and returns stdout, stderr and
// the exit status.
func runCLI(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.Uetrace(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

func TestCLIUnknownCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, tc := range []struct{ arg, want string }{
		{"tarce", `uetrace: unknown command "tarce" (did you mean trace?): invalid argument (EINVAL): uetrace --help lists the commands`},
		{"xyzzyq", `uetrace: unknown command "xyzzyq": invalid argument (EINVAL): uetrace --help lists the commands`},
	} {
		_, stderr, code := runCLI(t, nil, tc.arg)
		if strings.TrimSpace(stderr) != tc.want || code != 1 {
			t.Errorf("uetrace %s: exit %d, stderr\n%s\nwant exit 1 and\n%s", tc.arg, code, stderr, tc.want)
		}
	}
	// uetrace alone is still the help, exit 0.
	if out, _, code := runCLI(t, nil); code != 0 || !strings.Contains(out, "Available Commands:") {
		t.Errorf("uetrace alone: exit %d\n%s", code, out)
	}
}

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

// TestCLIOneErrnoPerMessage: a value that does not fit its field names
// EINVAL once (it was "invalid argument (EINVAL): invalid argument
// (EINVAL): …").
func TestCLIOneErrnoPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	_, stderr, code := runCLI(t, nil, "--backend", "inprocess", "emit", "big_ev u32 status", "--field", "status=99999999999")
	want := `uetrace: emit "big_ev u32 status": invalid argument (EINVAL): field 1 "status": 99999999999 does not fit u32`
	if strings.TrimSpace(stderr) != want || code != 1 {
		t.Errorf("exit %d, stderr\n%s\nwant exit 1 and\n%s", code, stderr, want)
	}
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

// TestCLIEmitSaysWhy: emit of an event nobody attached to says why nothing
// was written and what makes it work — the old hint, uetrace enable NAME,
// failed with ENOENT for an event emit itself created, gone with it.
func TestCLIEmitSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	_, stderr, code := cli(t, sock, "emit", "why_ev u32 x", "--field", "x=1")
	want := `uetrace: emit why_ev: nothing written: the event did not exist before this emit, so nothing was attached to it, and it goes when emit exits; keep it registered (uetrace register --hold 'why_ev u32 x', in another terminal), attach to it (uetrace enable why_ev, or uetrace record -e why_ev), then emit again`
	if strings.TrimSpace(stderr) != want || code != 0 {
		t.Errorf("emit of a new event: exit %d, stderr\n%s\nwant\n%s", code, stderr, want)
	}
	// Following the advice works: held, then enabled, emit writes.
	hold, holdLog := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "why_ev u32 x")
	testutil.Wait(t, "register --hold to hold why_ev", func() bool { return strings.Contains(holdLog.String(), "holding") })
	_, stderr, code = cli(t, sock, "emit", "why_ev u32 x", "--field", "x=1")
	want = `uetrace: emit why_ev: nothing written: nothing is attached to the event (no trace, record or perf); attach to it (uetrace enable why_ev, or uetrace record -e why_ev), then emit again`
	if strings.TrimSpace(stderr) != want || code != 0 {
		t.Errorf("emit of a held event: exit %d, stderr\n%s\nwant\n%s", code, stderr, want)
	}
	if os.Geteuid() == 0 { // enable writes an enable file: a tracer's
		mustCLI(t, sock, "enable", "why_ev")
		if _, stderr, code = cli(t, sock, "emit", "why_ev u32 x", "--field", "x=7"); stderr != "" || code != 0 {
			t.Errorf("emit of an enabled event: exit %d, stderr\n%s", code, stderr)
		}
		testutil.Wait(t, "the record emit wrote in the trace", func() bool {
			return strings.Contains(mustCLI(t, sock, "cat", "trace"), "why_ev: x=0x7 (7)")
		})
	}
	hold.Process.Kill()
}

// TestCLIMountPoint: uetrace mount and serve --mount make a mount point that
// does not exist yet (the README's /run/uetrace/tracing on a fresh machine).
func TestCLIMountPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedFUSE(t, "mounting FUSE")
	sock, _, _ := startServe(t)
	dir := filepath.Join(t.TempDir(), "not", "yet", "tracing")
	if _, stderr, code := cli(t, sock, "mount", dir); code != 0 {
		t.Fatalf("mount %s: exit %d\n%s", dir, code, stderr)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	if b, err := os.ReadFile(filepath.Join(dir, "user_events_status")); err != nil || !bytes.Contains(b, []byte("Active:")) {
		t.Errorf("the mounted tree: %v\n%s", err, b)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, stderr, code := cli(t, sock, "mount", file); code == 0 || !strings.Contains(stderr, "is not a directory") {
		t.Errorf("mount on a file: exit %d\n%s", code, stderr)
	}
}
