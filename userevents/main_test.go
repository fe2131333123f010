package userevents

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
)

// DaemonProcess starts a daemon in a child process (the test binary, whose
// TestMain serves when UETRACE_BENCH_DAEMON names a socket) and returns its
// socket once it answers, and the process; the test's cleanup kills it.
func DaemonProcess(tb testing.TB) (string, *os.Process) {
	sock := filepath.Join(tb.TempDir(), "bench.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "UETRACE_BENCH_DAEMON="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if c, err := client.Dial(sock, nil); err == nil {
			c.Close()
			break
		}
		if time.Since(start) > time.Minute {
			tb.Fatal("the daemon did not start")
		}
	}
	return sock, cmd.Process
}

// TestMain serves as the benchmark's daemon when asked to.
func TestMain(m *testing.M) {
	if sock := os.Getenv("UETRACE_BENCH_DAEMON"); sock != "" {
		ln, err := daemon.Listen(sock)
		if err != nil {
			panic(err)
		}
		daemon.New(daemon.Config{Logger: slog.New(slog.DiscardHandler)}).Serve(ln)
		return
	}
	os.Exit(m.Run())
}
