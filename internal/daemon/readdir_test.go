package daemon

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/subsys"
)

// Issue 28, item 6: a listing larger than a message comes in pages — 320
// events with 200-byte names, 8 000 short ones — where ReadDir failed
// with E2BIG and every tool that listed failed with it.
func TestReadDirPages(t *testing.T) {
	for _, tc := range []struct {
		n    int
		name func(i int) string
	}{
		{320, func(i int) string { return fmt.Sprintf("atk_v%03d_%s", i, strings.Repeat("x", 191)) }},
		{8000, func(i int) string { return fmt.Sprintf("atk_%d", i) }},
	} {
		s := serve(t, Config{})
		sys := s.Subsystem()
		want := []string{"filter", "enable"}
		for i := range tc.n {
			want = append(want, tc.name(i))
			if err := sys.FS().WriteFile("dynamic_events", []byte("u:"+tc.name(i)+" u32 a"), os.O_APPEND, subsys.Cred{PerfmonCapable: true}); err != nil {
				t.Fatal(err)
			}
		}
		c := newArena(t, 4096, unix.F_SEAL_SHRINK).dial(t, s.sock)
		ents, err := c.ReadDir("events/user_events")
		if err != nil {
			t.Fatalf("%d events: ReadDir: %v", tc.n, err)
		}
		var got []string
		for _, e := range ents {
			got = append(got, e.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d events: %d entries listed, want %d", tc.n, len(got), len(want))
		}
	}
}

// A listing that stops at an event no entry can name comes over the
// socket as it does through FUSE: the entries before it, then EIO.
func TestReadDirUnlistable(t *testing.T) {
	s := serve(t, Config{})
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c := a.dial(t, s.sock)
	for i, cmd := range []string{"ok_first u32 a", " u32 a", "ok_after u32 a"} {
		if _, _, err := c.Register(reg(a.addr(4*i), 0), cmd, false); err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
	}
	ents, err := c.ReadDir("events/user_events")
	var got []string
	for _, e := range ents {
		got = append(got, e.Name)
	}
	if !slices.Equal(got, []string{"filter", "enable", "ok_first"}) || !errors.Is(err, unix.EIO) {
		t.Errorf("ReadDir = %q, %v; want filter enable ok_first, then EIO", got, err)
	}
}
