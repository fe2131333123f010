package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
)

// fuzzServer starts one daemon for every iteration of a fuzz target.
func fuzzServer(f *testing.F) string {
	dir := f.TempDir()
	sock := filepath.Join(dir, "f.sock")
	ln, err := Listen(sock)
	if err != nil {
		f.Fatal(err)
	}
	srv := New(Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1}), Logger: slog.New(slog.DiscardHandler)})
	go srv.Serve(ln)
	f.Cleanup(func() { srv.Close() })
	return sock
}

// FuzzRequest sends one arbitrary message after a good handshake: the
// daemon answers it or drops the connection, and keeps serving others.
func FuzzRequest(f *testing.F) {
	f.Add(wire.AppendHeader(nil, wire.OpDelete, 0, 0))
	f.Add(append(wire.AppendHeader(nil, wire.OpOpen, 0, uint32(os.O_WRONLY|os.O_APPEND)), "dynamic_events"...))
	f.Add(append(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpRegister, 0, 0), 28), append(reg(0x1000, 0), "f u32 a"...)...))
	f.Add(append(wire.AppendHeader(nil, wire.OpWrite, 3, 77), 0, 0, 0, 0, 1, 2, 3, 4))
	f.Add(append(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpWriteHead, 3, 77), 70000), 0, 0, 0, 0, 1, 2, 3, 4))
	f.Add(wire.LE.AppendUint32(wire.AppendHeader(nil, wire.OpSession, 1, 0), 4096))
	f.Add(append(wire.AppendHeader(nil, wire.OpAttach, 1, 1), "*"...))
	f.Add(append(wire.AppendHeader(nil, wire.OpReadDir, 0, 0), "events"...))
	f.Add(append(wire.AppendHeader(nil, wire.OpUnregister, 0, 0), make([]byte, 16)...))
	f.Add([]byte{})
	sock := fuzzServer(f)
	probe, err := client.Dial(sock, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
			t.Fatal(err)
		}
		// The handshake must be answered, however busy the machine: wait
		// as long as the tests wait for anything.
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: int64(waitLimit / time.Second)})
		buf := make([]byte, wire.MaxMessage+1)
		if err := sendRetry(fd, helloMsg(0, 0), nil); err != nil {
			t.Fatal(err)
		}
		if n, err := recvRetry(fd, buf); err != nil || n == 0 {
			t.Fatalf("hello: %d, %v", n, err)
		}
		// A read on trace_pipe or a session waits: give up on the reply
		// after a while (it is not required; the probe below is).
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
		if err := sendRetry(fd, msg, nil); err != nil && !errors.Is(err, unix.EMSGSIZE) {
			return // dropped already
		}
		n, err := recvRetry(fd, buf)
		if err == nil && n > 0 {
			h, ok := wire.ParseHeader(buf[:n])
			if !ok || h.Op != wire.OpResult && h.Op != wire.OpData {
				t.Fatalf("reply %x to %x", buf[:n], msg)
			}
		}
		// The daemon still serves others.
		start := time.Now()
		if _, err := probe.ReadDir("events"); err != nil {
			t.Fatalf("after %x: the daemon no longer serves: %v", msg, err)
		}
		if time.Since(start) > waitLimit {
			t.Fatalf("after %x: the daemon is slow to answer", msg)
		}
	})
}

func recvRetry(fd int, buf []byte) (int, error) {
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != unix.EINTR {
			return n, err
		}
	}
}

func sendRetry(fd int, msg, oob []byte) error {
	for {
		err := unix.Sendmsg(fd, msg, oob, nil, 0)
		if err != unix.EINTR {
			return err
		}
	}
}
