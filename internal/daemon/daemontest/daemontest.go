// Package daemontest serves a uetrace daemon in the test's own process,
// on a socket of its own, for the tests of packages that talk to one
// (a live source, the Collector's receiver). It is for tests only.
package daemontest

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Start serves cfg's subsystem (nil: a fresh one of one CPU; cfg.Logger
// nil: discarded) on a socket in a temporary directory until the test
// ends, and returns the socket's path.
func Start(tb testing.TB, cfg daemon.Config) string {
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
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return sock
}
