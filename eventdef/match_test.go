package eventdef

import "testing"

func TestMatchArgs(t *testing.T) {
	// dyn_test matching, and spec §1.7.
	tests := []struct {
		created, args string
		match         bool
	}{
		{"u32 a", "u32 a", true},
		{"u32 a; u32 b", "u32 a; u32 b", true},
		{"u32 a; u32 b", "u32 a; u32 b;", true},
		{"u32 a; u32 b", "u32 a;u32 b", true},
		{"struct my_struct a 20", "struct my_struct a 20", true},
		{"u32 a", "u32 b", false},
		{"u32 a; u32 b", "u32 b; u32 a", false},
		{"u64 a; u64 b", "u32 a; u32 b", false},
		{"struct my_struct a 20", "struct my_struct b 20", false},
		{"struct my_struct a 20", "struct my_struct a 21", false},
		{"u32 a; u32 b", "u32 a", false},
		{"u32 a", "u32 a; u32 b", false},
		{"int a", "s32 a", false},
		// Lenient: text that would not parse still matches an existing event.
		{"u32 a", "u32  a", true},
		{"u32 a", "u32 a ", true},
		{"u32 a", "  u32\ta", true},
		{"u32 a", "u32\xa0a", true}, // 0xA0 is a kernel space
		{"u32 a; u32 b", "u32 a ;u32 b", false},
		{"u32 a; u32 b", "u32 a;\tu32 b", true},
		{"", "", true},
		{"", "   ", true},
		{"", ";", false},
		{"", "u32 a", false},
		{"u32 a", "", false},
		{"u32 a", ";", false},
		{"u32 a", "u32 a;;", false}, // the second ';' token is left over
		{"char[20] a", "char[20] a", true},
		{"char[0x14] a", "char[20] a", false}, // types compare as text
	}
	for _, tt := range tests {
		ev := mustParse(t, "e "+tt.created)
		if got := ev.MatchArgs(tt.args); got != tt.match {
			t.Errorf("event %q, args %q: match %v, want %v", tt.created, tt.args, got, tt.match)
		}
	}
}

func TestMatchDeleteArgs(t *testing.T) {
	// Spec §6.4: no re-spacing after ';' on the delete path.
	tests := []struct {
		created, args string
		match         bool
	}{
		{"u32 count", "", false},
		{"u32 count", "u32 count", true},
		{"u32 field1; u32 field2", "u32 field1; u32 field2", true},
		{"u32 field1; u32 field2", "u32 field1;u32 field2", false},
		{"", "", true},
		{"", "u32 a", false},
	}
	for _, tt := range tests {
		ev := mustParse(t, "e "+tt.created)
		if got := ev.MatchDeleteArgs(tt.args); got != tt.match {
			t.Errorf("event %q, delete args %q: match %v, want %v", tt.created, tt.args, got, tt.match)
		}
	}
}

func TestParseDeleteCommand(t *testing.T) {
	ev := mustParse(t, "x u32 a")
	tests := []struct {
		line    string
		invalid bool
		match   bool
	}{
		{"!u:x u32 a", false, true},
		{"-:x u32 a", false, true},
		{"!x:x u32 a", false, true},
		{"!u:user_events/x u32 a", false, true},
		{"!u:user_events_multi/x u32 a", false, true},
		{"!u:other/x u32 a", false, false},
		{"!u:/x u32 a", false, false},
		{"!u:x", false, false},
		{"!u:x u32 a;", false, true}, // the ";" token sets colon; the stored text gets ";" too
		{"!u:y u32 a", false, false},
		{"!u:", true, false},
		{"-x u32 a", true, false},
		{"!x u32 a", true, false},
		{"-", true, false},
		{"", true, false},
	}
	for _, tt := range tests {
		dc, err := ParseDeleteCommand(tt.line)
		if (err != nil) != tt.invalid {
			t.Errorf("%q: error %v, want invalid %v", tt.line, err, tt.invalid)
			continue
		}
		if err == nil && dc.Matches(ev) != tt.match {
			t.Errorf("%q: matches %v, want %v", tt.line, dc.Matches(ev), tt.match)
		}
	}
}
