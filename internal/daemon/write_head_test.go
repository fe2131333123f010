package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"golang.org/x/sys/unix"
)

// TestWriteLongerThanMessage: a write longer than a message holds
// (wire.MaxWrite) is answered as Linux answers it — which takes any length,
// checks the index, the size and the event's state, and drops a record no
// consumer can hold unvalidated — not refused with EMSGSIZE. The answers
// are the kernel's (conformance/scenarios/write-large-limit.scn).
func TestWriteLongerThanMessage(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	c := a.dial(t, s.sock)
	idx, _, err := c.Register(reg(a.addr(0), 0), "long_write __rel_loc char[] s", false)
	if err != nil {
		t.Fatal(err)
	}
	// A __rel_loc string of 65535 bytes without its NUL, and after it
	// 40000 bytes more: 105543 bytes in all, in three slices.
	rec := func(index uint32) [][]byte {
		head := wire.LE.AppendUint32(wire.LE.AppendUint32(nil, index), 0xffff<<16)
		return [][]byte{head, []byte(strings.Repeat("a", 0xffff)), make([]byte, 40000)}
	}
	const total = 8 + 0xffff + 40000
	if _, err := c.Writev(1, 0, rec(idx)...); !errors.Is(err, unix.EBADF) {
		t.Errorf("disabled: %v, want EBADF", err)
	}
	if err := writeFile(c, "events/user_events/long_write/enable", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Writev(1, 0, rec(idx+1)...); !errors.Is(err, unix.ENOENT) {
		t.Errorf("an index the file does not have: %v, want ENOENT", err)
	}
	if n, err := c.Writev(1, 0, rec(idx)...); err != nil || n != total {
		t.Errorf("enabled: %d, %v; want %d", n, err, total)
	}
	if n, err := c.Writev(1, 0, rec(idx)[:2]...); err != nil || n != 8+0xffff {
		t.Errorf("the string alone: %d, %v; want %d", n, err, 8+0xffff)
	}
	if got := readFile(t, c, "uetrace_event_counts"); got != "long_write 2 2\n" {
		t.Errorf("counts %q, want both records written and dropped", got)
	}
}
