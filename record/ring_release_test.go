package record_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/record"
	"github.com/uetrace/uetrace/userevents"
)

func ringMaps(t *testing.T) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "memfd:uetrace-ring")
}

// TestRecordingsLeaveNoRing: each recording from a daemon has a session
// ring of 16 MiB the daemon maps; once it has ended, nothing of it stays
// mapped. The last closed session used to stay reachable from the
// subsystem's list of sessions (a slot past the slice's length), and with
// it its ring: 16 MiB more resident in the daemon after every recording.
// The daemon runs in this process, so its mappings are ours.
func TestRecordingsLeaveNoRing(t *testing.T) {
	sock := startDaemon(t)
	base := ringMaps(t)
	for range 2 {
		f, err := userevents.Open(userevents.Options{Backend: userevents.Daemon, Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := f.Register("leak_ev u32 a", 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := daemon.Dial(sock, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(t.TempDir(), "x.data"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := record.Daemon(c, out, record.Options{Events: []string{"user_events:leak_ev"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.Run(ctx) }()
		for !ev.Enabled() {
			time.Sleep(time.Millisecond)
		}
		for j := range 1000 {
			ev.Write([]byte{byte(j), 0, 0, 0}) // a disable racing with it is fine
		}
		f.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.Close()
		out.Close()
	}
	// The rings are unmapped by a cleanup once unreachable: collect until
	// they are, or give up.
	deadline := time.Now().Add(time.Minute)
	for ringMaps(t) != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d ring mappings left after the recordings, want %d", ringMaps(t), base)
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}
