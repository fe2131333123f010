package subsys

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteStamped: a record handed over with its own time, thread and
// CPU shows them in the trace, not the subsystem's clock; it goes through
// the write's checks in the write's order, with the write's errnos, and its
// index is the file's own.
func TestWriteStamped(t *testing.T) {
	now := uint64(5_000_000_000)
	e := newTraceEnv(t, &now)
	f := e.s.Open()
	defer f.Close()
	idx, err := e.reg(f, "__st u32 a; __data_loc char[] s", 31, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 77, TGID: 70, Comm: "ringer", CPU: 1}
	good := append(le32(5), le32(3<<16|16)...)
	good = append(good, "ok\x00"...)
	wantErrno(t, "disabled", errOnly(f.WriteStamped(w, 1, idx, good)), unix.EBADF)
	e.enable("__st", true)
	wantErrno(t, "unknown index", errOnly(f.WriteStamped(w, 1, idx+1, good)), unix.ENOENT)
	wantErrno(t, "negative index", errOnly(f.WriteStamped(w, 1, 1<<31, good)), unix.EINVAL)
	wantErrno(t, "short payload", errOnly(f.WriteStamped(w, 1, idx, good[:7])), unix.EINVAL)
	bad := append(le32(5), le32(3<<16|16)...)
	bad = append(bad, "ok!"...)
	wantErrno(t, "unterminated string", errOnly(f.WriteStamped(w, 1, idx, bad)), unix.EFAULT)
	other := e.s.Open()
	defer other.Close()
	wantErrno(t, "another file's index", errOnly(other.WriteStamped(w, 1, idx, good)), unix.ENOENT)
	if n, err := f.WriteStamped(w, 1_234_567_000, idx, good); err != nil || n != 4+len(good) {
		t.Fatalf("WriteStamped: %d, %v", n, err)
	}
	tr := e.read("trace")
	if !strings.Contains(tr, "ringer-77      [001] .....     1.234567: __st: a=0x5 (5) s=ok") {
		t.Errorf("trace:\n%s", tr)
	}
	if strings.Count(tr, "__st:") != 1 {
		t.Errorf("rejected records reached the trace:\n%s", tr)
	}
}

func errOnly(_ int, err error) error { return err }
