package ftrace

import (
	"errors"
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// readAll reads t from off on in reads of n bytes.
func readAll(t *testing.T, tr *TextReader, off int64, n int) string {
	t.Helper()
	var out []byte
	p := make([]byte, n)
	for {
		k, err := tr.ReadAt(p, off)
		out = append(out, p[:k]...)
		off += int64(k)
		if err == io.EOF || k == 0 {
			return string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestTextReader: the text read as it is made is the trace file's text,
// whatever the read size; a read back at 0 makes it again, a read ahead
// skips; what the reader holds stays about one read's worth; the buffers
// cannot be resized while it is open.
func TestTextReader(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 64})
	w := newWriter(t)
	for i := range 3000 {
		r.Write(w.entry(i%2, uint64(i)*1000, 4+i%40))
	}
	want := string(r.AppendTrace(nil, -1))
	if len(want) < 100<<10 {
		t.Fatalf("the test's trace is only %d bytes", len(want))
	}
	for _, n := range []int{1, 7, 100, 4096, 128 << 10, 1 << 20} {
		tr := r.NewTextReader(-1)
		if got := readAll(t, tr, 0, n); got != want {
			t.Errorf("read %d bytes at a time: %d bytes, want %d (first difference at %d)", n, len(got), len(want), firstDiff(got, want))
		}
		if n <= 4096 && cap(tr.buf) > 2*n+MaxRecordSize*4 {
			t.Errorf("reads of %d bytes: the reader grew a buffer of %d", n, cap(tr.buf))
		}
		// Back to 0: the same text again (nothing was written since).
		if got := readAll(t, tr, 0, 4096); got != want {
			t.Errorf("read again from 0 after reads of %d: %d bytes, want %d", n, len(got), len(want))
		}
		tr.Close()
	}
	// A read ahead of where the last ended.
	tr := r.NewTextReader(-1)
	p := make([]byte, 100)
	if _, err := tr.ReadAt(p, 10); err != nil {
		t.Fatal(err)
	}
	off := int64(len(want) / 2)
	k, err := tr.ReadAt(p, off)
	if err != nil || string(p[:k]) != want[off:off+100] {
		t.Errorf("read at %d: %q, %v; want %q", off, p[:k], err, want[off:off+100])
	}
	if k, err := tr.ReadAt(p, int64(len(want))); k != 0 || err != io.EOF {
		t.Errorf("read at the end: %d, %v; want 0, EOF", k, err)
	}
	if err := r.Resize(128); !errors.Is(err, unix.EBUSY) {
		t.Errorf("resize with the trace open: %v, want EBUSY", err)
	}
	tr.Close()
	if err := r.Resize(128); err != nil {
		t.Errorf("resize after close: %v", err)
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzTextReader: reads at any offsets and of any sizes — what a FUSE or
// socket client sends — return the trace text's bytes there, or EOF past
// its end.
func FuzzTextReader(f *testing.F) {
	r := New(Config{NCPU: 2, BufferKB: 16})
	w := newWriter(f)
	for i := range 600 {
		r.Write(w.entry(i%2, uint64(i)*1000, 4+i%40))
	}
	want := r.AppendTrace(nil, -1)
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 255})
	f.Add([]byte{0, 0, 200, 1, 0, 0, 0, 3, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tr := r.NewTextReader(-1)
		defer tr.Close()
		for len(ops) >= 4 {
			off := int64(ops[0])<<8 | int64(ops[1])
			off = off * int64(len(want)) / 65535
			n := int(ops[2])<<8 | int(ops[3]) + 1
			ops = ops[4:]
			p := make([]byte, n)
			k, err := tr.ReadAt(p, off)
			end := min(off+int64(n), int64(len(want)))
			if off >= int64(len(want)) {
				end = off
			}
			if string(p[:k]) != string(want[off:end]) {
				t.Fatalf("read %d at %d: %d bytes differ from the text's", n, off, k)
			}
			if (k < n) != (err == io.EOF) {
				t.Fatalf("read %d at %d: %d bytes, %v", n, off, k, err)
			}
		}
	})
}
