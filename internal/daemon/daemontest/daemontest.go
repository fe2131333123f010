// Package daemontest serves a uetrace daemon in the test's own process, on
// a socket of its own, for the tests of packages that talk to one (the
// producer library, a live source, the Collector's receiver, recording).
// It is for tests only, and the one place they start such a daemon
// (internal/daemon's own tests, inside the package, serve theirs); and it
// gives a test an event enabled on a daemon (EnabledEvent).
package daemontest

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
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

// EnabledEvent opens a File with o (on any daemon: this package's or a
// `uetrace serve` process), registers cmd (index 0, no flags) and enables
// the event through the tree o names, as a tracer would — the state a
// benchmark of the write path measures. It fails the test if the File
// does not get the transport o asks for (its RingError says why) or the
// enable write does not set the event's bit. The File and the tree are
// closed when the test ends.
func EnabledEvent(tb testing.TB, o userevents.Options, cmd string) *userevents.Event {
	tb.Helper()
	f, err := userevents.Open(&o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	if f.Transport() != o.Transport {
		tb.Fatalf("transport %v, asked for %v: %v", f.Transport(), o.Transport, f.RingError())
	}
	ev, err := f.Register(cmd, 0)
	if err != nil {
		tb.Fatal(err)
	}
	fs, err := tracefs.Open(&o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { fs.Close() })
	name, _, _ := strings.Cut(cmd, " ")
	if err := fs.WriteFile("events/user_events/"+name+"/enable", []byte("1"), 0); err != nil {
		tb.Fatal(err)
	}
	if !ev.Enabled() {
		tb.Fatalf("%s is not enabled after writing its enable file", name)
	}
	return ev
}
