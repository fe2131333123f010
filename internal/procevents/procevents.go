// Package procevents listens to the kernel's process events connector
// (NETLINK_CONNECTOR, CN_IDX_PROC): the fork, exec and exit of every task on
// the machine, as they happen. Package callers follows the processes that
// use user_events through it, as the kernel follows them in fork, exec and
// exit.
//
// Listening needs CAP_NET_ADMIN before Linux 6.6 (joining the connector's
// multicast group): without it Listen is EPERM, with words saying so. Since
// 6.6 any process of the initial user and pid namespaces may listen; one in
// another namespace gets nothing (the kernel ignores its request). The kernel drops events a
// listener does not read in time; the next Read then returns ErrOverrun, and
// the listener must find out for itself what it missed.
//
// It decodes fork, exec and exit events only; the connector's other events
// (uid, gid, sid, ptrace, comm, coredump) are skipped. It does not filter by
// process (the kernel's filter needs Linux 6.6 and saves little) and does
// not read /proc.
package procevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is what happened to a task.
type Kind uint8

const (
	Fork Kind = iota + 1 // PROC_EVENT_FORK: a task was created (a process or a thread)
	Exec                 // PROC_EVENT_EXEC: a process exec'd
	Exit                 // PROC_EVENT_EXIT: a task exited
)

func (k Kind) String() string {
	switch k {
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one process event. For Fork, PID and TGID are the new task's
// (PID == TGID for a new process, PID != TGID for a new thread) and Parent*
// the forking task's parent (its real_parent: for a new thread, the
// process's parent, not the process); for Exec, PID and TGID are the process's (after
// exec the thread that exec'd is the leader: PID == TGID); for Exit, PID and
// TGID are the exiting task's (the whole process is gone when PID == TGID
// and it was the last thread) and Parent* its parent's, and ExitCode its
// wait status.
type Event struct {
	Kind                  Kind
	CPU                   uint32
	Timestamp             uint64 // ns since boot (ktime_get_ns)
	PID, TGID             int
	ParentPID, ParentTGID int
	ExitCode              uint32
}

// ErrOverrun is Read's error when the kernel dropped events because the
// socket's buffer was full (ENOBUFS): the caller has missed forks, execs or
// exits and must resynchronize from /proc.
var ErrOverrun = fmt.Errorf("procevents: the kernel dropped process events (the socket's buffer was full): resynchronize: %w", unix.ENOBUFS)

// The connector's constants (include/uapi/linux/connector.h, cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procCnMcastIgnore = 2

	procEventFork = 0x00000001
	procEventExec = 0x00000002
	procEventExit = 0x80000000

	nlmsgHdrLen = 16
	cnMsgLen    = 20 // struct cn_msg: cb_id{idx,val}, seq, ack, len u16, flags u16
	procHdrLen  = 16 // struct proc_event: what, cpu, timestamp_ns
)

// Listener is a socket listening to process events.
type Listener struct {
	f      *os.File
	buf    []byte
	closed atomic.Bool
	// overrun: Wait's peek found the kernel's ENOBUFS, which it reports
	// once, to whichever receive comes first — and clears (sock_error).
	// The next Read or ReadNow says it.
	overrun atomic.Bool
}

// Listen opens a connector socket, joins CN_IDX_PROC and asks the kernel to
// send process events (PROC_CN_MCAST_LISTEN).
func Listen() (*Listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("procevents: netlink connector socket: %w", err)
	}
	// A large buffer makes overruns rarer: a busy machine forks in bursts.
	// SO_RCVBUFFORCE passes rmem_max with CAP_NET_ADMIN, which Listen
	// needs anyway.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("procevents: joining the kernel's process events needs CAP_NET_ADMIN before Linux 6.6 (run as root or grant the capability; without it, check processes lazily): %w", err)
		}
		return nil, fmt.Errorf("procevents: bind to CN_IDX_PROC: %w", err)
	}
	if err := sendOp(fd, procCnMcastListen); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("procevents: PROC_CN_MCAST_LISTEN needs CAP_NET_ADMIN in the initial user namespace: %w", err)
		}
		return nil, fmt.Errorf("procevents: PROC_CN_MCAST_LISTEN: %w", err)
	}
	return &Listener{f: os.NewFile(uintptr(fd), "proc-connector"), buf: make([]byte, 64<<10)}, nil
}

