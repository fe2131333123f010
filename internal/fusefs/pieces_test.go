package fusefs

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/procmem"
)

// TestPieces: the pieces of a write taken whole are taken in order, each
// once; a request of another call, at another offset, longer than what is
// left or too late is not a piece, and ends the wait.
func TestPieces(t *testing.T) {
	call := procfs.Syscall{Nr: unix.SYS_WRITEV, Args: [6]uint64{3, 0x1000, 300}}
	other := call
	other.Args[1] = 0x2000
	var p pieces
	p.expect(7, call, 100, 30)
	for _, c := range []struct {
		tid  int
		call procfs.Syscall
		off  int64
		n    int
		want bool
	}{
		{8, call, 100, 10, false}, // another thread
		{7, call, 100, 10, true},  // the next piece
		{7, call, 110, 10, true},  // and the next
		{7, call, 120, 10, true},  // the last
		{7, call, 130, 10, false}, // nothing left
		{7, call, 100, 10, false}, // not a second time
	} {
		if got := p.take(c.tid, c.call, c.off, c.n); got != c.want {
			t.Errorf("take(%d, %v, %d, %d) = %v, want %v", c.tid, c.call.Args, c.off, c.n, got, c.want)
		}
	}
	for name, bad := range map[string]func(){
		"another call":      func() { p.take(7, other, 100, 10) },
		"another offset":    func() { p.take(7, call, 101, 10) },
		"more than is left": func() { p.take(7, call, 100, 31) },
	} {
		p.expect(7, call, 100, 30)
		bad()
		if p.take(7, call, 100, 10) {
			t.Errorf("%s: the wait went on", name)
		}
	}
	p.expect(7, call, 100, 30)
	r := p.m[7]
	r.at = time.Now().Add(-restFor - time.Second)
	p.m[7] = r
	if p.take(7, call, 100, 10) {
		t.Error("a piece taken after restFor")
	}
	// Bounded: past maxRests, the oldest wait is forgotten.
	for tid := range maxRests + 1 {
		p.expect(tid+100, call, 0, 1)
	}
	if len(p.m) != maxRests {
		t.Errorf("%d waits, want at most %d", len(p.m), maxRests)
	}
	if p.take(100, call, 0, 1) || !p.take(maxRests+100, call, 0, 1) {
		t.Error("not the oldest wait forgotten")
	}
}

// TestWhole reads a writev's iovecs whole from this process, and refuses
// what it cannot read all of.
func TestWhole(t *testing.T) {
	a, b := []byte("abcd"), []byte("efg")
	iov := []unix.Iovec{{Base: &a[0]}, {}, {Base: &b[0]}}
	iov[0].SetLen(len(a))
	iov[2].SetLen(len(b))
	mem, err := procmem.Open(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	call := procfs.Syscall{Nr: unix.SYS_WRITEV, Args: [6]uint64{3, uint64(uintptr(unsafe.Pointer(&iov[0]))), 3}}
	if got, ok := whole(mem, call, 7); !ok || string(got) != "abcdefg" {
		t.Errorf("whole = %q, %v; want abcdefg", got, ok)
	}
	if _, ok := whole(mem, call, 8); ok {
		t.Error("whole read more than the iovecs hold")
	}
	w := procfs.Syscall{Nr: unix.SYS_WRITE, Args: [6]uint64{3, uint64(uintptr(unsafe.Pointer(&a[0]))), 4}}
	if got, ok := whole(mem, w, 4); !ok || string(got) != "abcd" {
		t.Errorf("whole(write) = %q, %v; want abcd", got, ok)
	}
	if _, ok := whole(mem, w, maxWhole+1); ok {
		t.Error("whole read more than maxWhole")
	}
	if _, ok := whole(mem, procfs.Syscall{Nr: unix.SYS_READ}, 4); ok {
		t.Error("whole read the buffer of a read(2)")
	}
}
