package ehslog_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// TestDaemon: the same records through the daemon, on its ring and its
// socket transport, read back from the daemon's subsystem; and the
// Handler's Enabled following a session attaching there.
func TestDaemon(t *testing.T) {
	sys := subsys.New(subsys.Options{NumCPU: 1})
	sock := daemontest.Start(t, daemon.Config{Subsystem: sys})
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
			testutil.Wait(t, "the Handler to be enabled once the session attached", func() bool { return h.Enabled(t.Context(), slog.LevelWarn) })
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
