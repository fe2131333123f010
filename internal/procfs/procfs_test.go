package procfs

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadFile(t *testing.T) {
	b, err := ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 100 {
		t.Fatalf("read %d bytes of /proc/self/status", len(b))
	}
	want, _ := os.ReadFile("testdata/mountinfo")
	if got, err := ReadFile("testdata/mountinfo"); err != nil || string(got) != string(want) {
		t.Errorf("ReadFile = %q, %v; want %q", got, err, want)
	}
	if _, err := ReadFile("testdata/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestReadFileAt: below a /proc/<pid> directory held open, the process it
// was opened for — and, once that process has gone, ESRCH.
func TestReadFileAt(t *testing.T) {
	dir, err := unix.Open("/proc/self", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dir)
	b, err := ReadFileAt(dir, "status")
	if err != nil {
		t.Fatal(err)
	}
	if s := ParseStatus(b); s.Tgid != os.Getpid() {
		t.Errorf("status below /proc/self: Tgid %d, want %d", s.Tgid, os.Getpid())
	}
	if _, err := ReadFileAt(dir, "none"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
