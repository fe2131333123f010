package subsys

import (
	"testing"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// newOtherEnv is newDeliverEnv with another File, g, of event __other,
// which the session does not consume.
func newOtherEnv(t *testing.T) (d *deliverEnv, g *File, other *Event) {
	d = newDeliverEnv(t, false)
	g = d.s.Open()
	t.Cleanup(func() { g.Close() })
	if _, err := d.reg(g, "__other u32 z", 10, 0); err != nil {
		t.Fatal(err)
	}
	return d, g, d.s.Lookup("user_events", "__other")
}

// TestHandTo: a File is handed to a session that is the only consumer of
// its events, unfiltered, delivering into streams — and the hand-over
// ends, back called under the lock before the change, at each thing that
// would change where its records go; never for an unrelated event.
func TestHandTo(t *testing.T) {
	type step struct {
		name   string
		change func(d *deliverEnv, other *Event) error
		back   bool
	}
	steps := []step{
		{"an unrelated event enabled", func(d *deliverEnv, other *Event) error { return d.s.SetFtrace(other, true) }, false},
		{"the trace buffer enabled", func(d *deliverEnv, other *Event) error { return d.s.SetFtrace(d.s.Lookup("user_events", "__da"), true) }, true},
		{"another session attached", func(d *deliverEnv, other *Event) error {
			ss := d.s.NewSession(SessionOptions{BufferBytes: 1 << 16})
			d.t.Cleanup(func() { ss.Close() })
			return ss.Attach(d.s.Lookup("user_events", "__db"))
		}, true},
		{"a filter of the session", func(d *deliverEnv, other *Event) error {
			return d.ss.SetFilter(d.s.Lookup("user_events", "__db"), "x > 1")
		}, true},
		{"the session detached", func(d *deliverEnv, other *Event) error { d.ss.Detach(d.s.Lookup("user_events", "__da")); return nil }, true},
		{"an event added to the file", func(d *deliverEnv, other *Event) error {
			_, err := d.reg(d.f, "__dc u32 y", 20, 0)
			return err
		}, true},
		{"the session closed", func(d *deliverEnv, other *Event) error { return d.ss.Close() }, true},
		{"the file closed", func(d *deliverEnv, other *Event) error { return d.f.Close() }, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			d, _, other := newOtherEnv(t)
			backs := 0
			ho, ok := d.f.HandTo(d.ss, nil, func() { backs++ })
			if !ok {
				t.Fatal("not handed: the session is the only consumer")
			}
			if len(ho.Events) != 2 || !ho.Comm {
				t.Fatalf("hand-over %+v", ho)
			}
			for i, name := range []string{"__da", "__db"} {
				ev := d.s.Lookup("user_events", name)
				if ho.Events[i].SampleID != wire.SampleID(ev.ID()) || ho.Events[i].Def.Name != name {
					t.Errorf("index %d: %+v, want %s's sample id", i, ho.Events[i], name)
				}
			}
			if _, ok := d.f.HandTo(d.ss, nil, func() {}); ok {
				t.Fatal("handed twice under one key")
			}
			// A second process writing through the file (forked): its
			// own hand-over, ended with the first.
			if _, ok := d.f.HandTo(d.ss, "child", func() { backs++ }); !ok {
				t.Fatal("the second process's hand-over refused")
			}
			if err := st.change(d, other); err != nil {
				t.Fatal(err)
			}
			if got := backs == 2; got != st.back || (d.f.Handed() > 0) == st.back {
				t.Errorf("back called %d times, %d hand-overs on; want both backs %v", backs, d.f.Handed(), st.back)
			}
		})
	}
}

// TestHandToRefused: no hand-over while another consumer or a filter
// would see the file's records, or the session reads from its buffer.
func TestHandToRefused(t *testing.T) {
	cases := map[string]func(d *deliverEnv) *Session{
		"trace buffer": func(d *deliverEnv) *Session {
			if err := d.s.SetFtrace(d.s.Lookup("user_events", "__db"), true); err != nil {
				t.Fatal(err)
			}
			return d.ss
		},
		"another session": func(d *deliverEnv) *Session {
			ss := d.s.NewSession(SessionOptions{BufferBytes: 1 << 16})
			t.Cleanup(func() { ss.Close() })
			if err := ss.Attach(d.s.Lookup("user_events", "__da")); err != nil {
				t.Fatal(err)
			}
			return d.ss
		},
		"a filter": func(d *deliverEnv) *Session {
			if err := d.ss.SetFilter(d.s.Lookup("user_events", "__da"), "a == 1"); err != nil {
				t.Fatal(err)
			}
			return d.ss
		},
		"a session without streams": func(d *deliverEnv) *Session {
			d.ss.Close()
			ss := d.s.NewSession(SessionOptions{BufferBytes: 1 << 16})
			t.Cleanup(func() { ss.Close() })
			for _, name := range []string{"__da", "__db"} {
				if err := ss.Attach(d.s.Lookup("user_events", name)); err != nil {
					t.Fatal(err)
				}
			}
			return ss
		},
		"no event of the session's": func(d *deliverEnv) *Session {
			d.ss.Close()
			ss, _ := streamSession(t, d.s, 3, 1<<16, SessionOptions{})
			return ss
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			d := newDeliverEnv(t, false)
			ss := setup(d)
			if _, ok := d.f.HandTo(ss, nil, func() { t.Error("back called") }); ok {
				t.Error("handed")
			}
		})
	}
}

