package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

// needFUSE skips unless this test can mount FUSE: root, and /dev/fuse.
func needFUSE(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedFUSE(t, "mounting FUSE")
}

// runCmd runs uetrace with args under a deadline and returns its combined
// output and exit status (-1 with the signal when killed by one).
func runCmd(t *testing.T, bin string, cred *syscall.Credential, args ...string) (string, int, syscall.Signal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "UETRACE_SOCKET=")
	cmd.WaitDelay = 10 * time.Second
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = filepath.Dir(bin)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return string(out), -1, ws.Signal()
		}
		return string(out), ee.ExitCode(), 0
	case err != nil:
		t.Fatalf("uetrace %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), 0, 0
}

// The spec's shell session, through the files, by a program that knows
// nothing of uetrace.
func TestRunShell(t *testing.T) {
	needFUSE(t)
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c", `cd /sys/kernel/tracing
echo 'u:test u32 count' >> dynamic_events
cat dynamic_events
cat user_events_status
cat events/user_events/test/format | head -3
echo 1 > events/user_events/test/enable
cat events/user_events/enable
echo > trace
grep -c test trace
echo 'u:other u8 a' 2>/dev/null > dynamic_events || echo 'EBUSY: test is enabled'
echo 0 > events/user_events/test/enable
echo '-:test u32 count' >> dynamic_events
cat user_events_status`)
	want := `u:test u32 count
test

Active: 1
Busy: 0
name: test
ID: 32767
format:
1
0
EBUSY: test is enabled

Active: 0
Busy: 0
`
	if code != 0 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
}

// run passes on the command's status, as perf record does its workload's.
func TestRunExitStatus(t *testing.T) {
	needFUSE(t)
	if _, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exit 7 came back as %d", code)
	}
	if _, code, sig := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c", "kill -TERM $$"); code != -1 || sig != syscall.SIGTERM {
		t.Errorf("a command killed by SIGTERM: exit %d, signal %v", code, sig)
	}
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "no-such-command-here")
	if code != 127 || !strings.Contains(out, "no-such-command-here") {
		t.Errorf("a missing command: exit %d, %q; want 127 and its name", code, out)
	}
}

// With a daemon running, the tree is the daemon's: what the command
// registers, uetrace status outside shows.
func TestRunUsesDaemon(t *testing.T) {
	needFUSE(t)
	sock, _, _ := startServe(t)
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "--socket", sock, "run", "--", "sh", "-c",
		`echo 'u:from_run u32 x' >> /sys/kernel/tracing/dynamic_events && echo "$UETRACE_SOCKET"`)
	if code != 0 || out != sock+"\n" {
		t.Fatalf("run against the daemon: exit %d, %q", code, out)
	}
	if status := mustCLI(t, sock, "status"); !strings.Contains(status, "from_run") {
		t.Errorf("the daemon does not have the event the command created:\n%s", status)
	}
	// --private keeps the command to itself.
	out, code, _ = runCmd(t, testutil.Uetrace(t), nil, "--socket", sock, "run", "--private", "--", "sh", "-c",
		`cat /sys/kernel/tracing/user_events_status`)
	if code != 0 || strings.Contains(out, "from_run") {
		t.Errorf("--private saw the daemon's events: exit %d\n%s", code, out)
	}
}

// An ordinary user gets the tree through a user namespace of its own.
func TestRunUnprivileged(t *testing.T) {
	needFUSE(t)
	// nobody needs a uetrace it can reach, and a FUSE device it may open
	// (this machine's /dev/fuse is root's alone; distributions make it
	// 0666).
	dir, err := os.MkdirTemp("", "uetrace-run-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyBinary(t, dir)
	dev := filepath.Join(dir, "fuse")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))); err != nil {
		t.Skipf("mknod of a FUSE device: %v", err)
	}
	if err := os.Chmod(dev, 0o666); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	out, code, _ := runCmd(t, bin, nobody, "run", "--private", "--fuse-device", dev, "--", "sh", "-c",
		`id -u; cd /sys/kernel/tracing && echo 'u:mine u32 a' >> dynamic_events && cat user_events_status && stat -c '%U %a' user_events_data
if [ -e /proc/sys/kernel/ftrace_enabled ]; then echo 1 > /proc/sys/kernel/ftrace_enabled && echo written; else echo written; fi`)
	if strings.Contains(out, "user namespace") {
		t.Skipf("this kernel keeps ordinary users out of user namespaces: %s", out)
	}
	// ftrace_enabled is the command's own, which it may write as root of
	// its user namespace (trace-cmd record does; the host's it may not).
	want := "0\nmine\n\nActive: 1\nBusy: 0\nroot 640\nwritten\n"
	if code != 0 || out != want {
		t.Errorf("as nobody: exit %d\n%s\nwant:\n%s", code, out, want)
	}
	// Without a usable device it says what is wrong and what to do.
	out, code, _ = runCmd(t, bin, nobody, "run", "--private", "--", "true")
	if code == 0 || !strings.Contains(out, "/dev/fuse") || !strings.Contains(out, "0666") {
		t.Errorf("as nobody with a root-only /dev/fuse: exit %d, %q", code, out)
	}
}

func TestRunNoDevice(t *testing.T) {
	needFUSE(t)
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--fuse-device", "/nonexistent/fuse", "--", "true")
	if code == 0 || !strings.Contains(out, "no FUSE device") {
		t.Errorf("exit %d, %q; want the missing device explained", code, out)
	}
}

// serve --mount serves the tree on a directory; SIGTERM takes it away.
func TestServeMount(t *testing.T) {
	needFUSE(t)
	mnt := filepath.Join(t.TempDir(), "tracing")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "uetrace.sock")
	srv, log := background(t, "serve", "--socket", sock, "--mount", mnt)
	testutil.Wait(t, "the tree to be mounted", func() bool { return strings.Contains(log.String(), "through FUSE") })
	mustCLI(t, sock, "write", "dynamic_events", "u:mounted u32 a")
	// Only child processes look at the mount.
	out, code, _ := runCmd(t, "/bin/cat", nil, filepath.Join(mnt, "user_events_status"))
	if code != 0 || out != "mounted\n\nActive: 1\nBusy: 0\n" {
		t.Errorf("cat of the mounted status: exit %d, %q", code, out)
	}
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, log.String())
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), mnt) {
		t.Errorf("the mount outlived serve:\n%s", mi)
	}
}

// uetrace mount hands a mount of the running daemon's tree over; it is
// served until unmounted.
func TestMountRunningDaemon(t *testing.T) {
	needFUSE(t)
	sock, _, log := startServe(t)
	mnt := filepath.Join(t.TempDir(), "tracing")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	mustCLI(t, sock, "mount", mnt)
	mustCLI(t, sock, "write", "dynamic_events", "u:on_mount u32 a")
	out, code, _ := runCmd(t, "/bin/cat", nil, filepath.Join(mnt, "user_events_status"))
	if code != 0 || out != "on_mount\n\nActive: 1\nBusy: 0\n" {
		t.Errorf("cat of the mounted status: exit %d, %q", code, out)
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "FUSE mount handed over") {
		t.Errorf("the daemon's log does not tell of the mount:\n%s", log.String())
	}
	// Without a daemon there is nothing to mount.
	_, errs, code := cli(t, filepath.Join(t.TempDir(), "none.sock"), "mount", mnt)
	if code == 0 || !strings.Contains(errs, "uetrace serve") {
		t.Errorf("mount without a daemon: exit %d, %q", code, errs)
	}
}

func TestPtraceScope(t *testing.T) {
	for _, scope := range []string{"0", "1"} {
		if err := ptraceScope(scope); err != nil {
			t.Errorf("ptrace_scope %s: %v", scope, err)
		}
	}
	for _, scope := range []string{"2", "3"} {
		err := ptraceScope(scope)
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "ptrace_scope is "+scope) || !strings.Contains(err.Error(), "as root") {
			t.Errorf("ptrace_scope %s: %v; want EPERM saying what and what to do", scope, err)
		}
	}
}

// TestRunPreload: uetrace run with a daemon preloads the interposer into a
// dynamically linked command, whose writes then go through a ring the
// daemon takes (its status counts the share) and reach its trace; with
// --no-preload they go through FUSE and reach it all the same.
func TestRunPreload(t *testing.T) {
	needFUSE(t)
	if runtime.GOARCH != "amd64" {
		t.Skip("the interposer is amd64's")
	}
	prog := testutil.BuildC(t, "", filepath.Join("testdata", "preloaded.c"), "-O2", "-Wall", "-Werror")
	sock, _, _ := startServe(t)
	for _, tc := range []struct {
		flags  []string
		want   string
		shares string
	}{
		{nil, "shares 1 fallbacks 0\n", "interposer_shares 1\n"},
		{[]string{"--no-preload"}, "no interposer\n", "interposer_shares 1\n"},
	} {
		args := append(append([]string{"--socket", sock, "run"}, tc.flags...), "--", prog)
		out, code, _ := runCmd(t, testutil.Uetrace(t), nil, args...)
		if code != 0 || out != tc.want {
			t.Errorf("uetrace %s: exit %d, %q; want %q", strings.Join(args, " "), code, out, tc.want)
		}
		if st := mustCLI(t, sock, "status"); !strings.Contains(st, tc.shares) {
			t.Errorf("after %s, the daemon's status lacks %q:\n%s", strings.Join(tc.flags, " "), tc.shares, st)
		}
	}
	if n := strings.Count(mustCLI(t, sock, "trace"), "run_ip: n="); n != 20 {
		t.Errorf("%d run_ip records in the daemon's trace, want 20", n)
	}
}
