package daemon

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys"
)

// Tracers names, beyond root, perfmon-capable callers and the daemon's own
// user, who may control tracing and read what others wrote (see the package
// doc, "Who may do what"). The zero value names nobody more.
type Tracers struct {
	// All makes everyone who may connect a tracer, as a tracefs everyone
	// may write and perf_event_paranoid -1 would.
	All bool
	// UIDs are users, by the uid SO_PEERCRED gives (the daemon's user
	// namespace's).
	UIDs []uint32
	// GIDs are groups: a caller whose primary or supplementary group
	// (SO_PEERGROUPS, as it was when it connected) is one of them.
	GIDs []uint32
}

// String is the list as `uetrace serve --tracers` takes it.
func (t Tracers) String() string {
	if t.All {
		return "all"
	}
	var parts []string
	for _, u := range t.UIDs {
		parts = append(parts, fmt.Sprint(u))
	}
	for _, g := range t.GIDs {
		parts = append(parts, fmt.Sprintf("@%d", g))
	}
	return strings.Join(parts, ",")
}

// tracerGrant says who tracers are, and which option makes one.
const tracerGrant = "tracers are root, CAP_PERFMON, the daemon's own user and whom `uetrace serve --tracers` names"

// isTracer decides whether the peer of socket fd, who connected as u with
// cred, may control tracing and read others' records.
func (s *Server) isTracer(fd int, u unix.Ucred, cred subsys.Cred) bool {
	if u.Uid == 0 || u.Uid == uint32(os.Geteuid()) || cred.PerfmonCapable || s.tracers.All {
		return true
	}
	for _, uid := range s.tracers.UIDs {
		if uid == u.Uid {
			return true
		}
	}
	if len(s.tracers.GIDs) == 0 {
		return false
	}
	groups := append(peerGroups(fd), u.Gid)
	for _, g := range s.tracers.GIDs {
		for _, h := range groups {
			if g == h {
				return true
			}
		}
	}
	return false
}

// peerGroups are the supplementary groups of the socket's peer as they were
// when it connected (SO_PEERGROUPS, Linux 4.13): the kernel's record, which
// the client cannot change afterwards. nil when the kernel cannot say.
func peerGroups(fd int) []uint32 {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == 0:
			return buf[:n/4]
		case e == unix.ERANGE && int(n/4) > len(buf) && n/4 <= 1<<16:
			buf = make([]uint32, n/4)
		default:
			return nil
		}
	}
}

// openNeedsTracer reports whether opening the tracefs file name with flags
// is tracing control or reading others' data: every open for writing (the
// writable files are tracefs's 0640 ones, root's), and trace and trace_pipe
// for reading. Other files read the same for everyone: the events, their
// formats and ids, the status, the sizes and switches.
func openNeedsTracer(name string, flags int) bool {
	if flags&(os.O_WRONLY|os.O_RDWR) != 0 || flags&os.O_TRUNC != 0 {
		return true
	}
	return subsys.Private(name)
}

// errNotTracer is the EACCES of a tracefs open the caller may not make:
// what tracefs's root-owned 0640 and 0440 files give a user who is not
// root.
func errNotTracer(name string, flags int, uid uint32) error {
	what := "for reading: others' records, which tracefs keeps for root"
	if flags&(os.O_WRONLY|os.O_RDWR) != 0 || flags&os.O_TRUNC != 0 {
		what = "for writing: tracing control, which tracefs keeps for root"
	}
	return fmt.Errorf("open %s %s; uid %d is not a tracer (%s): %w", name, what, uid, tracerGrant, unix.EACCES)
}

// errNeedsTracer is the EPERM of a privileged operation: a perf-like
// session (perf_event_open of tracepoint records without CAP_PERFMON while
// perf_event_paranoid > -1) or serving the tree over FUSE.
func errNeedsTracer(op string, uid uint32) error {
	return fmt.Errorf("%s uid %d is not a tracer (%s): %w", op, uid, tracerGrant, unix.EPERM)
}
