package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

// notifySocket binds a datagram socket for sd_notify's messages in dir.
func notifySocket(t *testing.T, dir string) (string, int) {
	t.Helper()
	path := filepath.Join(dir, "notify")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(2 * time.Minute))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return path, fd
}

// notified reads the next sd_notify message.
func notified(t *testing.T, fd int) string {
	t.Helper()
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		t.Fatalf("no notification from the daemon: %v", err)
	}
	return string(buf[:n])
}

// TestServeAsService runs serve as systemd runs the units in dist/systemd:
// socket-activated by systemd's own systemd-socket-activate (the socket
// made before the daemon, the first client's connection starting it), and
// Type=notify (READY=1 once it serves, STOPPING=1 when it stops). The
// client the activation queued is served; the socket file, the manager's,
// stays when the daemon stops.
func TestServeAsService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("no systemd-socket-activate (Debian's systemd package)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "uetrace.sock")
	notify, nfd := notifySocket(t, dir)
	cmd := exec.Command(activate, "--seqpacket", "-l", sock, "-E", "NOTIFY_SOCKET="+notify, testutil.Uetrace(t), "serve")
	var log testutil.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	testutil.Wait(t, "systemd-socket-activate to listen", func() bool { _, err := os.Stat(sock); return err == nil })

	// The first connection starts the daemon, which serves it.
	out, stderr, code := cli(t, sock, "status")
	if code != 0 || !strings.Contains(out, "Active: 0") {
		t.Fatalf("status through the activated socket: exit %d\n%s%s\n%s", code, out, stderr, log.String())
	}
	if got, want := notified(t, nfd), "READY=1\nSTATUS=serving user_events on "+sock; got != want {
		t.Errorf("readiness: %q, want %q", got, want)
	}
	if !strings.Contains(log.String(), "socket_activated=true") {
		t.Errorf("the daemon did not take the passed socket:\n%s", log.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if got := notified(t, nfd); got != "STOPPING=1" {
		t.Errorf("stopping: %q", got)
	}
	cmd.Wait()
	if _, err := os.Stat(sock); err != nil {
		t.Errorf("the socket file, the service manager's, went with the daemon: %v", err)
	}
}

// TestSystemdUnits checks dist/systemd with systemd's own verifier: no
// unknown key, no bad value, an ExecStart that is this build's uetrace
// with arguments serve takes; and the socket unit listens where clients
// look for root's daemon.
func TestSystemdUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	units := "../../dist/systemd"
	socket, err := os.ReadFile(filepath.Join(units, "uetrace.socket"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		t.Setenv("UETRACE_SOCKET", "")
		if want := "ListenSequentialPacket=" + wire.DefaultSocket() + "\n"; !strings.Contains(string(socket), want) {
			t.Errorf("uetrace.socket does not listen where root's clients look: no %q", want)
		}
	}
	service, err := os.ReadFile(filepath.Join(units, "uetrace.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart []string
	for _, l := range strings.Split(string(service), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = strings.Fields(v)
		}
	}
	if len(execStart) < 2 || execStart[0] != "/usr/bin/uetrace" || execStart[1] != "serve" {
		t.Fatalf("uetrace.service: ExecStart=%q, want /usr/bin/uetrace serve …", execStart)
	}
	// serve's flags as the unit gives them: --help after them parses them.
	if out, err := exec.Command(testutil.Uetrace(t), append(execStart[1:], "--help")...).CombinedOutput(); err != nil {
		t.Errorf("uetrace %s: %v\n%s", strings.Join(execStart[1:], " "), err, out)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze (Debian's systemd package)")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "uetrace.socket"), socket, 0o644)
	os.WriteFile(filepath.Join(dir, "uetrace.service"), []byte(strings.ReplaceAll(string(service), "/usr/bin/uetrace", testutil.Uetrace(t))), 0o644)
	cmd := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, "uetrace.socket"), filepath.Join(dir, "uetrace.service"))
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
