// Package sdaemon speaks the two protocols a service manager such as
// systemd offers a daemon, without libsystemd: socket activation — the
// listening sockets handed over as descriptors 3, 4, … with LISTEN_PID,
// LISTEN_FDS and LISTEN_FDNAMES in the environment (sd_listen_fds(3)) —
// and notification — "READY=1", "STATUS=…", "STOPPING=1" datagrams to the
// AF_UNIX socket $NOTIFY_SOCKET names (sd_notify(3)), so that a unit of
// Type=notify is started once the daemon serves.
//
// It is what `uetrace serve` needs to run as a service, and nothing more:
// no watchdog, no file-descriptor store.
package sdaemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenFDsStart is SD_LISTEN_FDS_START: the first descriptor passed.
const listenFDsStart = 3

// Listeners returns the sockets the service manager passed to this
// process, as files named by LISTEN_FDNAMES (or "unknown"), and unsets the
// three variables so that children do not take them for theirs; each
// descriptor is made close-on-exec. It returns nil, nil when none were
// passed: LISTEN_PID unset or another process's (a variable inherited by
// mistake), LISTEN_FDS unset or 0.
func Listeners() ([]*os.File, error) {
	pid, fds, names := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	if pid == "" || fds == "" {
		return nil, nil
	}
	if p, err := strconv.Atoi(pid); err != nil || p != os.Getpid() {
		return nil, nil // meant for another process (sd_listen_fds: not ours)
	}
	n, err := strconv.Atoi(fds)
	if err != nil || n < 0 || n > 1<<16 {
		return nil, fmt.Errorf("LISTEN_FDS=%q is not a count of descriptors: %w", fds, unix.EINVAL)
	}
	var nameList []string
	if names != "" {
		nameList = strings.Split(names, ":")
	}
	files := make([]*os.File, n)
	for i := range n {
		fd := listenFDsStart + i
		unix.CloseOnExec(fd)
		name := "unknown"
		if i < len(nameList) {
			name = nameList[i]
		}
		files[i] = os.NewFile(uintptr(fd), name)
	}
	return files, nil
}

// SeqPacketListener returns the one listening AF_UNIX SOCK_SEQPACKET
// socket among files (a .socket unit's ListenSequentialPacket=) as a
// listener, and closes the others. Anything else — no such socket, two,
// a socket that does not listen — is an error that says what was passed.
func SeqPacketListener(files []*os.File) (*net.UnixListener, error) {
	var found *os.File
	var seen []string
	for _, f := range files {
		fd := int(f.Fd())
		domain, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		typ, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		listening, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		seen = append(seen, fmt.Sprintf("%s (domain %d, type %d, listening %v)", f.Name(), domain, typ, listening == 1))
		if domain == unix.AF_UNIX && typ == unix.SOCK_SEQPACKET && listening == 1 {
			if found != nil {
				return nil, fmt.Errorf("two listening AF_UNIX SOCK_SEQPACKET sockets passed (%s): pass one: %w", strings.Join(seen, ", "), unix.EINVAL)
			}
			found = f
			continue
		}
	}
	if found == nil {
		return nil, fmt.Errorf("none of the %d sockets passed is a listening AF_UNIX SOCK_SEQPACKET socket (%s): the .socket unit wants ListenSequentialPacket=: %w",
			len(files), strings.Join(seen, ", "), unix.EINVAL)
	}
	for _, f := range files {
		if f != found {
			f.Close()
		}
	}
	ln, err := net.FileListener(found)
	found.Close() // FileListener made its own copy
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", found.Name(), err)
	}
	uln, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("socket %s is a %T: %w", found.Name(), ln, unix.EINVAL)
	}
	// The service manager owns the socket's file: closing must not
	// remove it, or the next activation would find nothing.
	uln.SetUnlinkOnClose(false)
	return uln, nil
}

// Notify sends state — newline-separated assignments such as "READY=1"
// or "STATUS=serving" — to the service manager's $NOTIFY_SOCKET, and says
// whether there was one to send to. A name that starts with '@' is in the
// abstract namespace, as sd_notify reads it.
func Notify(state string) (bool, error) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return false, nil
	}
	if addr[0] != '/' && addr[0] != '@' {
		return false, fmt.Errorf("NOTIFY_SOCKET=%q: not an AF_UNIX socket's path or @abstract name: %w", addr, unix.EAFNOSUPPORT)
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	// Credentials go with the datagram by themselves: the manager checks
	// the sender's pid (NotifyAccess=main) from SCM_CREDENTIALS, which
	// the kernel attaches when the receiver asks with SO_PASSCRED.
	if err := unix.Sendto(fd, []byte(state), 0, &unix.SockaddrUnix{Name: addr}); err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return false, fmt.Errorf("notify %s: %w", os.Getenv("NOTIFY_SOCKET"), errno)
		}
		return false, err
	}
	return true, nil
}
