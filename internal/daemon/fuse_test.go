package daemon

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"golang.org/x/sys/unix"
)

// fakeTree stands in for a FUSE tree: it records what the daemon does with
// it.
type fakeTree struct {
	dev    string
	closed chan struct{}
	done   chan struct{}
}

func (f *fakeTree) Close() error {
	select {
	case <-f.closed:
	default:
		close(f.closed)
	}
	return nil
}

func (f *fakeTree) Done() <-chan struct{} { return f.done }

func TestServeFUSERequest(t *testing.T) {
	// Without the hook the daemon says it cannot.
	plain := serve(t, Config{})
	c, r := dialWithDevice(t, plain.sock)
	if err := c.ServeFUSE(r); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("ServeFUSE without the hook: %v, want EOPNOTSUPP", err)
	}

	trees := make(chan *fakeTree, 4)
	srv := serve(t, Config{ServeFUSE: func(dev *os.File, from FUSEMounter) (FUSETree, error) {
		// The tree is served for the client that handed it over.
		if from.PID != int32(os.Getpid()) || from.UID != uint32(os.Getuid()) || from.Pidfd < 0 {
			return nil, fmt.Errorf("the mounter is %+v, not this process: %w", from, unix.EINVAL)
		}
		// The daemon hands over its own descriptor, which outlives the
		// request: the caller's may close at once.
		if _, err := unix.FcntlInt(dev.Fd(), unix.F_GETFD, 0); err != nil {
			return nil, err
		}
		ft := &fakeTree{dev: dev.Name(), closed: make(chan struct{}), done: make(chan struct{})}
		trees <- ft
		return ft, nil
	}})
	c2, err := client.Dial(srv.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.ServeFUSE(r); err != nil {
		t.Fatalf("ServeFUSE: %v", err)
	}
	first := <-trees
	// A tree whose mount went away is forgotten: Close of the server does
	// not reach it.
	close(first.done)
	if err := c2.ServeFUSE(r); err != nil {
		t.Fatalf("second ServeFUSE: %v", err)
	}
	second := <-trees
	deadline := time.Now().Add(time.Minute)
	for {
		srv.mu.Lock()
		n := len(srv.fuses)
		srv.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon holds %d trees, want the one still served", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Close()
	select {
	case <-second.closed:
	default:
		t.Error("Close of the server left a tree served")
	}
	select {
	case <-first.closed:
		t.Error("Close of the server closed a tree that had ended")
	default:
	}
}

// A tree handed over holds its /dev/fuse descriptor and its server until its
// mount goes, past the connection: it counts as a connection (of its uid's,
// and of Config.MaxConns) until then. Before, one tracer's connection could
// hand over a tree per mount of its own without bound, and take the daemon
// to RLIMIT_NOFILE. Served with room for two: the connection and one tree;
// a second tree is ENFILE, and so is a new connection; once the tree's
// mount goes, a tree is served again.
func TestServeFUSETreesCountAsConnections(t *testing.T) {
	trees := make(chan *fakeTree, 4)
	srv := serve(t, Config{MaxConns: 2, ServeFUSE: func(dev *os.File, from FUSEMounter) (FUSETree, error) {
		ft := &fakeTree{dev: dev.Name(), closed: make(chan struct{}), done: make(chan struct{})}
		trees <- ft
		return ft, nil
	}})
	c, r := dialWithDevice(t, srv.sock)
	if err := c.ServeFUSE(r); err != nil {
		t.Fatalf("first ServeFUSE: %v", err)
	}
	first := <-trees
	if err := c.ServeFUSE(r); !errors.Is(err, unix.ENFILE) {
		t.Errorf("a second tree past --max-conns: %v, want ENFILE", err)
	}
	if other, err := client.Dial(srv.sock, nil); !errors.Is(err, unix.ENFILE) {
		if err == nil {
			other.Close()
		}
		t.Errorf("a connection past --max-conns, a tree holding a slot: %v, want ENFILE", err)
	}
	close(first.done)
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.ServeFUSE(r)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENFILE) || time.Now().After(deadline) {
			t.Fatalf("ServeFUSE once the first tree's mount went: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-trees
}

// dialWithDevice dials sock, and returns the client and a descriptor to hand
// over as a FUSE device (a pipe's end: the fake trees never read it).
func dialWithDevice(t *testing.T, sock string) (*client.Conn, *os.File) {
	t.Helper()
	c, err := client.Dial(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return c, r
}
