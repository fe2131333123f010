package record_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/userevents"
)

// ringInodes is the inodes of the rings mapped in this process.
func ringInodes(t *testing.T) map[string]bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for line := range strings.Lines(string(maps)) {
		if f := strings.Fields(line); len(f) >= 6 && strings.Contains(line, "memfd:uetrace-ring") {
			inodes[f[4]] = true
		}
	}
	return inodes
}

// newRings is how many rings mapped now were not mapped before: other
// tests' rings may come and go meanwhile.
func newRings(t *testing.T, before map[string]bool) int {
	n := 0
	for ino := range ringInodes(t) {
		if !before[ino] {
			n++
		}
	}
	return n
}

// TestRecordingsLeaveNoRing: each recording from a daemon has a session
// ring of 16 MiB the daemon maps; once it has ended, nothing of it stays
// mapped. The last closed session used to stay reachable from the
// subsystem's list of sessions (a slot past the slice's length), and with
// it its ring: 16 MiB more resident in the daemon after every recording.
// The daemon runs in this process, so its mappings are ours.
func TestRecordingsLeaveNoRing(t *testing.T) {
	sock := startDaemon(t)
	before := ringInodes(t)
	for range 2 {
		f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := f.Register("leak_ev u32 a", 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(sock, nil)
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
	for newRings(t, before) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the recordings' rings still mapped after they ended", newRings(t, before))
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}
