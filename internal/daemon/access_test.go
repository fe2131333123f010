package daemon

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"golang.org/x/sys/unix"
)

// Hangup fires when the daemon goes, and when the client closes; not
// before.
func TestClientHangup(t *testing.T) {
	s := serve(t, Config{})
	c, err := client.Dial(s.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Hangup()
	if _, err := c.ReadDir("events"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h:
		t.Fatal("Hangup fired on a live connection")
	default:
	}
	s.Close()
	select {
	case <-h:
	case <-time.After(30 * time.Second):
		t.Fatal("no Hangup 30s after the daemon closed")
	}
	c.Close()

	s2 := serve(t, Config{})
	c2, err := client.Dial(s2.sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	h2 := c2.Hangup()
	c2.Close()
	select {
	case <-h2:
	case <-time.After(30 * time.Second):
		t.Fatal("no Hangup 30s after Close")
	}
	select {
	case <-c2.Hangup():
	default:
		t.Error("Hangup of a closed client is not ready")
	}
}

func TestListenAccess(t *testing.T) {
	base := t.TempDir()
	gid := os.Getegid()
	sock := filepath.Join(base, "new", "d.sock")
	ln, err := ListenAccess(sock, Access{Mode: 0o666, SetGroup: true, GID: gid})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for path, want := range map[string]fs.FileMode{sock: 0o666, filepath.Dir(sock): 0o755} {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if fs.FileMode(st.Mode&0o777) != want || int(st.Gid) != gid {
			t.Errorf("%s: mode %04o gid %d, want %04o %d", path, st.Mode&0o777, st.Gid, want, gid)
		}
	}
	// A directory with other things in it is not the daemon's to change.
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o700)
	os.WriteFile(filepath.Join(shared, "other"), nil, 0o600)
	ln2, err := ListenAccess(filepath.Join(shared, "d.sock"), Access{Mode: 0o666})
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o700 {
		t.Errorf("a shared directory became %04o", st.Mode().Perm())
	}
	if d := SocketDirBlocks(filepath.Join(shared, "d.sock"), 0o666); d != shared {
		t.Errorf("SocketDirBlocks = %q, want %q", d, shared)
	}
	if _, err := ListenAccess(filepath.Join(base, "x.sock"), Access{Mode: fs.ModeSticky | 0o666}); !errors.Is(err, unix.EINVAL) {
		t.Errorf("a mode beyond 0777: %v, want EINVAL", err)
	}
}

// A refused connection names the socket, its owner, group and mode.
func TestDialPermissionError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is never refused; cmd/uetrace tests this as another uid")
	}
	s := serve(t, Config{})
	os.Chmod(s.sock, 0o000)
	_, err := client.Dial(s.sock, nil)
	var pe *client.PermissionError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.EACCES) || pe.Path != s.sock || pe.Mode != 0 {
		t.Errorf("client.Dial of a 0000 socket: %v", err)
	}
}

// Whoever may write the socket's directory can, in the instant between the
// bind and the chmod, replace the socket with a symbolic link to any file:
// os.Chmod followed it, and a root daemon serving --mode 0666 in such a
// directory made that file 0666 (`uetrace serve --socket DIR/uetrace.sock
// --mode 0666` as root, DIR another user's, that user renaming the socket
// and linking its name to a root file of mode 0600, changed it at the first
// start). Now the name is changed only if it is still a socket: EPERM, the
// file untouched.
func TestListenDoesNotFollowAReplacedSocket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen func(path string) (net.Listener, error)
	}{
		{"ListenAccess", func(path string) (net.Listener, error) {
			return ListenAccess(path, Access{Mode: 0o666, GID: os.Getgid(), SetGroup: true})
		}},
		{"Listen", func(path string) (net.Listener, error) { return Listen(path) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			secret := filepath.Join(dir, "secret")
			if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			sockDir := filepath.Join(dir, "run")
			if err := os.Mkdir(sockDir, 0o777); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(sockDir, "uetrace.sock")
			afterBind = func(path string) {
				if err := os.Rename(path, filepath.Join(sockDir, "moved")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(secret, path); err != nil {
					t.Error(err)
				}
			}
			t.Cleanup(func() { afterBind = func(string) {} })
			ln, err := tc.listen(sock)
			if err == nil {
				ln.Close()
			}
			if !errors.Is(err, unix.EPERM) {
				t.Errorf("the socket replaced by a link after its bind: %v, want EPERM", err)
			}
			fi, err := os.Stat(secret)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("the file the link points to has mode %04o, want its 0600", fi.Mode().Perm())
			}
		})
	}
}
