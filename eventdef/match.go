package eventdef

import (
	"strings"

	"golang.org/x/sys/unix"
)

// MatchArgs reports whether args — the text after the name of a DIAG_IOCSREG
// command or of a "u:" line written to dynamic_events — describes this
// event's fields, as the kernel decides before it reuses an existing event
// (find_user_event → user_fields_match).
//
// The kernel compares normalised text, not parsed fields (user_event_argv_split):
// a space is put after every ';' not followed by white space, the result is
// split on runs of white space, and the tokens, joined by single spaces up to
// and including one that contains ';', must equal each field rendered as
// "<type> <name>[ <size>][;]". So "u32 a;u32 b" and "u32 a; u32 b;" match an
// event created as "u32 a; u32 b", while "u32 b; u32 a", "s32 a" for "int a",
// or "u32 a" for it do not. Since matching comes before parsing, text that
// would not parse ("u32  a", "u32 a ") still matches an existing "u32 a".
// With no tokens at all, only an event without fields matches.
func (e *Event) MatchArgs(args string) bool {
	return e.MatchTokens(ArgvSplit(respace(cString(args))))
}

// MatchDeleteArgs reports whether args — the text after the first token of a
// "!u:name ..." or "-:name ..." line written to dynamic_events — names this
// event's fields. The delete path (dyn_event_release) splits the line with
// plain argv_split and does not put a space after ';', so
// "!u:n u32 a;u32 b" does not match "u32 a; u32 b", and without field
// tokens only an event without fields matches.
func (e *Event) MatchDeleteArgs(args string) bool {
	return e.MatchTokens(ArgvSplit(cString(args)))
}

// MatchTokens is user_fields_match over already-split tokens.
func (e *Event) MatchTokens(argv []string) bool {
	if len(argv) == 0 {
		return len(e.Fields) == 0
	}
	i := 0
	var want []byte
	for fi := range e.Fields {
		if i >= len(argv) {
			return false
		}
		// user_dyn_field_set_string: tokens up to one containing ';'.
		start := i
		colon := false
		for ; i < len(argv); i++ {
			if strings.IndexByte(argv[i], ';') >= 0 {
				i++
				colon = true
				break
			}
		}
		// user_field_set_string.
		want = appendFieldText(want[:0], &e.Fields[fi])
		if colon {
			want = append(want, ';')
		}
		if !joinedEqual(argv[start:i], want) {
			return false
		}
	}
	return i == len(argv)
}

// joinedEqual reports whether the tokens joined by single spaces equal want.
func joinedEqual(tokens []string, want []byte) bool {
	for k, t := range tokens {
		if k > 0 {
			if len(want) == 0 || want[0] != ' ' {
				return false
			}
			want = want[1:]
		}
		if len(want) < len(t) || string(want[:len(t)]) != t {
			return false
		}
		want = want[len(t):]
	}
	return len(want) == 0
}

// respace puts a space after every ';' that is not followed by white space,
// including a ';' at the very end (user_event_argv_split).
func respace(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == ';' && (i+1 == len(s) || !isSpace(s[i+1])) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + n)
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == ';' && (i+1 == len(s) || !isSpace(s[i+1])) {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// ArgvSplit splits s as the kernel's argv_split does: on runs of white space
// (the kernel's isspace, which includes 0xA0), ignoring leading and trailing
// white space.
func ArgvSplit(s string) []string { return argvSplit(s) }

// DeleteCommand is a parsed dynamic_events delete line, "!u:name fields" or
// "-:name fields".
type DeleteCommand struct {
	// System is the optional "system/" before the name; HasSystem tells
	// whether there was one (it may be empty: "!u:/x"). A system selects
	// user events only when it is "user_events" or "user_events_multi", and
	// it does not tell the two apart.
	System    string
	HasSystem bool
	// Name is the registered name to delete.
	Name string
	// Args are the field tokens after the name, split without re-spacing.
	Args []string
}

// ParseDeleteCommand parses a line of dynamic_events that starts with '!' or
// '-', as dyn_event_release (kernel/trace/trace_dynevent.c) does: the line is
// split with argv_split; if the first token starts with '-' its second byte
// must be ':' and the name follows, otherwise the name is whatever follows
// the first ':' (the "u" before it is not checked, so "!x:name" targets user
// events too). An optional "system/" prefix is split off. A line without the
// ':' or, with no system, with an empty name is EINVAL.
func ParseDeleteCommand(line string) (DeleteCommand, error) {
	argv := ArgvSplit(cString(line))
	if len(argv) == 0 {
		return DeleteCommand{}, errorf(unix.EINVAL, 0, line, "empty delete command")
	}
	var event string
	if argv[0][0] == '-' {
		if len(argv[0]) < 2 || argv[0][1] != ':' {
			return DeleteCommand{}, errorf(unix.EINVAL, 0, argv[0], "a '-' delete must be followed by ':'")
		}
		event = argv[0][2:]
	} else {
		i := strings.IndexByte(argv[0], ':')
		if i < 0 {
			return DeleteCommand{}, errorf(unix.EINVAL, 0, argv[0], "no ':' before the event name")
		}
		event = argv[0][i+1:]
	}
	var dc DeleteCommand
	if sys, name, ok := strings.Cut(event, "/"); ok {
		dc.System, dc.HasSystem, event = sys, true, name
	}
	if !dc.HasSystem && event == "" {
		return DeleteCommand{}, errorf(unix.EINVAL, 0, argv[0], "no event name")
	}
	dc.Name, dc.Args = event, argv[1:]
	return dc, nil
}

// Matches reports whether the delete command names ev (user_event_match):
// the registered name is equal, the system, if given, is one of the two user
// event systems, and the field tokens match with the delete path's rules.
func (dc DeleteCommand) Matches(ev *Event) bool {
	if ev.Name != dc.Name {
		return false
	}
	if dc.HasSystem && dc.System != System && dc.System != MultiSystem {
		return false
	}
	return ev.MatchTokens(dc.Args)
}
