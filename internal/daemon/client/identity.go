package client

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/procfs"
)

// Whose socket it is. A per-user socket lives in a directory of the
// user's: $XDG_RUNTIME_DIR/uetrace, or /tmp/uetrace-<uid> without one — a
// name anyone can take in /tmp before the user does, and then hold the
// socket the user's programs dial. So the daemon starts only in a
// directory that is the user's own (daemon.PrepareSocketDir), and a client
// sends nothing — not even its Hello with its arena — before it has checked
// with SO_PEERCRED that the daemon runs as a user it trusts (checkPeer).

// EnvDaemonUID names, comma-separated, the users (uid or name) other than
// root and the client's own a client trusts to serve its socket.
const EnvDaemonUID = "UETRACE_DAEMON_UID"

// IdentityError is a daemon that runs as a user the client does not
// trust: someone other than root, the client's own user and whom
// UETRACE_DAEMON_UID names.
type IdentityError struct {
	Path string
	UID  uint32 // the daemon's, as SO_PEERCRED gives it
	Self uint32 // the client's effective uid
	// Unmapped: the client is in a user namespace that does not map the
	// daemon's user, which UID (the overflow uid) stands for.
	Unmapped bool
}

func (e *IdentityError) Error() string {
	if e.Unmapped {
		return fmt.Sprintf("dial %s: the daemon there runs as a user this user namespace does not map (SO_PEERCRED shows uid %d, whoever it is), and a directory above the socket can be written by others than its owner: anyone could have put it there, so nothing was sent; dial a socket whose every directory only its owner may write (as /run/uetrace), or map the daemon's user",
			e.Path, e.UID)
	}
	return fmt.Sprintf("dial %s: the daemon there runs as %s (uid %d), not as root or as you (uid %d): anyone who could make that socket could be reading what you send, so nothing was sent; if you trust that user, set %s=%d",
		e.Path, wire.UserName(e.UID), e.UID, e.Self, EnvDaemonUID, e.UID)
}

// Unwrap returns EPERM.
func (e *IdentityError) Unwrap() error { return unix.EPERM }

// checkPeer checks, before anything is sent, that the daemon at the other
// end of fd (connected to path) runs as root, as this user, or as a user
// UETRACE_DAEMON_UID names. A client in a user namespace sees a daemon
// whose uid is not mapped there as the overflow uid, which may be anyone
// outside: such a daemon is trusted only at a socket no one but its
// directories' owners could have put there — every directory above it
// writable by its owner alone.
func checkPeer(fd int, path string) error {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("dial %s: SO_PEERCRED: %w", path, err)
	}
	self := uint32(os.Geteuid())
	if u.Uid == 0 || u.Uid == self || slices.Contains(trustedUIDs(), u.Uid) {
		return nil
	}
	unmapped := u.Uid == overflowUID() && inUserNamespace()
	if unmapped && ownersOnly(path) {
		return nil
	}
	return &IdentityError{Path: path, UID: u.Uid, Self: self, Unmapped: unmapped}
}

// trustedUIDs are the users UETRACE_DAEMON_UID names.
func trustedUIDs() []uint32 {
	var out []uint32
	for rest := os.Getenv(EnvDaemonUID); rest != ""; {
		var s string
		s, rest, _ = strings.Cut(rest, ",")
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if uid, ok := lookupUID(s); ok {
			out = append(out, uid)
		}
	}
	return out
}

// overflowUID is /proc/sys/kernel/overflowuid: the uid a user namespace
// shows for one it does not map.
func overflowUID() uint32 {
	b, err := procfs.ReadFile("/proc/sys/kernel/overflowuid")
	if err != nil {
		return 65534
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 65534
	}
	return uint32(n)
}

// inUserNamespace reports whether this process is outside the initial
// user namespace, whose uid_map maps every uid to itself.
func inUserNamespace() bool {
	b, err := procfs.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	return !slices.Equal(strings.Fields(string(b)), []string{"0", "0", "4294967295"})
}

// ownersOnly reports whether no directory above path can be written by
// anyone but its owner.
func ownersOnly(path string) bool {
	abs, err := absPath(path)
	if err != nil {
		return false
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if unix.Stat(d, &st) != nil || st.Mode&0o022 != 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// lookupUID is a uid given as a number or a user name.
func lookupUID(s string) (uint32, bool) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), true
	}
	return wire.UserID(s)
}

// PermissionError is a connection refused by the socket's permissions
// (EACCES): it names the file that refused — the socket, or a directory
// above it — with its owner, group and mode, and what to do.
type PermissionError struct {
	Path         string
	Owner, Group string
	Mode         fs.FileMode
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("permission denied on %s (owned by %s:%s, mode %04o): ask to be added to its group, or start your own with uetrace serve",
		e.Path, e.Owner, e.Group, uint32(e.Mode.Perm()))
}

// Unwrap returns EACCES.
func (e *PermissionError) Unwrap() error { return unix.EACCES }

// permissionError finds what refused a connection to path: the first
// directory this process may not search, else the socket itself.
func permissionError(path string) error {
	abs, err := absPath(path)
	if err != nil {
		abs = path
	}
	// The outermost directory this process cannot search is the one that
	// refused; with none, the socket's own write permission did.
	var dirs []string
	for d := filepath.Dir(abs); d != "/" && d != "."; d = filepath.Dir(d) {
		dirs = append(dirs, d)
	}
	culprit := abs
	for i := len(dirs) - 1; i >= 0; i-- {
		if syscall.Access(dirs[i], unix.X_OK) != nil {
			culprit = dirs[i]
			break
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(culprit, &st); err != nil {
		return fmt.Errorf("dial %s: %w", path, unix.EACCES)
	}
	return &PermissionError{Path: culprit, Owner: wire.UserName(st.Uid), Group: wire.GroupName(st.Gid), Mode: fs.FileMode(st.Mode & 0o777)}
}

// absPath is filepath.Abs by getcwd(2) itself: os.Getwd, which Abs calls,
// stats "." and would link fs.FileInfo's time formatting into every
// producer.
func absPath(path string) (string, error) {
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	wd, err := unix.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, path), nil
}
