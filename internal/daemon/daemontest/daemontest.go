// Package daemontest serves a uetrace daemon in the test's own process, on
// a socket of its own, for the tests of packages that talk to one (the
// producer library, a live source, the Collector's receiver, recording).
// It is for tests only, and the one place they start such a daemon
// (internal/daemon's own tests, inside the package, serve theirs).
package daemontest

import (
	"log/slog"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Start serves cfg's subsystem (nil: a fresh one of one CPU; cfg.Logger
// nil: discarded) on a socket in a temporary directory until the test
// ends, and returns the socket's path.
func Start(tb testing.TB, cfg daemon.Config) string {
	tb.Helper()
	_, sock := Serve(tb, cfg)
	return sock
}

// Serve is Start that also returns the server, for a test that reads its
// counts (Conns, RingStats). The server is closed when the test ends, and
// the test fails if Serve failed.
func Serve(tb testing.TB, cfg daemon.Config) (*daemon.Server, string) {
	tb.Helper()
	sock := filepath.Join(tb.TempDir(), "uetrace.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Subsystem == nil {
		cfg.Subsystem = subsys.New(subsys.Options{NumCPU: 1})
	}
	srv := daemon.New(cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		srv.Close()
		// Serve returns nil after Close, also when a test that ends at
		// once closes the server before its goroutine reaches Serve.
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return srv, sock
}

// Perfmon is a Config.Cred that takes every client as perfmon_capable(),
// as a daemon takes root: for tests that record (a perf-like session needs
// it) whoever runs them.
func Perfmon(unix.Ucred) subsys.Cred { return subsys.Cred{PerfmonCapable: true} }
