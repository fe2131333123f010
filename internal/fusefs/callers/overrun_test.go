package callers

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/procmem/procmemtest"
	"github.com/uetrace/uetrace/internal/subsys"
)

// TestOverrunResyncs: when the kernel drops process events, Follow resyncs,
// and finds the exec it was not told of.
func TestOverrunResyncs(t *testing.T) {
	bin := procmemtest.Build(t)
	if os.Getuid() != 0 {
		t.Skip("Follow needs CAP_NET_ADMIN")
	}
	cs := New(subsys.New(subsys.Options{}))
	defer cs.Close()
	child := procmemtest.Start(t, bin)
	if _, err := cs.Get(child.Pid); err != nil {
		t.Fatal(err)
	}
	if err := cs.Follow(); err != nil {
		t.Fatal(err)
	}
	if err := cs.listener.SetReadBuffer(1); err != nil { // the kernel's minimum
		t.Fatal(err)
	}
	// Holding the lock stops the follower at its next batch of events,
	// so the socket overflows with the shell's.
	cs.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), procmemtest.Timeout)
	defer cancel()
	err := exec.CommandContext(ctx, "sh", "-c", strings.Repeat("/bin/true; ", 100)).Run()
	child.Exec()
	cs.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(procmemtest.Timeout)
	for st := cs.Stats(); st.Overruns == 0 || st.Execs == 0; st = cs.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("no overrun and resync seen: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	if st := cs.Stats(); st.Resyncs == 0 || st.Processes != 0 {
		t.Errorf("stats %+v", st)
	}
}
