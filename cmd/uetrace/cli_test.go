package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Run(m)) }

// cli runs the binary against the daemon at sock and returns stdout,
// stderr and the exit status.
func cli(t *testing.T, sock string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(testutil.Uetrace(t), append([]string{"--backend", "daemon", "--socket", sock}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func mustCLI(t *testing.T, sock string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, sock, args...)
	if code != 0 {
		t.Fatalf("uetrace %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// background starts the binary and returns it with its stdout.
func background(t *testing.T, args ...string) (*exec.Cmd, *testutil.Buffer) {
	t.Helper()
	cmd := exec.Command(testutil.Uetrace(t), args...)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, out
}

func startServe(t *testing.T) (string, *exec.Cmd, *testutil.Buffer) {
	sock := filepath.Join(t.TempDir(), "uetrace.sock")
	srv, log := background(t, "serve", "--socket", sock)
	testutil.Wait(t, "the daemon to answer", func() bool {
		c, err := client.Dial(sock, nil)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return sock, srv, log
}

func TestCLIAgainstDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, srv, srvLog := startServe(t)

	if out := mustCLI(t, sock, "status"); !strings.Contains(out, "EVENT") || !strings.Contains(out, "Active: 0, Busy: 0") {
		t.Errorf("status of an empty daemon:\n%s", out)
	}

	const cmdText = "cli_req u32 status; __rel_loc char[] path"
	holder, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", cmdText)
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

	out := mustCLI(t, sock, "status")
	if !strings.Contains(out, "cli_req") || !strings.Contains(out, "u32 status; __rel_loc char[] path") {
		t.Errorf("status lacks the registered event:\n%s", out)
	}
	if out := mustCLI(t, sock, "enable", "cli_*"); out != "enabled user_events:cli_req\n" {
		t.Errorf("enable printed %q", out)
	}

	follower, followOut := background(t, "--backend", "daemon", "--socket", sock, "trace", "-f")
	mustCLI(t, sock, "emit", cmdText, "--field", "status=200", "--field", "path=/index.html")
	want := "cli_req: status=0xc8 (200) path=/index.html"
	if out := mustCLI(t, sock, "trace"); !strings.Contains(out, want) && !strings.Contains(followOut.String(), want) {
		t.Errorf("neither trace nor trace -f shows %q:\n%s", want, out)
	}
	testutil.Wait(t, "trace -f to print the record", func() bool { return strings.Contains(followOut.String(), want) })
	follower.Process.Signal(syscall.SIGINT)
	if err := follower.Wait(); err != nil {
		t.Errorf("trace -f after SIGINT: %v\n%s", err, followOut.String())
	}

	if out := mustCLI(t, sock, "cat", "events/user_events/cli_req/format"); !strings.Contains(out, "\tfield:u32 status;\toffset:8;\tsize:4;\tsigned:0;\n") {
		t.Errorf("format:\n%s", out)
	}
	if out := mustCLI(t, sock, "cat", "user_events_status"); !strings.HasPrefix(out, "cli_req # Used by ftrace\n") {
		t.Errorf("user_events_status:\n%s", out)
	}

	// Errors name the operation, the input and the errno; exit status 1.
	_, errs, code := cli(t, sock, "write", "dynamic_events", "u:x u32 a ")
	if code != 1 || !strings.HasPrefix(errs, `uetrace: write dynamic_events "u:x u32 a ": `) {
		t.Errorf("bad dynamic_events write: exit %d, %q", code, errs)
	}
	_, errs, code = cli(t, sock, "write", "dynamic_events", "u:cli_bad char[0] a")
	if code != 1 || errs != "uetrace: write dynamic_events \"u:cli_bad char[0] a\": invalid argument (EINVAL): field 1 \"char[0] a\": array length 0 is out of 1..1024\n" && !strings.Contains(errs, "(EINVAL)") {
		t.Errorf("bad field: exit %d, %q", code, errs)
	}
	_, errs, code = cli(t, sock, "delete", "cli_req")
	if code != 1 || !strings.Contains(errs, `delete "cli_req": device or resource busy (EBUSY)`) {
		t.Errorf("delete while held: exit %d, %q", code, errs)
	}
	_, errs, code = cli(t, sock, "enable", "nothing_like_this")
	if code != 1 || !strings.Contains(errs, "(ENOENT)") {
		t.Errorf("enable of nothing: exit %d, %q", code, errs)
	}

	// A persistent event through dynamic_events, then deleted.
	mustCLI(t, sock, "write", "dynamic_events", "u:cli_persist u64 n")
	if out := mustCLI(t, sock, "cat", "dynamic_events"); !strings.Contains(out, "u:cli_persist u64 n\n") {
		t.Errorf("dynamic_events:\n%s", out)
	}
	mustCLI(t, sock, "delete", "cli_persist")

	// Releasing the hold and the enable lets the event go.
	mustCLI(t, sock, "disable", "user_events:cli_req")
	holder.Process.Signal(syscall.SIGINT)
	holder.Wait()
	testutil.Wait(t, "cli_req to be deleted", func() bool {
		return !strings.Contains(mustCLI(t, sock, "cat", "user_events_status"), "cli_req")
	})

	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v\n%s", err, srvLog.String())
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind after SIGTERM: %v", err)
	}
}

func TestCLINoDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	_, errs, code := cli(t, sock, "status")
	if code != 1 || !strings.Contains(errs, sock) {
		t.Errorf("status without a daemon: exit %d, %q", code, errs)
	}
	cmd := exec.Command(testutil.Uetrace(t), "--socket", sock, "status")
	cmd.Env = append(os.Environ(), "UETRACE_SOCKET=")
	out, _ := cmd.CombinedOutput()
	if _, err := os.Stat("/sys/kernel/tracing/user_events_data"); err != nil && !strings.Contains(string(out), "uetrace serve") {
		t.Errorf("auto without kernel support or daemon should say to start one:\n%s", out)
	}
}

func TestCLIDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// The producer writes a request every 150 ms or so; the trace must
	// show some even when a loaded machine stalls it for a while.
	out, err := exec.Command(testutil.Uetrace(t), "demo", "--duration", "3s").CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"demo_http_request  user_events  32767  -      0        0        u32 status; u64 duration_ns; __rel_loc char[] path",
		"enabled user_events:demo_http_request",
		"demo_http_request: status=",
		"demo_cache_lookup: hit=",
		"Active: 3, Busy: 3",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
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

func statOf(t *testing.T, path string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
