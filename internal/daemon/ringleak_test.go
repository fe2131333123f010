package daemon

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

func ringMappings(t *testing.T) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(maps), "memfd:uetrace-ring") + strings.Count(string(maps), "memfd:uetrace-stream")
}

// TestSessionStreamsUnmapped: a session's streams the
// daemon made are unmapped once their client has gone — the daemon keeps
// no mapping of a dead session.
func TestSessionStreamsUnmapped(t *testing.T) {
	s := serve(t, Config{Rings: 2})
	base := ringMappings(t)
	for range 4 {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c := a.dial(t, s.sock)
		ss, err := c.NewSession(client.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := ss.ShareStreams(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
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

// TestRingReleasedUnreachable: once a client's ring is released, nothing
// in the daemon refers to it — not the drainers' request queues, whose
// backing arrays outlive their length — so its buffer and its
// connection's File go with the next collection. (Each ring kept 64 KiB
// for as long as the queue's array held it: 1.5 MiB after a burst of
// producers, in the soak.)
func TestRingReleasedUnreachable(t *testing.T) {
	s := serve(t, Config{})
	var gone []weak.Pointer[ringSource]
	for range 4 {
		a := newArena(t, 4096, unix.F_SEAL_SHRINK)
		c := a.dial(t, s.sock)
		shareTestRing(t, c, 1<<16)
		s.drainers.mu.Lock()
		for set := range s.drainers.sets {
			for _, r := range set.srcs {
				gone = append(gone, weak.Make(r))
			}
		}
		s.drainers.mu.Unlock()
		c.Close()
		testutil.Wait(t, "the ring to be released", func() bool { return ringsReleased(s) })
	}
	if want := 4 * s.drainers.n; len(gone) != want {
		t.Fatalf("saw %d rings, want %d", len(gone), want)
	}
	testutil.Wait(t, "the released rings to be collected", func() bool {
		runtime.GC()
		for _, w := range gone {
			if w.Value() != nil {
				return false
			}
		}
		return true
	})
}
