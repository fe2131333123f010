package vmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
)

// Uetrace is the other way the tooling runs programs against user_events:
// on this machine, under `uetrace run`, where /sys/kernel/tracing is
// uetrace's tree through FUSE — the same programs the VM runs on the
// kernel, to compare. It skips t unless this process may mount FUSE (root,
// /dev/fuse), and returns a uetrace built for it from this module (static,
// as Build makes it), in t's temporary directory.
func Uetrace(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: uetrace run mounts FUSE")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: uetrace run needs FUSE")
	}
	bin := filepath.Join(t.TempDir(), "uetrace")
	if err := Build("github.com/uetrace/uetrace/cmd/uetrace", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Serve starts `uetrace serve` (the binary uetrace, as Uetrace builds it)
// on a socket in dir and returns the socket once the daemon answers; the
// test's cleanup ends it.
func Serve(tb testing.TB, uetrace, dir string) string {
	tb.Helper()
	sock := filepath.Join(dir, "uetrace.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, uetrace, "serve", "--socket", sock)
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); cmd.Wait() })
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.Dial(sock, nil)
		if err == nil {
			c.Close()
			return sock
		}
		if time.Now().After(deadline) {
			tb.Fatalf("uetrace serve did not answer on %s within a minute: %v\n%s", sock, err, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
