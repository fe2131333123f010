package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/daemon/client"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/uetrace once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "uetrace-cli-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "uetrace")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building uetrace: %v", buildErr)
	}
	return binPath
}

// cli runs the binary against the daemon at sock and returns stdout,
// stderr and the exit status.
func cli(t *testing.T, sock string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"--backend", "daemon", "--socket", sock}, args...)...)
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
func background(t *testing.T, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	out := &syncBuffer{}
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

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // generous: ends when cond holds
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// needPerfmon skips a test that creates events through dynamic_events
// ("u:" lines are persistent events, which need CAP_PERFMON or
// CAP_SYS_ADMIN on the daemon as on the kernel) when this process has
// neither.
func needPerfmon(t *testing.T) {
	t.Helper()
	if !caps.PerfmonCapable(0) {
		t.Skip("needs CAP_PERFMON or CAP_SYS_ADMIN (root): it writes u: lines to dynamic_events")
	}
}

func startServe(t *testing.T) (string, *exec.Cmd, *syncBuffer) {
	sock := filepath.Join(t.TempDir(), "uetrace.sock")
	srv, log := background(t, "serve", "--socket", sock)
	eventually(t, "the daemon to answer", func() bool {
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
	needPerfmon(t)
	sock, srv, srvLog := startServe(t)

	if out := mustCLI(t, sock, "status"); !strings.Contains(out, "EVENT") || !strings.Contains(out, "Active: 0, Busy: 0") {
		t.Errorf("status of an empty daemon:\n%s", out)
	}

	const cmdText = "cli_req u32 status; __rel_loc char[] path"
	holder, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", cmdText)
	eventually(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

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
	eventually(t, "trace -f to print the record", func() bool { return strings.Contains(followOut.String(), want) })
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
	eventually(t, "cli_req to be deleted", func() bool {
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
	cmd := exec.Command(binary(t), "--socket", sock, "status")
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
	out, err := exec.Command(binary(t), "demo", "--duration", "3s").CombinedOutput()
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
