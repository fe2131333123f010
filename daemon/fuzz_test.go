package daemon

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/subsys"
)

var (
	fuzzOnce sync.Once
	fuzzSock string
)

// fuzzServer is one daemon for every fuzz iteration of the process.
func fuzzServer() string {
	fuzzOnce.Do(func() {
		dir, err := os.MkdirTemp("", "uetrace-fuzz")
		if err != nil {
			panic(err)
		}
		fuzzSock = filepath.Join(dir, "f.sock")
		ln, err := Listen(fuzzSock)
		if err != nil {
			panic(err)
		}
		srv := New(Config{Subsystem: subsys.New(subsys.Options{NumCPU: 1}), Logger: slog.New(slog.DiscardHandler)})
		go srv.Serve(ln)
	})
	return fuzzSock
}

// FuzzRequest sends one arbitrary message after a good handshake: the
// daemon answers it or drops the connection, and keeps serving others.
func FuzzRequest(f *testing.F) {
	f.Add(appendHeader(nil, opDelete, 0, 0))
	f.Add(append(appendHeader(nil, opOpen, 0, uint32(os.O_WRONLY|os.O_APPEND)), "dynamic_events"...))
	f.Add(append(le.AppendUint32(appendHeader(nil, opRegister, 0, 0), 28), append(reg(0x1000, 0), "f u32 a"...)...))
	f.Add(append(appendHeader(nil, opWrite, 3, 77), 0, 0, 0, 0, 1, 2, 3, 4))
	f.Add(le.AppendUint32(appendHeader(nil, opSession, 1, 0), 4096))
	f.Add(append(appendHeader(nil, opAttach, 1, 1), "*"...))
	f.Add(append(appendHeader(nil, opReadDir, 0, 0), "events"...))
	f.Add(append(appendHeader(nil, opUnregister, 0, 0), make([]byte, 16)...))
	f.Add([]byte{})
	sock := fuzzServer()
	probe, err := Dial(sock, nil)
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
		// A read on trace_pipe or a session waits: give up after a while.
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
		buf := make([]byte, MaxMessage+1)
		if err := unix.Sendmsg(fd, helloMsg(0, 0), nil, nil, 0); err != nil {
			t.Fatal(err)
		}
		if n, _, err := unix.Recvfrom(fd, buf, 0); err != nil || n == 0 {
			t.Fatalf("hello: %d, %v", n, err)
		}
		if err := unix.Sendmsg(fd, msg, nil, nil, 0); err != nil && !errors.Is(err, unix.EMSGSIZE) {
			return // dropped already
		}
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil && n > 0 {
			h, ok := parseHeader(buf[:n])
			if !ok || h.op != opResult && h.op != opData {
				t.Fatalf("reply %x to %x", buf[:n], msg)
			}
		}
		// The daemon still serves others.
		start := time.Now()
		if _, err := probe.ReadDir("events"); err != nil {
			t.Fatalf("after %x: the daemon no longer serves: %v", msg, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after %x: the daemon is slow to answer", msg)
		}
	})
}

// FuzzReplies feeds arbitrary replies to the client's parsers.
func FuzzReplies(f *testing.F) {
	f.Add(appendResult(nil, 12, nil))
	f.Add(le.AppendUint32(le.AppendUint32(nil, 0o40755), 'a'))
	f.Add(make([]byte, 16+recordHeaderLen+8))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseResult(b)
		parseDirEntries(b)
		parseRecords(b, nil)
	})
}
