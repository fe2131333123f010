package daemon

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Access is who may connect to a daemon's socket: its permission bits and
// its group. Connecting to a Unix socket needs write permission on it and
// search permission on every directory above it.
type Access struct {
	// Mode is the socket's permission bits (0: 0660, owner and group).
	Mode fs.FileMode
	// SetGroup gives the socket, and the directory ListenAccess makes for
	// it, the group GID; without it they have the daemon's.
	SetGroup bool
	GID      int
}

// DefaultAccess is Listen's: the owner and the daemon's group, read and
// write. It is the zero Access too.
var DefaultAccess = Access{Mode: 0o660}

// dirMode is the mode of a directory for a socket of mode m: the owner's
// rwx, and search (with read) for the group and the others when m lets
// them connect.
func dirMode(m fs.FileMode) fs.FileMode {
	d := fs.FileMode(0o700)
	if m&0o060 != 0 {
		d |= 0o050
	}
	if m&0o006 != 0 {
		d |= 0o005
	}
	return d
}

// ListenAccess is Listen with the socket's mode and group given by a. The
// socket's directory is made with the group and the search permission the
// mode needs when Listen creates it, or when it is the daemon's own: owned
// by this user and holding nothing else. Any other directory (/tmp, a
// home) is left as it is — see SocketDirBlocks.
func ListenAccess(path string, a Access) (*net.UnixListener, error) {
	if a.Mode == 0 {
		a.Mode = DefaultAccess.Mode
	}
	if a.Mode&^fs.ModePerm != 0 {
		return nil, fmt.Errorf("listen %s: mode %04o has bits beyond the permissions (0777): %w", path, uint32(a.Mode), unix.EINVAL)
	}
	dir := filepath.Dir(path)
	_, err := os.Stat(dir)
	created := os.IsNotExist(err)
	if created {
		if err := os.MkdirAll(dir, dirMode(a.Mode)); err != nil {
			return nil, fmt.Errorf("listen %s: %w", path, err)
		}
	}
	if created || ownDir(dir, filepath.Base(path)) {
		gid := -1
		if a.SetGroup {
			gid = a.GID
		}
		if err := setAccess(dir, unix.S_IFDIR, dirMode(a.Mode), gid); err != nil {
			return nil, fmt.Errorf("listen %s: directory: %w", path, err)
		}
	}
	ln, err := listen(path)
	if err != nil {
		return nil, err
	}
	gid := -1
	if a.SetGroup {
		gid = a.GID
	}
	if err := setAccess(path, unix.S_IFSOCK, a.Mode, gid); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// setAccess gives what is at path, which must be of type typ (unix.S_IFSOCK,
// unix.S_IFDIR), mode perm and, unless gid is -1, group gid — never what a
// symbolic link there points to. Between the bind (or the mkdir) and the
// chmod, whoever may write the directory can replace the socket with a link
// to any file, which os.Chmod would follow: a root daemon would make that
// file mode 0666. So the name is opened without following a link (O_PATH,
// O_NOFOLLOW), its type checked, and the inode changed through that
// descriptor. Anything else there is EPERM, and nothing is changed.
func setAccess(path string, typ uint32, perm fs.FileMode, gid int) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != typ {
		return fmt.Errorf("%s was replaced (mode %#o) between its making and its chmod — someone else may write its directory; give a directory only you may write: %w", path, st.Mode, unix.EPERM)
	}
	if gid >= 0 {
		if err := unix.Fchownat(fd, "", -1, gid, unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("giving %s group %d: %w", path, gid, err)
		}
	}
	// chmod of an O_PATH descriptor's /proc/self/fd link changes its inode
	// (as glibc's fchmodat with AT_SYMLINK_NOFOLLOW does): fchmod refuses
	// O_PATH descriptors.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), uint32(perm)); err != nil {
		return &os.PathError{Op: "chmod", Path: path, Err: err}
	}
	return nil
}

// ownDir reports whether dir is this user's and holds at most the socket.
func ownDir(dir, sock string) bool {
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || int(s.Uid) != os.Geteuid() {
		return false
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name() != sock {
			return false
		}
	}
	return true
}

// SocketDirBlocks names the first directory above path that keeps out
// someone the socket's mode m lets in (group or others without search
// permission), or "" when none does.
func SocketDirBlocks(path string, m fs.FileMode) string {
	need := fs.FileMode(0)
	if m&0o060 != 0 {
		need |= 0o010
	}
	if m&0o006 != 0 {
		need |= 0o001
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&need != need {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}
