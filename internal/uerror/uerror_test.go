package uerror

import "testing"

// Diagnose explains the kernel's bare EINVAL the way the daemon does.
func TestDiagnose(t *testing.T) {
	for _, c := range []struct{ op, path, input, want string }{
		{"write", "dynamic_events", "u:x u32 a ", `field 1 "u32 a ": only struct fields take a size ("" after the name)`},
		{"write", "dynamic_events", "u:x u32 a # comment", `field 1 "u32 a ": only struct fields take a size ("" after the name)`},
		{"write", "dynamic_events", "u:ok u32 a\nu:bad char[0] b\n", `field 1 "char[0] b": array length is 0`},
		{"write", "dynamic_events", "u:ok u32 a\n", ""},
		{"register", "", "x u32", `field 1 "u32": field "u32" has no name`},
	} {
		if got := Diagnose(c.op, c.path, c.input); got != c.want {
			t.Errorf("Diagnose(%q) = %q, want %q", c.input, got, c.want)
		}
	}
}
