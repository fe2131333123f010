package fusefs_test

import (
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/subsys"
)

// Issue 28, item 6: through FUSE, events/user_events lists what Linux 6.12
// lists with an event of an empty name among them (see subsys's
// testdata/readdir-unlistable-6.12.txt): the entries before it, then EIO
// — not EIO for the whole directory; the events after it open by their
// paths.
func TestReadDirUnlistable(t *testing.T) {
	s, dir := mount(t)
	f := s.Open()
	defer f.Close()
	p := s.NewProcess(nopMem{})
	long := strings.Repeat("y", 300) // longer than NAME_MAX: eventfs lists it, and opens it
	for i, cmd := range []string{long + " u32 a", "ok_first u32 a", " u32 a", "ok_after u32 a"} {
		args := regArgs(cmd)
		args.Reg[4] = byte(i) // enable_bit: one bit each
		if _, err := f.Register(p, subsys.Cred{PerfmonCapable: true}, args); err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
	}
	got := sh(t, dir, `ls -f $T/events/user_events 2>&1; echo "exit $?"; cat $T/events/user_events/ok_after/id $T/events/user_events/`+long+`/id >/dev/null && echo ok_after opens`)
	want := ".\n..\nfilter\nenable\n" + long + "\nok_first\nls: reading directory '" + dir + "/events/user_events': Input/output error\nexit 2\nok_after opens\n"
	if got != want {
		t.Errorf("ls -f:\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(sh(t, dir, `cat $T/available_events`), "user_events:ok_after\n") {
		t.Error("available_events leaves out ok_after")
	}
}