// TestHandBackKey: HandBack ends only the hand-over it names — not one
// made after it ended, nor another of the file's.
func TestHandBackKey(t *testing.T) {
	d := newDeliverEnv(t, false)
	first, second := new(int), new(int)
	if _, ok := d.f.HandTo(d.ss, first, func() {}); !ok {
		t.Fatal("not handed")
	}
	d.f.HandBack(first)
	if _, ok := d.f.HandTo(d.ss, second, func() {}); !ok {
		t.Fatal("not handed again")
	}
	d.f.HandBack(first)
	if d.f.Handed() == 0 {
		t.Fatal("HandBack of the first ended the second")
	}
	third := new(int)
	if _, ok := d.f.HandTo(d.ss, third, func() {}); !ok {
		t.Fatal("a second hand-over of the file refused")
	}
	d.f.HandBack(second)
	if d.f.Handed() != 1 {
		t.Fatalf("%d hand-overs on after one of two ended", d.f.Handed())
	}
	d.f.HandBack(third)
	if d.f.Handed() > 0 {
		t.Fatal("still handed")
	}
}

// TestSyncScope: each operation that may change an event's state tells the
// sync hooks which events it may change, so that the daemon takes back
// only the hand-overs it concerns: a File it touches is one with an event
// in it, one it does not is untouched — and what cannot be narrowed says
// every event.
func TestSyncScope(t *testing.T) {
	d, g, other := newOtherEnv(t)
	mine := d.s.Lookup("user_events", "__da")
	var scopes []Scope
	remove := d.s.AddSyncHook(func(sc Scope) { scopes = append(scopes, sc) })
	t.Cleanup(remove)
	stranger := d.s.NewSession(SessionOptions{BufferBytes: 1 << 16})
	t.Cleanup(func() { stranger.Close() })

	cases := []struct {
		name       string
		op         func() error
		mine, them bool // the scope touches d.f, g
	}{
		{"an unrelated event enabled", func() error { return d.s.SetFtrace(other, true) }, false, true},
		{"the handed event enabled", func() error { return d.s.SetFtrace(mine, true) }, true, false},
		{"an unrelated event's enable file", func() error { return d.write("events/user_events/__other/enable", "0") }, false, true},
		{"the handed event's filter file", func() error { return d.write("events/user_events/__db/filter", "0") }, true, false},
		{"the system's enable file", func() error { return d.write("events/user_events/enable", "0") }, true, true},
		{"tracing_on", func() error { return d.write("tracing_on", "1") }, true, true},
		{"another session attached to an unrelated event", func() error { return stranger.Attach(other) }, false, true},
		{"another session detached from it", func() error { stranger.Detach(other); return nil }, false, true},
		{"a pattern of unrelated events", func() error { _, err := stranger.AttachMatching("user_events:__oth*", false); return err }, false, true},
		{"a pattern of the handed events", func() error { _, err := stranger.AttachMatching("__d?", false); return err }, true, false},
		{"a session of unrelated events closed", func() error {
			ss := d.s.NewSession(SessionOptions{BufferBytes: 1 << 16})
			if err := ss.Attach(other); err != nil {
				return err
			}
			scopes = scopes[:0]
			return ss.Close()
		}, false, true},
		{"the handed events' session closed", func() error { return d.ss.Close() }, true, false},
	}
	for _, c := range cases {
		scopes = scopes[:0]
		if err := c.op(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(scopes) == 0 {
			t.Errorf("%s: the sync hooks did not run", c.name)
			continue
		}
		sc := scopes[len(scopes)-1]
		if got := sc.Touches(d.f); got != c.mine {
			t.Errorf("%s: touches the handed file: %v, want %v", c.name, got, c.mine)
		}
		if got := sc.Touches(g); got != c.them {
			t.Errorf("%s: touches the other file: %v, want %v", c.name, got, c.them)
		}
	}
}
