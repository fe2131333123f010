package eventdef

import "github.com/uetrace/uetrace/internal/kctype"

// Matching (argv_split, skip_spaces) and the trace printer (isprint) use
// the kernel's ctype table (internal/kctype): 0xA0 is a space there, and
// 0xA0..0xFF are printable.

// isSpace is the kernel's isspace.
func isSpace(c byte) bool { return kctype.IsSpace(c) }

// isPrint is the kernel's isprint.
func isPrint(c byte) bool { return kctype.IsPrint(c) }

// SkipSpaces is the kernel's skip_spaces: s without its leading white space
// (isspace, which includes 0xA0). user_event_create applies it after "u:".
func SkipSpaces(s string) string { return skipSpaces(s) }

func skipSpaces(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

// argvSplit splits s as lib/argv_split.c does: on runs of isspace bytes,
// ignoring leading and trailing space.
func argvSplit(s string) []string {
	var argv []string
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		if j > i {
			argv = append(argv, s[i:j])
		}
		i = j
	}
	return argv
}
