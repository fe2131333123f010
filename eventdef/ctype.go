package eventdef

// The kernel's <linux/ctype.h> classifies all 256 byte values with the
// ISO 8859-1 table in lib/ctype.c, not with the C locale: 0xA0 (no-break space)
// is a space, and 0xA0..0xFF are printable. Matching (argv_split, skip_spaces)
// and the trace printer (isprint) depend on that, so eventdef uses the same
// table rather than package unicode.

const (
	ctU  = 0x01 // upper
	ctL  = 0x02 // lower
	ctD  = 0x04 // digit
	ctC  = 0x08 // cntrl
	ctP  = 0x10 // punct
	ctS  = 0x20 // white space (space/lf/tab)
	ctX  = 0x40 // hex digit
	ctSP = 0x80 // hard space (0x20)
)

var kctype = func() (t [256]byte) {
	for c := 0; c < 32; c++ {
		t[c] = ctC
	}
	for _, c := range []byte{'\t', '\n', '\v', '\f', '\r'} {
		t[c] |= ctS
	}
	t[' '] = ctS | ctSP
	for c := 33; c < 127; c++ {
		t[c] = ctP
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = ctD
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = ctU
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = ctL
	}
	for c := 'A'; c <= 'F'; c++ {
		t[c] |= ctX
		t[c+'a'-'A'] |= ctX
	}
	t[127] = ctC
	// 128..159 are 0.
	t[160] = ctS | ctSP
	for c := 161; c < 192; c++ {
		t[c] = ctP
	}
	for c := 192; c < 224; c++ {
		t[c] = ctU
	}
	t[215] = ctP // multiplication sign
	t[223] = ctL // sharp s
	for c := 224; c < 256; c++ {
		t[c] = ctL
	}
	t[247] = ctP // division sign
	return t
}()

// isSpace is the kernel's isspace.
func isSpace(c byte) bool { return kctype[c]&ctS != 0 }

// isPrint is the kernel's isprint.
func isPrint(c byte) bool { return kctype[c]&(ctP|ctU|ctL|ctD|ctSP) != 0 }

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
