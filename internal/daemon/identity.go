package daemon

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"golang.org/x/sys/unix"
)

// Whose socket it is. A per-user socket lives in a directory of the
// user's: $XDG_RUNTIME_DIR/uetrace, or /tmp/uetrace-<uid> without one — a
// name anyone can take in /tmp before the user does, and then hold the
// socket the user's programs dial. So the daemon starts only in a
// directory that is the user's own (PrepareSocketDir), and a client sends
// nothing before it has checked with SO_PEERCRED that the daemon runs as a
// user it trusts (package client).

// PrepareSocketDir makes and checks the directory of wire.DefaultSocket() when
// it is a per-user one (not root's, not $UETRACE_SOCKET): the XDG Base
// Directory rules for $XDG_RUNTIME_DIR — a directory, not a symlink, owned
// by the user, mode 0700 — hold for $XDG_RUNTIME_DIR itself, and for the
// socket's directory in it or in /tmp, made 0700 when missing. shared is
// the socket's Access when it is given (serve --group, --mode): the
// directory may then let in whom its mode does (see ListenAccess), and no
// more. A directory that breaks the rules is refused, with what to do, and
// nothing is changed.
func PrepareSocketDir(shared *Access) error {
	if os.Getenv("UETRACE_SOCKET") != "" || os.Geteuid() == 0 {
		return nil
	}
	perm := fs.FileMode(0o700)
	if shared != nil {
		perm = dirMode(shared.Mode)
	}
	dir := filepath.Dir(wire.DefaultSocket())
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		if err := checkOwnDir(x, 0o700, "XDG_RUNTIME_DIR"); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("the socket's directory %s: %w", dir, err)
	}
	return checkOwnDir(dir, perm, "the socket's directory")
}

// checkOwnDir checks that dir is a directory (lstat: not a symlink) owned
// by this user with mode perm or one that lets fewer in.
func checkOwnDir(dir string, perm fs.FileMode, what string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fix := "remove it (or ask its owner or root to) and start again, or give uetrace serve --socket in a directory of your own"
	if what == "XDG_RUNTIME_DIR" {
		fix = "fix or unset XDG_RUNTIME_DIR (the XDG Base Directory rules: owned by you, mode 0700), or give uetrace serve --socket in a directory of your own"
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s %s is a symbolic link, which anyone who made it can point elsewhere: %s: %w", what, dir, fix, unix.EPERM)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s %s is not a directory: %s: %w", what, dir, fix, unix.ENOTDIR)
	case st.Uid != uid:
		return fmt.Errorf("%s %s is owned by %s (uid %d), not by you (uid %d): whoever owns it can replace the socket and receive your programs' events; %s: %w",
			what, dir, wire.UserName(st.Uid), st.Uid, uid, fix, unix.EPERM)
	case fs.FileMode(st.Mode)&0o777&^perm != 0:
		return fmt.Errorf("%s %s has mode %04o, which lets others in (want %04o): chmod %04o %s, or %s: %w",
			what, dir, st.Mode&0o777, uint32(perm), uint32(perm), dir, fix, unix.EPERM)
	}
	return nil
}
