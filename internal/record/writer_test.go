package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The file a fileWriter leaves is the one plain writes and seeks would:
// writes in order, seeks after the writes before them — whether its whole
// chunks go with O_DIRECT, or buffered because the file system refuses
// O_DIRECT at open or at the first write.
func TestFileWriterOrder(t *testing.T) {
	for _, c := range []struct {
		name   string
		open   func(*os.File) (int, error)
		direct bool
		shm    bool // in a tmpfs, which takes O_DIRECT since Linux 6.6 and refuses it before
	}{
		{"direct", openDirect, true, false},
		{"tmpfs", openDirect, false, true},
		{"refused at open", func(*os.File) (int, error) { return -1, unix.EINVAL }, false, false},
		// A descriptor the writes fail on, as a file system that takes
		// O_DIRECT at open and refuses the writes.
		{"refused at write", func(f *os.File) (int, error) { return unix.Open(f.Name(), unix.O_RDONLY|unix.O_CLOEXEC, 0) }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := openDirect
			openDirect = c.open
			defer func() { openDirect = orig }()
			dir := t.TempDir()
			if c.shm {
				var fs unix.Statfs_t
				if unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
					t.Skip("no tmpfs at /dev/shm")
				}
				d, err := os.MkdirTemp("/dev/shm", "uetrace-record-test")
				if err != nil {
					t.Skipf("no tmpfs directory: %v", err)
				}
				t.Cleanup(func() { os.RemoveAll(d) })
				dir = d
			}
			plain, err := os.Create(filepath.Join(dir, "plain"))
			if err != nil {
				t.Fatal(err)
			}
			defer plain.Close()
			f, err := os.Create(filepath.Join(dir, "staged"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fw := newFileWriter(f)
			buf := make([]byte, 64<<10)
			for i := range 200 {
				for j := range buf {
					buf[j] = byte(i + j)
				}
				for _, w := range []io.WriteSeeker{plain, fw} {
					if _, err := w.Write(buf[:100+i*313]); err != nil {
						t.Fatal(err)
					}
					if i == 0 || i == 199 { // a seek to where we are changes nothing
						if _, err := w.Seek(0, io.SeekCurrent); err != nil {
							t.Fatal(err)
						}
					}
					if i == 150 || i == 199 { // rewrite the start, as perfdata does with its header
						if _, err := w.Seek(int64(i), io.SeekStart); err != nil {
							t.Fatal(err)
						}
						if _, err := w.Write([]byte("header")); err != nil {
							t.Fatal(err)
						}
						if _, err := w.Seek(0, io.SeekEnd); err != nil {
							t.Fatal(err)
						}
					}
				}
				buf[0] = 0xff // the writer copied what it was given
			}
			direct, buffered := fw.directBytes.Load(), fw.bufferedBytes.Load()
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(plain.Name())
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got, want) {
				t.Fatalf("staged writes made %d bytes unlike the %d of plain ones", len(got), len(want))
			}
			switch {
			case c.direct && direct == 0:
				t.Skipf("the temporary directory's file system takes no O_DIRECT writes (%d bytes buffered): the staged file is right, the direct path untested", buffered)
			case c.direct && direct%chunkSize != 0:
				t.Errorf("%d bytes written with O_DIRECT: not whole chunks", direct)
			case !c.direct && !c.shm && direct != 0:
				t.Errorf("%d bytes written with O_DIRECT where it is refused", direct)
			}
			t.Logf("%d bytes with O_DIRECT, %d buffered", direct, buffered)
		})
	}
}

// failingFile fails its writes after the first.
type failingFile struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failingFile) Write(p []byte) (int, error) {
	if f.n++; f.n > 1 {
		return 0, errDiskFull
	}
	return len(p), nil
}

func (f *failingFile) Seek(int64, int) (int64, error) { return 0, nil }

// A write error comes back from a later Write, Seek and Close.
func TestFileWriterError(t *testing.T) {
	fw := newFileWriter(&failingFile{})
	fw.Write(make([]byte, chunkSize)) // a whole chunk: written, the first write
	fw.Write([]byte("fails"))
	if _, err := fw.Seek(0, io.SeekStart); !errors.Is(err, errDiskFull) {
		t.Errorf("Seek after a failed write: %v", err)
	}
	if _, err := fw.Write([]byte("more")); !errors.Is(err, errDiskFull) {
		t.Errorf("Write after a failed write: %v", err)
	}
	if err := fw.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close after a failed write: %v", err)
	}
}