// sendOp sends a PROC_CN_MCAST_* operation to the kernel.
func sendOp(fd int, op uint32) error {
	ne := binary.NativeEndian
	b := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.NLMSG_DONE)
	ne.PutUint32(b[12:], uint32(os.Getpid()))
	c := b[nlmsgHdrLen:]
	ne.PutUint32(c[0:], cnIdxProc)
	ne.PutUint32(c[4:], cnValProc)
	ne.PutUint16(c[16:], 4)
	ne.PutUint32(c[cnMsgLen:], op)
	return unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// SetReadBuffer sets the socket's receive buffer (SO_RCVBUF): how many
// events the kernel can queue before it drops them.
func (l *Listener) SetReadBuffer(bytes int) error {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bytes)
		if serr != nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, bytes)
		}
	}); err != nil {
		return err
	}
	return serr
}

// SetDeadline makes Read give up at t (os.ErrDeadlineExceeded); the zero
// time waits for ever.
func (l *Listener) SetDeadline(t time.Time) error { return l.f.SetReadDeadline(t) }

// Read waits for the next datagram of events and returns its fork, exec and
// exit events (possibly none: the datagram held others). It returns
// ErrOverrun once after the kernel dropped events, os.ErrDeadlineExceeded
// past the deadline, and os.ErrClosed after Close. Datagrams not sent by the
// kernel (another process can send to a netlink socket) are ignored.
// One goroutine at a time may Read.
func (l *Listener) Read() ([]Event, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	if l.overrun.Swap(false) {
		return nil, ErrOverrun
	}
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), l.buf, 0)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			if l.closed.Load() {
				return nil, fmt.Errorf("procevents: %w", os.ErrClosed)
			}
			return nil, fmt.Errorf("procevents: %w", err)
		}
		if rerr == unix.ENOBUFS {
			return nil, ErrOverrun
		}
		if rerr == unix.EINTR {
			continue
		}
		if rerr != nil {
			return nil, fmt.Errorf("procevents: recvfrom: %w", rerr)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not the kernel's
		}
		return Decode(l.buf[:n])
	}
}

// Wait waits until a datagram is there to read, the deadline passes
// (os.ErrDeadlineExceeded) or the listener is closed (os.ErrClosed). An
// overrun it finds (the kernel's ENOBUFS, which its peek takes) is the
// next Read's or ReadNow's ErrOverrun.
func (l *Listener) Wait() error {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return err
	}
	var one [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := unix.Recvfrom(int(fd), one[:], unix.MSG_PEEK)
		if rerr == unix.ENOBUFS {
			l.overrun.Store(true)
		}
		return rerr != unix.EAGAIN
	})
	if err != nil && l.closed.Load() {
		return fmt.Errorf("procevents: %w", os.ErrClosed)
	}
	return err
}

// ReadNow is Read without the wait: the events of the next datagram the
// kernel has queued, or ok false when none is (the socket is
// non-blocking). It is what a caller that must have seen every event sent
// before some moment calls, until ok is false.
func (l *Listener) ReadNow() (evs []Event, ok bool, err error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, false, err
	}
	if l.overrun.Swap(false) {
		return nil, true, ErrOverrun
	}
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		if err := rc.Control(func(fd uintptr) { n, from, rerr = unix.Recvfrom(int(fd), l.buf, 0) }); err != nil {
			return nil, false, fmt.Errorf("procevents: %w", err)
		}
		switch {
		case rerr == unix.EAGAIN:
			return nil, false, nil
		case rerr == unix.EINTR:
			continue
		case rerr == unix.ENOBUFS:
			return nil, true, ErrOverrun
		case rerr != nil:
			return nil, false, fmt.Errorf("procevents: recvfrom: %w", rerr)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not the kernel's
		}
		evs, err := Decode(l.buf[:n])
		return evs, true, err
	}
}

