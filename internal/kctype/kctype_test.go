package kctype

import "testing"

// TestTable checks the classes lib/ctype.c gives the bytes that differ
// from the C locale, and a few that do not.
func TestTable(t *testing.T) {
	for _, c := range []struct {
		b                                 byte
		space, digit, alnum, xdigit, prnt bool
	}{
		{' ', true, false, false, false, true},
		{'\t', true, false, false, false, false},
		{'\v', true, false, false, false, false},
		{'7', false, true, true, true, true},
		{'f', false, false, true, true, true},
		{'g', false, false, true, false, true},
		{'_', false, false, false, false, true},
		{0x7f, false, false, false, false, false},
		{0x85, false, false, false, false, false}, // 128..159 are nothing
		{0xa0, true, false, false, false, true},   // no-break space
		{0xc0, false, false, true, false, true},   // À
		{0xd7, false, false, false, false, true},  // ×
		{0xdf, false, false, true, false, true},   // ß
		{0xf7, false, false, false, false, true},  // ÷
		{0xff, false, false, true, false, true},   // ÿ
	} {
		if IsSpace(c.b) != c.space || IsDigit(c.b) != c.digit || IsAlnum(c.b) != c.alnum || IsXDigit(c.b) != c.xdigit || IsPrint(c.b) != c.prnt {
			t.Errorf("%#x: space %v digit %v alnum %v xdigit %v print %v", c.b, IsSpace(c.b), IsDigit(c.b), IsAlnum(c.b), IsXDigit(c.b), IsPrint(c.b))
		}
	}
}
