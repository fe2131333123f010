package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
)

// The tool's messages: each names its errno once and says what to do.

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

// Each error names the command the user gave, the input, the errno once
// and the reason.
func TestCLIErrorTexts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	mustCLI(t, sock, "write", "dynamic_events", "u:err_ev u32 a")
	for _, tc := range []struct {
		args []string
		want string // the whole of stderr
	}{
		{[]string{"enable", "nosuch"}, `enable "nosuch": no such file or directory (ENOENT): no event matches (uetrace status lists them)`},
		{[]string{"disable", "nosuch"}, `disable "nosuch": no such file or directory (ENOENT): no event matches (uetrace status lists them)`},
		{[]string{"enable", "[x"}, `enable "[x": invalid argument (EINVAL): bad glob pattern: syntax error in pattern`},
		{[]string{"enable", "[x:y"}, `enable "[x:y": invalid argument (EINVAL): bad glob pattern in the system part: syntax error in pattern`},
		{[]string{"enable"}, `enable: invalid argument (EINVAL): takes one or more EVENT patterns, got none; see uetrace enable --help`},
		{[]string{"write", "nosuch", "1"}, `write nosuch "1": no such file or directory (ENOENT)`},
		{[]string{"write", "../x", "1"}, `write ../x "1": no such file or directory (ENOENT): the path leaves the tracefs tree`},
		{[]string{"write", "dynamic_events"}, `write: invalid argument (EINVAL): takes PATH TEXT, got 1 argument ("dynamic_events"); see uetrace write --help`},
		{[]string{"write", "dynamic_events", "u:x char[0] a"}, `write dynamic_events "u:x char[0] a": invalid argument (EINVAL): field 1 "char[0] a": array length is 0`},
		{[]string{"write", "events/user_events/err_ev/enable", "7"}, `write events/user_events/err_ev/enable "7": invalid argument (EINVAL): enable takes 0 or 1, not 7`},
		{[]string{"register", "x u32 a b"}, `register "x u32 a b": invalid argument (EINVAL): field 1 "u32 a b": only struct fields take a size ("b" after the name)`},
		{[]string{"register", "err_ev u64 a"}, `register "err_ev u64 a": address already in use (EADDRINUSE): event "err_ev" exists with other fields (u32 a)`},
		{[]string{"register", "a", "b"}, `register: invalid argument (EINVAL): takes COMMAND, got 2 arguments ("a" "b"); see uetrace register --help`},
		{[]string{"delete", "nosuch"}, `delete "nosuch": no such file or directory (ENOENT): no such event`},
		{[]string{"emit", "err_ev u64 a"}, `emit "err_ev u64 a": address already in use (EADDRINUSE): event "err_ev" exists with other fields (u32 a)`},
		{[]string{"emit", "err_ev u32 a", "--field", "b=1"}, `emit "err_ev u32 a": invalid argument (EINVAL): --field "b=1": the event has no field b`},
		{[]string{"emit", "err_ev u32 a", "--field", "a=zz"}, `emit "err_ev u32 a": invalid argument (EINVAL): --field "a=zz": u32 a takes an integer`},
		{[]string{"emit", "err_ev u32 a", "--field", "a"}, `emit "err_ev u32 a": invalid argument (EINVAL): --field "a": a field is name=value`},
		{[]string{"cat", "nosuch"}, `cat nosuch: no such file or directory (ENOENT)`},
		{[]string{"trace", "x"}, `trace: invalid argument (EINVAL): takes no arguments ("x"); see uetrace trace --help`},
		{[]string{"status", "x"}, `status: invalid argument (EINVAL): takes no arguments ("x"); see uetrace status --help`},
		{[]string{"describe", "x u32"}, `describe "x u32": invalid argument (EINVAL): field 1 "u32": field "u32" has no name`},
		{[]string{"--backend", "foo", "status"}, `--backend "foo": invalid argument (EINVAL): unknown backend: want auto, kernel, daemon or inprocess`},
		{[]string{"serve", "--mode", "999"}, `serve --mode "999": invalid argument (EINVAL): the mode is octal permission bits, e.g. 0660 or 0666`},
		{[]string{"serve", "--mode", "01666"}, `serve --mode "01666": invalid argument (EINVAL): only the permission bits (at most 0777) may be set`},
		{[]string{"serve", "--mode", "0066"}, `serve --mode "0066": invalid argument (EINVAL): the owner must keep read and write (0600)`},
		{[]string{"write", "--trnc", "dynamic_events", "u:x"}, `write: invalid argument (EINVAL): unknown flag: --trnc; see uetrace write --help`},
		{[]string{"write", "dynamic_events", "--:x"}, `write dynamic_events "--:x": invalid argument (EINVAL): "--:x": a '-' delete must be followed by ':'`},
		{[]string{"top", "-d", "0"}, `top --delay "0s": invalid argument (EINVAL): the delay between refreshes must be positive`},
		{[]string{"record", "--pid", "-3"}, `record --pid "-3": invalid argument (EINVAL): a process id is a positive number`},
		{[]string{"serve", "--group", "no_such_group_xyz"}, `serve --group "no_such_group_xyz": invalid argument (EINVAL): no such group (see /etc/group)`},
	} {
		_, errs, code := cli(t, sock, tc.args...)
		if want := "uetrace: " + tc.want + "\n"; code != 1 || errs != want {
			t.Errorf("uetrace %q: exit %d\n got %q\nwant %q", tc.args, code, errs, want)
		}
		if strings.Count(errs, "(E") > 1 {
			t.Errorf("uetrace %q: the errno more than once: %q", tc.args, errs)
		}
	}

	// Without a daemon: the socket, the errno once, what to do.
	none := filepath.Join(t.TempDir(), "none.sock")
	_, errs, code := cli(t, none, "status")
	if want := "uetrace: connect " + none + ": no such file or directory (ENOENT): no uetrace daemon there: start one with `uetrace serve`\n"; code != 1 || errs != want {
		t.Errorf("status without a daemon: exit %d\n got %q\nwant %q", code, errs, want)
	}
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

// TestCLIPreloadMakesItsDirectory: uetrace preload into a directory that
// does not exist yet — the README's /usr/local/lib/uetrace on a fresh
// machine — creates it, as install -D does, and writes the library there;
// it failed with "open …/.libuetrace-preload.so.NNN: no such file or
// directory", naming a temporary file the user never asked for.
func TestCLIPreloadMakesItsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the interposer is amd64's")
	}
	lib := filepath.Join(t.TempDir(), "lib", "uetrace", "libuetrace-preload.so")
	out, stderr, code := runCLI(t, nil, "preload", lib)
	if code != 0 || !strings.HasPrefix(out, "wrote "+lib+" (") {
		t.Fatalf("uetrace preload %s: exit %d, %q %q", lib, code, out, stderr)
	}
	if b, err := os.ReadFile(lib); err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
		t.Errorf("%s: %v, %d bytes; want the library, an ELF file", lib, err, len(b))
	}
}