// Close stops listening; a Read in progress returns.
func (l *Listener) Close() error {
	l.closed.Store(true)
	rc, err := l.f.SyscallConn()
	if err == nil {
		// Tell the kernel, which counts listeners to skip the work when
		// there are none. Best effort: closing the socket is what matters.
		_ = rc.Control(func(fd uintptr) { _ = sendOp(int(fd), procCnMcastIgnore) })
	}
	return l.f.Close()
}

// Decode parses a datagram from the connector: netlink messages each
// carrying a cn_msg with a struct proc_event. It returns the fork, exec and
// exit events of CN_IDX_PROC in order and skips everything else. A message
// cut short is EINVAL, with the events before it.
func Decode(b []byte) ([]Event, error) {
	ne := binary.NativeEndian
	var evs []Event
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return evs, fmt.Errorf("procevents: %d bytes left, less than a netlink header: %w", len(b), unix.EINVAL)
		}
		mlen := int(ne.Uint32(b))
		typ := ne.Uint16(b[4:])
		if mlen < nlmsgHdrLen || mlen > len(b) {
			return evs, fmt.Errorf("procevents: netlink message of %d bytes in %d: %w", mlen, len(b), unix.EINVAL)
		}
		msg := b[nlmsgHdrLen:mlen]
		// Messages are 4-byte aligned (NLMSG_ALIGN).
		next := min((mlen+3)&^3, len(b))
		b = b[next:]
		if typ == unix.NLMSG_NOOP || typ == unix.NLMSG_ERROR || typ == unix.NLMSG_OVERRUN {
			continue
		}
		if len(msg) < cnMsgLen {
			return evs, fmt.Errorf("procevents: connector message of %d bytes: %w", len(msg), unix.EINVAL)
		}
		if ne.Uint32(msg[0:]) != cnIdxProc || ne.Uint32(msg[4:]) != cnValProc {
			continue
		}
		dlen := int(ne.Uint16(msg[16:]))
		data := msg[cnMsgLen:]
		if dlen > len(data) {
			return evs, fmt.Errorf("procevents: connector data of %d bytes in %d: %w", dlen, len(data), unix.EINVAL)
		}
		data = data[:dlen]
		if len(data) < procHdrLen {
			return evs, fmt.Errorf("procevents: proc_event of %d bytes: %w", len(data), unix.EINVAL)
		}
		ev := Event{CPU: ne.Uint32(data[4:]), Timestamp: ne.Uint64(data[8:])}
		d := data[procHdrLen:]
		i32 := func(i int) int { return int(int32(ne.Uint32(d[4*i:]))) }
		var need int
		switch ne.Uint32(data) {
		case procEventFork:
			ev.Kind, need = Fork, 16
		case procEventExec:
			ev.Kind, need = Exec, 8
		case procEventExit:
			ev.Kind, need = Exit, 16 // parent_pid, parent_tgid since Linux 4.18: 24
		default:
			continue
		}
		if len(d) < need {
			return evs, fmt.Errorf("procevents: %v event of %d bytes: %w", ev.Kind, len(d), unix.EINVAL)
		}
		switch ev.Kind {
		case Fork:
			ev.ParentPID, ev.ParentTGID, ev.PID, ev.TGID = i32(0), i32(1), i32(2), i32(3)
		case Exec:
			ev.PID, ev.TGID = i32(0), i32(1)
		case Exit:
			ev.PID, ev.TGID, ev.ExitCode = i32(0), i32(1), uint32(i32(2))
			if len(d) >= 24 {
				ev.ParentPID, ev.ParentTGID = i32(4), i32(5)
			}
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
