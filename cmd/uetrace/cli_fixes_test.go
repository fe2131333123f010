package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// These tests run the built binary (issue 14, item 3: CLI fixes).

// dynamicEvents is the daemon's dynamic_events.
func dynamicEvents(t *testing.T, sock string) string {
	t.Helper()
	return mustCLI(t, sock, "cat", "dynamic_events")
}

// Every dynamic_events delete line the kernel takes passes through
// `uetrace write dynamic_events LINE` unchanged — with and without "--" —
// and deletes what it names; flags still work around it.
func TestCLIWriteDashData(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	for i, tc := range []struct {
		create string // the event, as a dynamic_events line
		del    string // the delete line, as the kernel takes it
	}{
		{"u:dash_a", "-:dash_a"},
		{"u:dash_b u32 x", "-:dash_b u32 x"},
		{"u:dash_c u32 x", "-:user_events/dash_c u32 x"},
		{"u:dash_d u32 x; u32 y", "!u:dash_d u32 x; u32 y"},
		{"u:dash_e u32 x; u32 y", "-:dash_e u32 x; u32 y"},
		{"u:dash_f u32 x", "-:dash_f u32 x # a comment"},
		{"u:dash_g", "-:dash_g\n"},
		{"u:dash_h char[16] s", "-:dash_h char[16] s"},
		{"u:dash_i __rel_loc char[] p", "-:dash_i __rel_loc char[] p"},
		{"u:dash_j struct foo f 8", "-:dash_j struct foo f 8"},
		{"u:dash_k u64 n", "\n-:dash_k u64 n\n\n"},
		{"u:dash_l s8 a", "!x:dash_l s8 a"},
	} {
		name := strings.Fields(strings.TrimPrefix(tc.create, "u:"))[0]
		for _, dashdash := range []bool{false, true} {
			mustCLI(t, sock, "write", "dynamic_events", tc.create)
			if !strings.Contains(dynamicEvents(t, sock), tc.create+"\n") {
				t.Fatalf("%d: %q was not created", i, tc.create)
			}
			args := []string{"write", "dynamic_events", tc.del}
			if dashdash {
				args = []string{"write", "dynamic_events", "--", tc.del}
			}
			if out, errs, code := cli(t, sock, args...); code != 0 {
				t.Errorf("uetrace %q: exit %d\n%s%s", args, code, out, errs)
			}
			if de := dynamicEvents(t, sock); strings.Contains(de, "u:"+name+" ") || strings.Contains(de, "u:"+name+"\n") {
				t.Errorf("uetrace %q left %s:\n%s", args, name, de)
			}
		}
	}

	// A multi-line write with a create and its delete.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_m u32 a\n-:dash_m u32 a\n")
	if de := dynamicEvents(t, sock); strings.Contains(de, "dash_m") {
		t.Errorf("create-then-delete left dash_m:\n%s", de)
	}

	// Flags before and after the data still are flags; --trunc still works.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_n u32 a")
	cmd := exec.Command(testutil.Uetrace(t), "write", "dynamic_events", "-:dash_n u32 a", "--backend", "daemon", "--socket", sock)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("flags after a dash TEXT: %v\n%s", err, out)
	}
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_o u32 a")
	mustCLI(t, sock, "write", "--trunc", "dynamic_events", "")
	if de := dynamicEvents(t, sock); de != "" {
		t.Errorf("write --trunc dynamic_events '' left:\n%s", de)
	}
	// "--" itself, after a "--", is the text.
	_, errs, code := cli(t, sock, "write", "dynamic_events", "--", "--")
	if code != 1 || !strings.HasPrefix(errs, `uetrace: write dynamic_events "--": invalid argument (EINVAL)`) {
		t.Errorf(`write dynamic_events -- --: exit %d, %q`, code, errs)
	}
	// A negative value and dash-led patterns are data too.
	mustCLI(t, sock, "write", "dynamic_events", "u:dash_p s32 v")
	hold, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "dash_q s32 v")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })
	mustCLI(t, sock, "enable", "dash_q")
	mustCLI(t, sock, "emit", "dash_q s32 v", "--field", "v=-5")
	if out := mustCLI(t, sock, "trace"); !strings.Contains(out, "dash_q: v=0xfffffffb (-5)") {
		t.Errorf("emit v=-5: trace:\n%s", out)
	}
	if _, errs, code := cli(t, sock, "enable", "-nosuch"); code != 1 || errs != "uetrace: enable \"-nosuch\": no such file or directory (ENOENT): no event matches (uetrace status lists them)\n" {
		t.Errorf("enable -nosuch: exit %d, %q", code, errs)
	}
	if _, errs, code := cli(t, sock, "write", "events/user_events/dash_q/enable", "-1"); code != 1 || !strings.HasPrefix(errs, `uetrace: write events/user_events/dash_q/enable "-1": invalid argument (EINVAL)`) {
		t.Errorf("write enable -1: exit %d, %q", code, errs)
	}
	hold.Process.Signal(syscall.SIGINT)
	hold.Wait()
}

