package harness

import (
	"bytes"
	"strings"
	"testing"
)

// The waiting steps' syntax: what Parse takes and refuses.
func TestParseWaitSteps(t *testing.T) {
	for _, good := range []string{
		`del F "m" retry`,
		`del F "m" until events/user_events_multi/m.* 1`,
		`del F fault`,
		`wait-gone events/user_events/x`,
		`wait-count events/user_events_multi/m.* 0`,
	} {
		if _, err := Parse(good); err != nil {
			t.Errorf("Parse(%q): %v", good, err)
		}
	}
	for _, bad := range []string{
		`del F "m" again`,
		`del F "m" until events/x`,
		`del F "m" since events/x 1`,
		`wait-count events/x`,
		`wait-count events/x some`,
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// The waiting steps print what they found: the count they waited for, the
// last answer of a repeated delete, "gone". (A wait that ran out its limit
// would print another count or "still there".)
func TestWaitStepsInProcess(t *testing.T) {
	sc, err := Parse(`open F
reg F "m u32 a" bit=0 flags=multi
open G
reg G "m u64 b" bit=1 flags=persist,multi
unreg G bit=1
close G
wait-count events/user_events_multi/m.* 2
open H
del H "m" until events/user_events_multi/m.* 1
wait-count events/user_events_multi/m.* 1
unreg F bit=0
close F
del H "m" retry
wait-gone events/user_events_multi/m.*
`)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(Options{Backend: "inprocess"}, []*Scenario{{Name: "waits", Steps: sc}}, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"> wait-count events/user_events_multi/m.* 2\n= 2\n",
		"> del H \"m\" until events/user_events_multi/m.* 1\n= EBUSY\n",
		"> wait-count events/user_events_multi/m.* 1\n= 1\n",
		"> del H \"m\" retry\n= ",
		"> wait-gone events/user_events_multi/m.*\n= gone\n",
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}
