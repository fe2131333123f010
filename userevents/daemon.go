package userevents

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/uerror"
)

// daemonData is a uetrace daemon's user_events_data (Backend Daemon): one
// connection to it, whose requests are the file's operations. Writes take
// the ring (ring.go) when the File has one; Writev is the socket's way.
type daemonData struct{ c *client.Conn }

func (d daemonData) Register(reg []byte, name string) (uint32, error) {
	idx, ret, err := d.c.Register(reg, name, false)
	if err == nil && ret != 0 {
		err = abi.RetError(ret)
	}
	return idx, err
}

func (d daemonData) Unregister(unreg []byte) error { return d.c.Unregister(unreg) }

func (d daemonData) Delete(name string) error { return d.c.Delete(name) }

// Writev sends the write and waits for the daemon's answer, with who
// writes and where taken without a system call each (internal/stamp).
func (d daemonData) Writev(iov ...[]byte) (int, error) {
	tid, cpu := stamp.TidCPU()
	return d.c.Writev(tid, int(cpu), iov...)
}

func (d daemonData) Close() error { return d.c.Close() }

// openDaemon connects to the daemon at opts.Socket with the process's
// shared arena, and sets up the ring transport unless opts say otherwise.
func openDaemon(opts *Options) (*File, error) {
	sock := opts.Socket
	var kb int
	switch opts.Transport {
	case RingTransport:
		var err error
		if kb, err = ringKB(opts.RingKB); err != nil {
			return nil, err
		}
	case SocketTransport:
	default:
		return nil, &Error{Op: "open", Input: opts.Transport.String(), Errno: unix.EINVAL, Reason: "unknown transport: want RingTransport or SocketTransport"}
	}
	a, err := memfdArena()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(sock, &client.Arena{FD: a.fd, Addr: a.base(), Size: uint64(len(a.mem))})
	if err != nil {
		return nil, uerror.Dial(sock, err)
	}
	f := &File{backend: Daemon, arena: a, data: daemonData{c}, dc: c, events: map[*Event]struct{}{}}
	if opts.Transport == RingTransport {
		r, err := setupRing(c, kb)
		if err != nil {
			f.ringErr = fmt.Errorf("the daemon's ring transport could not be set up, writing over the socket: %w", err)
		} else {
			f.ring.Store(r)
		}
	}
	return f, nil
}
