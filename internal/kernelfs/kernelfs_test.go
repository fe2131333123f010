package kernelfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procmem/procmemtest"
)

// File's errors say what the errno means for user_events: ENOENT that the
// kernel has none; EACCES where the file is there (stat finds it) that it
// has them, and where it is not, that it has none; and EACCES in a
// directory the user may not enter that this cannot be known — an ordinary
// user before tracefs's 0700 root was told "the kernel has user_events" on
// a kernel without them.
func TestFileErrors(t *testing.T) {
	without, with := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(with, "user_events_data"), nil, 0o200); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		root  string
		errno unix.Errno
		want  string
	}{
		{without, unix.ENOENT, "no such file or directory (ENOENT): this kernel has no user_events (CONFIG_USER_EVENTS)"},
		{with, unix.EACCES, "permission denied (EACCES): this kernel has user_events; this user may not open them"},
		{with, unix.EPERM, "operation not permitted (EPERM): this kernel has user_events; this user may not open them"},
		{without, unix.EACCES, "permission denied (EACCES): this kernel has no user_events (CONFIG_USER_EVENTS)"},
	} {
		_, err := File(c.root, "user_events_data", func(string) error { return c.errno })
		want := "open " + filepath.Join(c.root, "user_events_data") + ": " + c.want
		if !errors.Is(err, c.errno) || err.Error() != want {
			t.Errorf("File with %v: %v\nwant %s", c.errno, err, want)
		}
	}
}

func TestFileUnsearchableRoot(t *testing.T) {
	// A root this user may not enter: for root's tracefs, mode 0700 keeps
	// out everyone else; here mode 0 keeps out its owner too. Its parent
	// is one anyone may enter (t.TempDir's is 0700).
	dir, err := os.MkdirTemp("", "kernelfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root := filepath.Join(dir, "tracing")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0); err != nil {
		t.Fatal(err)
	}
	open := func() error {
		_, err := File(root, "user_events_data", func(path string) error {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
		return err
	}
	if os.Geteuid() == 0 {
		// Root enters any directory: as nobody, on a thread of its own.
		err = procmemtest.AsUser(t, 65534, open)
	} else {
		err = open()
	}
	want := "this user may not enter " + root + ", so whether this kernel has user_events is not known"
	if !errors.Is(err, unix.EACCES) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("File in a directory this user may not enter: %v\nwant it to end %q", err, want)
	}
}
