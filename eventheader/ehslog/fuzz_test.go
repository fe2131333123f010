package ehslog_test

import (
	"fmt"
	"log/slog"
	"reflect"
	"testing"

	"github.com/uetrace/uetrace/eventheader/ehslog"
)

// script turns fuzz bytes into the same calls on two loggers: With,
// WithGroup, then one record of attributes — values, groups (nested,
// empty, inlined) and zero Attrs — kept within the format's limits (8
// nested structs, 127 fields) so that nothing is dropped.
type script struct {
	data []byte
	keys int
}

// next is the next byte, 0 at the end (no more attributes).
func (s *script) next() byte {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

func (s *script) key() string {
	s.keys++
	return fmt.Sprint("k", s.keys)
}

func (s *script) attrs(depth int) []slog.Attr {
	var as []slog.Attr
	for range int(s.next() % 6) {
		if s.keys > 100 {
			break
		}
		b := s.next()
		switch b % 7 {
		case 0:
			as = append(as, slog.Int(s.key(), int(b)-100))
		case 1:
			as = append(as, slog.String(s.key(), fmt.Sprint("v", b)))
		case 2:
			if depth < 7 {
				as = append(as, slog.Attr{Key: s.key(), Value: slog.GroupValue(s.attrs(depth + 1)...)})
			}
		case 3:
			as = append(as, slog.Attr{Key: "", Value: slog.GroupValue(s.attrs(depth)...)})
		case 4:
			as = append(as, slog.Attr{})
		case 5:
			as = append(as, slog.Bool(s.key(), b&8 != 0))
		case 6:
			as = append(as, slog.Float64(s.key(), float64(b)/4))
		}
	}
	return as
}

// model is what a handler must write for a script's calls, by slog's
// rules: the open groups, each with its attributes, as nested maps.
type model struct {
	groups []string
	maps   []map[string]any // maps[0] the top level, maps[i] groups[i-1]
}

// add puts attrs into m as slog asks of handlers: values resolved, zero
// Attrs ignored, empty groups omitted, groups with an empty key inlined.
func add(m map[string]any, attrs []slog.Attr) {
	for _, a := range attrs {
		v := a.Value.Resolve()
		switch {
		case v.Kind() == slog.KindGroup && a.Key == "":
			add(m, v.Group())
		case v.Kind() == slog.KindGroup:
			sub := map[string]any{}
			add(sub, v.Group())
			if len(sub) > 0 {
				m[a.Key] = sub
			}
		case a.Key == "" && v.Kind() == slog.KindAny && v.Any() == nil:
		default:
			m[a.Key] = v.Any()
		}
	}
}

// result is the record's fields, after the built-ins, with its attributes
// in the innermost group and the groups left empty dropped.
func (m *model) result(attrs []slog.Attr) map[string]any {
	add(m.maps[len(m.maps)-1], attrs)
	for i := len(m.maps) - 1; i > 0; i-- {
		if len(m.maps[i]) > 0 {
			m.maps[i-1][m.groups[i-1]] = m.maps[i]
		}
	}
	return m.maps[0]
}

// modelRun makes a script's calls on a model.
func (s *script) modelRun() *model {
	m := &model{maps: []map[string]any{{}}}
	for {
		if len(s.data) == 0 {
			return m
		}
		switch s.next() % 3 {
		case 0:
			add(m.maps[len(m.maps)-1], s.attrs(len(m.groups)))
		case 1:
			if len(m.groups) < 7 {
				m.groups = append(m.groups, s.key())
				m.maps = append(m.maps, map[string]any{})
			}
		default:
			return m
		}
	}
}

// run makes the calls on l and returns the logger and the record's
// attributes.
func (s *script) run(l *slog.Logger) (*slog.Logger, []slog.Attr) {
	depth := 0
	for {
		if len(s.data) == 0 {
			return l, nil
		}
		switch s.next() % 3 {
		case 0:
			l = l.With(anys(s.attrs(depth))...)
		case 1:
			if depth < 7 {
				l = l.WithGroup(s.key())
				depth++
			}
		default:
			return l, s.attrs(depth)
		}
	}
}

func anys(as []slog.Attr) []any {
	out := make([]any, len(as))
	for i, a := range as {
		out[i] = a
	}
	return out
}

// FuzzHandle: whatever the calls, the event read back through
// eventheader.Decode holds what slog's rules say a handler writes.
func FuzzHandle(f *testing.F) {
	f.Add([]byte{2})
	f.Add([]byte{0, 3, 0, 1, 1, 2, 2, 1, 2, 1, 0, 2, 3, 5, 6, 7})
	f.Add([]byte{1, 1, 1, 2, 0})
	f.Add([]byte{0, 5, 2, 2, 0, 3, 3, 0, 4, 2, 4, 4, 1, 2, 5, 2, 2, 2, 3, 9, 16})
	r := newRig(f, "SlogFuzz")
	h := r.handler(f, nil)
	// The same through ReplaceAttr, which sees every attribute.
	hr := r.handler(f, &ehslog.Options{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return a }})
	f.Fuzz(func(t *testing.T, data []byte) {
		ms := &script{data: data}
		m := ms.modelRun()
		want := m.result(ms.attrs(len(m.groups)))
		want["level"], want["msg"] = "INFO", "m"

		for _, h := range []slog.Handler{h, hr} {
			l, attrs := (&script{data: data}).run(slog.New(checked{h, t}))
			l.LogAttrs(t.Context(), slog.LevelInfo, "m", attrs...)
			ev := r.read(t, 1)[0]
			got := ev.fields
			delete(got, "time")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("event %s\nwant %v", ev.json, want)
			}
			if len(r.pending) > 0 {
				t.Fatalf("%d events more than written: %s", len(r.pending), r.pending[0].json)
			}
		}
	})
}
