package tracefilter

import "github.com/uetrace/uetrace/internal/kctype"

// The parser splits and names as the kernel does, with its ctype table
// (internal/kctype): 0xA0 separates tokens, 0xC0..0xFF are letters.

func isSpace(c byte) bool  { return kctype.IsSpace(c) }
func isDigit(c byte) bool  { return kctype.IsDigit(c) }
func isAlnum(c byte) bool  { return kctype.IsAlnum(c) }
func isXDigit(c byte) bool { return kctype.IsXDigit(c) }

// at is s[i], or the C string's terminating NUL past its end.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// strstrip is the kernel's strstrip as apply_event_filter uses it: the
// string it parses keeps its leading white space (strstrip's result is
// only compared with "0") but loses its trailing white space, cut in place.
func stripTrailing(s string) string {
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func skipSpaces(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	return s
}
