package daemon

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// openFDs counts the descriptors this process — the test and the daemon it
// serves — holds.
func openFDs(t *testing.T) int {
	t.Helper()
	return len(fdLinks(t))
}

// fdLinks are the process's descriptors and what they are.
func fdLinks(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			out[e.Name()] = l
		}
	}
	return out
}

// TestDescriptorsNotParked: every descriptor a client sends is taken or
// closed before the daemon reads its next message, whatever the message —
// too large to read (MSG_TRUNC), carrying more descriptors than any
// request does (MSG_CTRUNC), or a request that takes none. The audit's
// reproduction: an oversized Ring message carrying 12 descriptors left
// them held until the next Ring, 13 per connection where --max-conns
// counts 4, and that next Ring was refused for them.
func TestDescriptorsNotParked(t *testing.T) {
	s := serve(t, Config{})
	fd, _ := rawHello(t, s)
	var twelve []int
	for range 12 {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(efd) })
		twelve = append(twelve, efd)
	}
	// The Hello's memfd is closed after its reply: a request answered
	// after it is one the daemon read after closing it.
	if r := exchange(t, fd, wire.AppendHeader(nil, wire.OpStats, 0, 0)); r == nil {
		t.Fatal("the daemon dropped the client")
	}
	base := openFDs(t)
	cases := []struct {
		name string
		msg  []byte
		fds  []int
		want unix.Errno
	}{
		{"oversized Ring with 12 descriptors", append(wire.AppendHeader(nil, wire.OpRing, 0, 0), make([]byte, wire.MaxMessage)...), twelve, unix.EMSGSIZE},
		{"Ring with 12 descriptors", wire.AppendHeader(nil, wire.OpRing, 0, 0), twelve, unix.EINVAL},
		{"Ring with 3 descriptors", wire.AppendHeader(nil, wire.OpRing, 0, 0), twelve[:3], unix.EINVAL},
		{"Ring with a body", append(wire.AppendHeader(nil, wire.OpRing, 0, 0), 1), twelve[:2], unix.EINVAL},
		{"oversized ServeFUSE", append(wire.AppendHeader(nil, wire.OpServeFUSE, 0, 0), make([]byte, wire.MaxMessage)...), twelve[:1], unix.EMSGSIZE},
		{"Delete with 12 descriptors", append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...), twelve, unix.EINVAL},
		{"Delete with 2 descriptors", append(wire.AppendHeader(nil, wire.OpDelete, 0, 0), "nothing"...), twelve[:2], unix.ENOENT},
		{"oversized Write with descriptors", append(wire.AppendHeader(nil, wire.OpWrite, 0, 0), make([]byte, wire.MaxMessage)...), twelve[:2], unix.EMSGSIZE},
	}
	for _, c := range cases {
		reply := exchange(t, fd, c.msg, c.fds...)
		if reply == nil {
			t.Fatalf("%s: the daemon dropped the client", c.name)
		}
		wantErrno(t, c.name, reply, c.want)
		if n := openFDs(t); n != base {
			t.Errorf("%s: the daemon holds %d descriptors more after answering it", c.name, n-base)
		}
	}
	// A Ring after all that gets its own descriptors, not parked ones.
	p := newSet(t, s.drainers.n, 1<<12)
	efd, err := p.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, fd, wire.AppendHeader(nil, wire.OpRing, 0, wire.RingSet), p.Fd(), efd); r == nil {
		t.Fatal("the daemon dropped the client")
	} else if _, _, err := wire.ParseResult(r); err != nil {
		t.Errorf("a well-formed Ring after the bad ones: %v", err)
	}
	healthy(t, s)
}

// TestRightsSpace: the control buffer holds maxRights descriptors and no
// more.
func TestRightsSpace(t *testing.T) {
	if got := unix.CmsgSpace(4 * maxRights); got != rightsSpace {
		t.Errorf("rightsSpace is %d, unix.CmsgSpace(4*%d) %d", rightsSpace, maxRights, got)
	}
}