// A delete that names an existing event without its fields is ENOENT, as
// in Linux, and says which fields to give.
func TestCLIDeleteHint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	mustCLI(t, sock, "write", "dynamic_events", "u:myev u32 a; char[8] b")
	for _, tc := range []struct{ line, want string }{
		{"!u:myev", `uetrace: write dynamic_events "!u:myev": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		{"-:myev u32 a", `uetrace: write dynamic_events "-:myev u32 a": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		// The delete path does not re-space ';' (spec §6.4).
		{"-:myev u32 a;char[8] b", `uetrace: write dynamic_events "-:myev u32 a;char[8] b": no such file or directory (ENOENT): event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
		{"-:nosuch", `uetrace: write dynamic_events "-:nosuch": no such file or directory (ENOENT): no event nosuch to delete` + "\n"},
		{"-:kprobes/myev u32 a; char[8] b", `uetrace: write dynamic_events "-:kprobes/myev u32 a; char[8] b": no such file or directory (ENOENT): no user event in system "kprobes": user events are in user_events or user_events_multi` + "\n"},
		{"u:other u32 x\n!u:myev", `uetrace: write dynamic_events "u:other u32 x\n!u:myev": no such file or directory (ENOENT): line "!u:myev": event myev exists, but a delete must list its fields exactly as its dynamic_events line does: u:myev u32 a; char[8] b (delete it with "-:myev u32 a; char[8] b")` + "\n"},
	} {
		_, errs, code := cli(t, sock, "write", "dynamic_events", tc.line)
		if code != 1 || errs != tc.want {
			t.Errorf("write dynamic_events %q: exit %d\n got %q\nwant %q", tc.line, code, errs, tc.want)
		}
	}
	mustCLI(t, sock, "write", "dynamic_events", "-:myev u32 a; char[8] b")
	if de := dynamicEvents(t, sock); strings.Contains(de, "myev") {
		t.Errorf("the hinted delete left myev:\n%s", de)
	}
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

func TestCLIVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testutil.Uetrace(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	out2, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(out2) {
		t.Errorf("--version %q, version %q", out, out2)
	}
	// What `go version -m` reads from the binary is what it must say.
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "uetrace "
	var rev, modified, goVersion string
	for i, line := range strings.Split(string(info), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case i == 0:
			_, goVersion, _ = strings.Cut(line, ": ")
		case len(f) >= 3 && f[0] == "mod":
			want += f[2]
		case len(f) == 2 && f[0] == "build":
			if v, ok := strings.CutPrefix(f[1], "vcs.revision="); ok {
				rev = v
			}
			if v, ok := strings.CutPrefix(f[1], "vcs.modified="); ok {
				modified = v
			}
		}
	}
	if rev != "" {
		want += " rev " + rev[:12]
		if modified == "true" {
			want += " (modified)"
		}
	}
	want += " " + strings.TrimSpace(goVersion) + "\n"
	if string(out) != want {
		t.Errorf("--version %q, want %q (from go version -m)", out, want)
	}
}

func TestVersionOf(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}}
	if got := versionOf(bi); got != "uetrace (devel) go1.26.1" {
		t.Errorf("no VCS: %q", got)
	}
	bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "abc1234def567890"}, {Key: "vcs.modified", Value: "true"}}
	if got := versionOf(bi); got != "uetrace (devel) rev abc1234def56 (modified) go1.26.1" {
		t.Errorf("modified: %q", got)
	}
	bi.Main.Version, bi.Settings[1].Value = "v1.2.3", "false"
	if got := versionOf(bi); got != "uetrace v1.2.3 rev abc1234def56 go1.26.1" {
		t.Errorf("release: %q", got)
	}
}

// exitOf is how a finished command ended: its exit code, or the signal
// that killed it.
func exitOf(ps *os.ProcessState) (int, syscall.Signal) {
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// record -- CMD: CMD's exit status is uetrace's, as perf record's is.
func TestCLIRecordWorkloadStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	// An event to record: a recording that matches none fails.
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "ws_ev u32 a")
	testutil.Wait(t, "the event to be registered", func() bool { return strings.Contains(holdOut.String(), "holding") })
	dir := t.TempDir()
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 3", 3, 0},
		{"exit 0", 0, 0},
		{"kill -USR1 $$", -1, syscall.SIGUSR1},
	} {
		out := filepath.Join(dir, "w.data")
		cmd := exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-q", "-o", out, "--", "sh", "-c", tc.script)
		b, _ := cmd.CombinedOutput()
		if code, sig := exitOf(cmd.ProcessState); code != tc.code || sig != tc.sig {
			t.Errorf("record -- sh -c %q: exit %d signal %v, want %d %v\n%s", tc.script, code, sig, tc.code, tc.sig, b)
		}
		if _, err := exec.Command(testutil.Uetrace(t), "report", out).CombinedOutput(); err != nil {
			t.Errorf("report after sh -c %q: %v", tc.script, err)
		}
	}
}

// SIGINT to uetrace record -- CMD: CMD gets SIGTERM (perf's kill of the
// workload), uetrace stops at once with the workload's status — killed by
// SIGTERM, re-raised as perf's record__sig_exit does — and the file is
// complete.
func TestCLIRecordInterruptWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "i.data"), filepath.Join(dir, "pid")
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "rec_int u32 n")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

	rec, recOut := background(t, "--backend", "daemon", "--socket", sock, "record", "-q", "-e", "rec_int", "-o", out,
		"--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 1000")
	var pid int
	testutil.Wait(t, "the workload to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil && pid > 0
	})
	// emit writes only once the recording has enabled the event.
	testutil.Wait(t, "emit to write a record", func() bool {
		_, errs, code := cli(t, sock, "emit", "rec_int u32 n", "--field", "n=77")
		return code == 0 && !strings.Contains(errs, "not enabled")
	})

	sent := time.Now()
	rec.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { rec.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("record still running 30s after SIGINT (the workload was sleep 1000)\n%s", recOut.String())
	}
	t.Logf("record exited %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	if code, sig := exitOf(rec.ProcessState); sig != syscall.SIGTERM {
		t.Errorf("record after SIGINT: exit %d signal %v, want killed by SIGTERM (the workload's)\n%s", code, sig, recOut.String())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the workload (pid %d) is still there: %v", pid, err)
	}
	if !strings.Contains(recOut.String(), "[ uetrace record: 1 samples of 1 events in ") {
		t.Errorf("no summary of one sample:\n%s", recOut.String())
	}
	rep, err := exec.Command(testutil.Uetrace(t), "report", out).CombinedOutput()
	if err != nil || !strings.Contains(string(rep), "rec_int: n=") || !strings.Contains(string(rep), "77") {
		t.Errorf("report of the interrupted recording: %v\n%s", err, rep)
	}
}

// register --hold exits, naming the socket, when its daemon goes.
func TestCLIHoldDaemonGone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, srv, _ := startServe(t)
	hold, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "gone_ev u32 a")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })
	srv.Process.Kill()
	done := make(chan struct{})
	go func() { hold.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("register --hold still running 30s after its daemon was killed\n%s", holdOut.String())
	}
	want := `uetrace: register --hold "gone_ev": connection reset by peer (ECONNRESET): the daemon at ` + sock + ` hung up (it exited or dropped this client): the registration is gone`
	if code, _ := exitOf(hold.ProcessState); code != 1 || !strings.Contains(holdOut.String(), want) {
		t.Errorf("register --hold after the daemon died: exit %d\n%s\nwant %s", code, holdOut.String(), want)
	}
}

// copyBinary puts the binary where another user can run it.
func copyBinary(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.Open(testutil.Uetrace(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, "uetrace")
	dst, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// asNobody runs the binary as uid/gid 65534 and returns its stderr and
// exit code.
func asNobody(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "UETRACE_SOCKET="}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// serve --mode and --group set who may connect; a client refused says
// whose socket it is and what to do.
func TestCLISocketAccess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedRoot(t, "connect as another user")
	// A directory other users can reach, for the binary and the daemons.
	base, err := os.MkdirTemp("", "uetrace-access")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyBinary(t, base)
	serve := func(dir string, args ...string) string {
		sock := filepath.Join(base, dir, "uetrace.sock")
		srv, _ := background(t, append([]string{"serve", "--socket", sock}, args...)...)
		testutil.Wait(t, "the daemon to listen", func() bool { _, err := os.Stat(sock); return err == nil })
		testutil.Wait(t, "the daemon to answer", func() bool { _, _, code := cli(t, sock, "status"); return code == 0 })
		t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
		return sock
	}
	rootName, rootGroup := nameOf(t, 0, false), nameOf(t, 0, true)

	// The default, 0660 and root's group: a stranger is told whose it is.
	sock := serve("default")
	want := fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0660): ask to be added to its group, or start your own with uetrace serve\n", sock, rootName, rootGroup)
	if out, code := asNobody(t, bin, "--socket", sock, "status"); code != 1 || out != want {
		t.Errorf("uid 65534 on root's default daemon: exit %d\n got %q\nwant %q", code, out, want)
	}

	// 0600: the other user is refused by the socket, and told so.
	sock = serve("private", "--mode", "0600")
	st := statOf(t, sock)
	if st.Mode&0o777 != 0o600 {
		t.Errorf("--mode 0600: socket mode %04o", st.Mode&0o777)
	}
	if dst := statOf(t, filepath.Dir(sock)); dst.Mode&0o777 != 0o700 {
		t.Errorf("--mode 0600: directory mode %04o, want 0700", dst.Mode&0o777)
	}
	// The directory keeps nobody out: 0600 is the socket's own refusal.
	os.Chmod(filepath.Dir(sock), 0o755)
	want = fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0600): ask to be added to its group, or start your own with uetrace serve\n", sock, rootName, rootGroup)
	for _, backend := range []string{"daemon", "auto"} {
		out, code := asNobody(t, bin, "--backend", backend, "--socket", sock, "status")
		if code != 1 || out != want {
			t.Errorf("--backend %s as uid 65534 on a 0600 socket: exit %d\n got %q\nwant %q", backend, code, out, want)
		}
	}
	out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "register", "x u32 a")
	if code != 1 || out != want {
		t.Errorf("register as uid 65534 on a 0600 socket: exit %d\n got %q\nwant %q", code, out, want)
	}
	// A directory that refuses is named instead.
	os.Chmod(filepath.Dir(sock), 0o700)
	out, _ = asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status")
	if want := fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0700): ask to be added to its group, or start your own with uetrace serve\n", filepath.Dir(sock), rootName, rootGroup); out != want {
		t.Errorf("refused by the directory:\n got %q\nwant %q", out, want)
	}

	// --group: the socket and its directory get the group, whose members
	// may connect.
	group := nameOf(t, 65534, true)
	sock = serve("shared", "--group", group)
	if st := statOf(t, sock); st.Gid != 65534 || st.Mode&0o777 != 0o660 {
		t.Errorf("--group %s: socket gid %d mode %04o, want 65534 0660", group, st.Gid, st.Mode&0o777)
	}
	if st := statOf(t, filepath.Dir(sock)); st.Gid != 65534 || st.Mode&0o777 != 0o750 {
		t.Errorf("--group %s: directory gid %d mode %04o, want 65534 0750", group, st.Gid, st.Mode&0o777)
	}
	if out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status"); code != 0 {
		t.Errorf("a member of --group %s: exit %d\n%s", group, code, out)
	}

	// --mode 0666: everyone.
	sock = serve("open", "--mode", "0666")
	if st := statOf(t, sock); st.Mode&0o777 != 0o666 {
		t.Errorf("--mode 0666: socket mode %04o", st.Mode&0o777)
	}
	if out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status"); code != 0 {
		t.Errorf("anyone on a 0666 socket: exit %d\n%s", code, out)
	}
}

func statOf(t *testing.T, path string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// nameOf is the user or group name of an id, as the error shows it.
func nameOf(t *testing.T, id int, group bool) string {
	t.Helper()
	s := strconv.Itoa(id)
	if group {
		if g, err := user.LookupGroupId(s); err == nil {
			return g.Name
		}
		return s
	}
	if u, err := user.LookupId(s); err == nil {
		return u.Username
	}
	return s
}
