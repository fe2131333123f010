package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func ringMappings(t *testing.T) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "memfd:uetrace-ring")
}

// TestSessionRingUnmapped: a session ring the daemon made is unmapped once
// its client has gone — the daemon keeps no mapping of a dead session.
func TestSessionRingUnmapped(t *testing.T) {
	s := serve(t, Config{})
	base := ringMappings(t)
	for range 3 {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c := a.dial(t, s.sock)
		ss, err := c.NewSession(SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ss.ShareRing(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		c.Close()
	}
	waitConns(t, &testServer{Server: s.Server}, 0)
	deadline := time.Now().Add(waitLimit)
	for ringMappings(t) != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d ring mappings left after every client went, want %d", ringMappings(t), base)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
