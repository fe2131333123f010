package sdaemon

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The child side of TestSocketActivation: a process started as a service
// manager starts a service, its listening socket at descriptor 3.
func TestMain(m *testing.M) {
	if os.Getenv("SDAEMON_TEST_CHILD") == "1" {
		// The manager sets LISTEN_PID after fork; this child does it for
		// itself, the one thing exec.Cmd cannot.
		if os.Getenv("LISTEN_PID") == "self" {
			os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		}
		files, err := Listeners()
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		if os.Getenv("LISTEN_FDS") != "" {
			os.Stdout.WriteString("LISTEN_FDS left set")
			os.Exit(1)
		}
		ln, err := SeqPacketListener(files)
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		c.Write([]byte("served by " + files[0].Name()))
		c.Close()
		ln.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child starts this test binary as a service with the listeners given.
func child(t *testing.T, env []string, files ...*os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SDAEMON_TEST_CHILD=1"}, env...)...)
	cmd.ExtraFiles = files
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// seqpacket makes a listening AF_UNIX SOCK_SEQPACKET socket and returns
// its path and file.
func seqpacket(t *testing.T) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	t.Cleanup(func() { f.Close() })
	return path, f
}

// TestSocketActivation: a service started with a listening socket at
// descriptor 3, as systemd starts it, serves a client on it, and the
// variables are gone from its environment.
func TestSocketActivation(t *testing.T) {
	path, f := seqpacket(t)
	cmd := child(t, []string{"LISTEN_PID=self", "LISTEN_FDS=1", "LISTEN_FDNAMES=uetrace.socket"}, f)
	c, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 100)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "served by uetrace.socket" {
		t.Errorf("read %q, %v", buf[:n], err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the service: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the socket file, the manager's, went with the service: %v", err)
	}
}

// TestListenersNotOurs: variables meant for another process, or none, give
// no listeners, and are unset either way.
func TestListenersNotOurs(t *testing.T) {
	for _, pid := range []string{"", "1", strconv.Itoa(os.Getpid() + 1)} {
		t.Setenv("LISTEN_PID", pid)
		t.Setenv("LISTEN_FDS", "1")
		files, err := Listeners()
		if files != nil || err != nil {
			t.Errorf("LISTEN_PID=%q: %v, %v", pid, files, err)
		}
		if _, ok := os.LookupEnv("LISTEN_FDS"); ok {
			t.Errorf("LISTEN_PID=%q: LISTEN_FDS left set", pid)
		}
	}
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDS", "x")
	if _, err := Listeners(); err == nil {
		t.Error("LISTEN_FDS=x: no error")
	}
}

// TestSeqPacketListenerRefuses: a stream socket, or none that listens, is
// an error that says what was passed.
func TestSeqPacketListenerRefuses(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "st.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, _ := ln.File()
	_, err = SeqPacketListener([]*os.File{f})
	if err == nil || !strings.Contains(err.Error(), "ListenSequentialPacket=") {
		t.Errorf("a stream socket: %v", err)
	}
}

// TestNotify: the state arrives at $NOTIFY_SOCKET as one datagram, at a
// path and in the abstract namespace; without the variable nothing is
// sent.
func TestNotify(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		name := filepath.Join(t.TempDir(), "notify")
		env := name
		if abstract {
			name = "\x00uetrace-sdaemon-test-" + strconv.Itoa(os.Getpid())
			env = "@" + name[1:]
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err != nil {
			t.Fatal(err)
		}
		t.Setenv("NOTIFY_SOCKET", env)
		if sent, err := Notify("READY=1\nSTATUS=serving"); !sent || err != nil {
			t.Fatalf("Notify: %v, %v", sent, err)
		}
		buf := make([]byte, 100)
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || string(buf[:n]) != "READY=1\nSTATUS=serving" {
			t.Errorf("abstract %v: received %q, %v", abstract, buf[:n], err)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v, %v", sent, err)
	}
}
