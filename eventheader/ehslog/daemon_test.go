package ehslog_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// TestDaemon: the same records through the daemon, on its ring and its
// socket transport, read back from the daemon's subsystem; and the
// Handler's Enabled following a session attaching there.
func TestDaemon(t *testing.T) {
	sys := subsys.New(subsys.Options{NumCPU: 1})
	sock := filepath.Join(t.TempDir(), "uetrace.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := daemon.New(daemon.Config{Subsystem: sys, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for _, tr := range []struct {
		name string
		t    userevents.Transport
	}{{"ring", userevents.RingTransport}, {"socket", userevents.SocketTransport}} {
		t.Run(tr.name, func(t *testing.T) {
			f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: tr.t})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := ehprovider.New(f, "SlogDaemon_"+tr.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h, err := ehslog.New(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if h.Enabled(t.Context(), slog.LevelWarn) {
				t.Fatal("enabled before anything is attached")
			}
			r := &rig{sys: sys, p: p, buf: make([]byte, 1<<16)}
			r.ss = sys.NewSession(subsys.SessionOptions{})
			defer r.ss.Close()
			if _, err := r.ss.AttachMatching("user_events:"+p.Name()+"_L3K1", true); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return h.Enabled(t.Context(), slog.LevelWarn) })
			l := slog.New(checked{h, t}).With("svc", "api").WithGroup("req")
			l.Info("not attached")
			l.Warn("slow", "ms", 812)
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			ev := r.read(t, 1)[0]
			if !strings.Contains(ev.json, `"msg": "slow", "svc": "api", "req": { "ms": 812 }`) || ev.tracepoint != p.Name()+"_L3K1" {
				t.Errorf("%s: %s", ev.tracepoint, ev.json)
			}
		})
	}
}

// waitFor polls cond until it holds, failing after 30 s: the daemon
// updates a client's enable word on its own time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not enabled 30 s after the session attached")
		}
		time.Sleep(time.Millisecond)
	}
}
