package tracefsns

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: a mount namespace needs CAP_SYS_ADMIN")
	}
}

// run starts sh -c script through Start and returns its output.
func run(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := Start(cmd, dir); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

func TestStartBindsTracing(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "user_events_status"), []byte("\nActive: 0\nBusy: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, dir, "cat /sys/kernel/tracing/user_events_status")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out != "\nActive: 0\nBusy: 0\n" {
		t.Errorf("the program read %q, want the bound directory's file", out)
	}
	// Nothing of it is visible outside: this process's namespace and the
	// machine's are untouched.
	if _, err := os.Stat("/sys/kernel/tracing/user_events_status"); err == nil {
		if b, _ := os.ReadFile("/sys/kernel/tracing/user_events_status"); string(b) == out {
			t.Fatal("the bind mount leaked into the caller's mount namespace")
		}
	}
}

func TestStartMountsDoNotPropagate(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	// The program mounts a tmpfs inside the tree; had / stayed shared the
	// mount would appear here.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, dir, "mount -t tmpfs none "+sub+" && echo mounted")
	if err != nil || !strings.Contains(out, "mounted") {
		t.Fatalf("%v: %s", err, out)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), sub) {
		t.Errorf("a mount made in the program's namespace propagated to the caller's:\n%s", mi)
	}
}

func TestStartManyTimes(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "trace"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every call gets a fresh namespace and leaves none behind on this
	// process's threads: the caller's /sys/kernel/tracing never shows dir.
	for i := 0; i < 20; i++ {
		out, err := run(t, dir, "cat /sys/kernel/tracing/trace")
		if err != nil || out != "x" {
			t.Fatalf("run %d: %v %q", i, err, out)
		}
		if b, err := os.ReadFile("/sys/kernel/tracing/trace"); err == nil && string(b) == "x" {
			t.Fatalf("run %d: this process's thread saw the program's namespace", i)
		}
	}
}

func TestStartNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := Start(exec.Command("true"), f)
	if !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("Start on a file = %v, want ENOTDIR", err)
	}
	if err := Start(exec.Command("true"), filepath.Join(f, "missing")); err == nil {
		t.Fatal("Start on a missing directory succeeded")
	}
}

// TestStartUnprivileged runs this test binary as nobody: Start must fail
// with EPERM and say what is needed, and start nothing.
func TestStartUnprivileged(t *testing.T) {
	if os.Getenv("TRACEFSNS_AS_NOBODY") == "1" {
		err := Start(exec.Command("true"), os.TempDir())
		if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") {
			os.Stdout.WriteString("unexpected: " + errString(err) + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ok: " + err.Error() + "\n")
		os.Exit(0)
	}
	needRoot(t)
	// The test binary sits in go's private build directory; nobody needs a
	// copy it can reach.
	dir, err := os.MkdirTemp("", "tracefsns-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "tracefsns.test")
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestStartUnprivileged$")
	cmd.Env = append(os.Environ(), "TRACEFSNS_AS_NOBODY=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "ok: ") {
		t.Fatalf("as nobody: %s", out)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
