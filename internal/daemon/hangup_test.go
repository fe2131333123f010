package daemon

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"golang.org/x/sys/unix"
)

// Hang-ups in every state (issue 19.4): a client that starts a blocking
// read, pipelines one more request and exits — or half-closes its socket —
// must be released at once, as close(2) releases a tracefs file in Linux:
// trace_pipe's single reader slot, its sessions and what they enabled.

// rawOpen opens a tracefs file on a raw connection and returns its handle.
func rawOpen(t *testing.T, fd int, name string) uint32 {
	t.Helper()
	r := exchange(t, fd, append(wire.AppendHeader(nil, wire.OpOpen, 0, uint32(os.O_RDONLY)), name...))
	h, _, err := wire.ParseResult(r)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return uint32(h)
}

func rawSend(t *testing.T, fd int, msg []byte) {
	t.Helper()
	if err := sendRetry(fd, msg, nil); err != nil {
		t.Fatal(err)
	}
}

// waitConns waits until the daemon serves n connections.
func waitConns(t *testing.T, s *testServer, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for s.Conns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon still serves %d connections, want %d:\n%s", s.Conns(), n, s.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tracePipeFree checks that another client can open trace_pipe.
func tracePipeFree(t *testing.T, s *testServer) {
	t.Helper()
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	defer c.Close()
	f, err := c.Open("trace_pipe", os.O_RDONLY)
	if err != nil {
		t.Fatalf("trace_pipe after the reader left: %v", err)
	}
	f.Close()
}

func readMsg(h uint32) []byte {
	return wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRead, 0, h), 4096)
}

func TestHangupAfterPipelinedRequest(t *testing.T) {
	for _, hangup := range []struct {
		name string
		do   func(fd int)
	}{
		{"close", func(fd int) { unix.Close(fd) }},
		{"shutdown-write", func(fd int) { unix.Shutdown(fd, unix.SHUT_WR) }},
		{"shutdown-both", func(fd int) { unix.Shutdown(fd, unix.SHUT_RDWR) }},
	} {
		t.Run(hangup.name, func(t *testing.T) {
			s := serve(t, Config{})
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Connect(fd, &unix.SockaddrUnix{Name: s.sock}); err != nil {
				t.Fatal(err)
			}
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
			if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
				t.Fatal("hello refused")
			}
			h := rawOpen(t, fd, "trace_pipe")
			rawSend(t, fd, readMsg(h)) // blocks: nothing is traced
			rawSend(t, fd, append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...))
			hangup.do(fd)
			waitConns(t, s, 0)
			tracePipeFree(t, s)
			if hangup.name != "close" {
				unix.Close(fd)
			}
		})
	}
}

// TestHangupDuringSessionRead: a session's blocking read, a pipelined
// request, exit: the session goes, and with it the enable it held.
func TestHangupDuringSessionRead(t *testing.T) {
	s := serve(t, Config{Cred: privileged})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	admin := a.dial(t, s.sock)
	if err := writeFile(admin, "dynamic_events", "u:sess_ev u32 a"); err != nil {
		t.Fatal(err)
	}
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
		t.Fatal("hello refused")
	}
	r := exchange(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 0, 0), 1<<20))
	sh, _, err := wire.ParseResult(r)
	if err != nil {
		t.Fatalf("session: %v", err)
	}
	if r := exchange(t, fd, append(wire.AppendHeader(nil, wire.OpAttach, 0, uint32(sh)), "user_events:sess_ev"...)); len(r) == 0 {
		t.Fatal("attach: no reply")
	}
	if st := readFile(t, admin, "user_events_status"); !containsLine(st, "sess_ev") {
		t.Fatalf("not attached:\n%s", st)
	}
	rawSend(t, fd, wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSessionRead, 0, uint32(sh)), 4096))
	rawSend(t, fd, append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...))
	unix.Close(fd)
	waitConns(t, s, 1)
	if err := admin.Delete("sess_ev"); err != nil {
		t.Errorf("the left session still holds its event: delete: %v", err)
	}
}

// TestCloseWithWedgedClient: the server's Close (what SIGTERM does) ends
// even while a client waits in a blocking read behind a pipelined request.
func TestCloseWithWedgedClient(t *testing.T) {
	s := serve(t, Config{})
	fd := rawConn(t, s.sock)
	if r := exchange(t, fd, helloMsg(0, 0)); len(r) == 0 {
		t.Fatal("hello refused")
	}
	h := rawOpen(t, fd, "trace_pipe")
	rawSend(t, fd, readMsg(h))
	rawSend(t, fd, append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil && !errors.Is(err, os.ErrClosed) {
			t.Logf("Close: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not return with a client waiting in a blocking read")
	}
}

func containsLine(s, sub string) bool {
	for line := range splitLines(s) {
		if len(line) >= len(sub) && line[:len(sub)] == sub {
			return true
		}
	}
	return false
}

func splitLines(s string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for len(s) > 0 {
			i := 0
			for i < len(s) && s[i] != '\n' {
				i++
			}
			if !yield(s[:i]) {
				return
			}
			if i < len(s) {
				i++
			}
			s = s[i:]
		}
	}
}
