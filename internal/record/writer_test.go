package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The file a backgroundWriter leaves is the one direct writes and seeks
// would: writes in order, seeks after the writes before them.
func TestBackgroundWriterOrder(t *testing.T) {
	dir := t.TempDir()
	direct, err := os.Create(filepath.Join(dir, "direct"))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	f, err := os.Create(filepath.Join(dir, "background"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bw := newBackgroundWriter(f)
	buf := make([]byte, 3000)
	for i := range 200 {
		for j := range buf {
			buf[j] = byte(i + j)
		}
		for _, w := range []io.WriteSeeker{direct, bw} {
			if _, err := w.Write(buf[:100+i*13]); err != nil {
				t.Fatal(err)
			}
			if i%50 == 49 { // rewrite the start, as perfdata does with its header
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
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(direct.Name())
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, want) {
		t.Fatalf("background writes made %d bytes unlike the %d of direct ones", len(got), len(want))
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
func TestBackgroundWriterError(t *testing.T) {
	bw := newBackgroundWriter(&failingFile{})
	bw.Write([]byte("ok"))
	bw.Write([]byte("fails"))
	if _, err := bw.Seek(0, io.SeekStart); !errors.Is(err, errDiskFull) {
		t.Errorf("Seek after a failed write: %v", err)
	}
	if _, err := bw.Write([]byte("more")); !errors.Is(err, errDiskFull) {
		t.Errorf("Write after a failed write: %v", err)
	}
	if err := bw.Close(); !errors.Is(err, errDiskFull) {
		t.Errorf("Close after a failed write: %v", err)
	}
}
