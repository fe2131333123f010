package eventdef

import "strings"

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
