package main

import (
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// register --hold exits, naming the socket, when its daemon goes.
func TestCLIHoldDaemonGone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, srv, _ := startServe(t)
	hold, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "gone_ev u32 a")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })
	srv.Process.Kill()
	done := make(chan struct{})
	go func() { hold.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("register --hold still running 30s after its daemon was killed\n%s", holdOut.String())
	}
	want := `uetrace: register --hold "gone_ev": connection reset by peer (ECONNRESET): the daemon at ` + sock + ` hung up (it exited or dropped this client): the registration is gone`
	if code, _ := exitOf(hold.ProcessState); code != 1 || !strings.Contains(holdOut.String(), want) {
		t.Errorf("register --hold after the daemon died: exit %d\n%s\nwant %s", code, holdOut.String(), want)
	}
}
