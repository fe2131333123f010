package tracefilter

// The kernel's <linux/ctype.h> classifies all 256 byte values with the
// ISO 8859-1 table of lib/ctype.c: 0xA0 is a space and 0xC0..0xFF (but for
// 0xD7 and 0xF7) are letters, so a field name may hold them (isalnum) and
// 0xA0 separates tokens (isspace). The parser uses the same table.

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
	t[160] = ctS | ctSP
	for c := 161; c < 192; c++ {
		t[c] = ctP
	}
	for c := 192; c < 224; c++ {
		t[c] = ctU
	}
	t[215] = ctP
	t[223] = ctL
	for c := 224; c < 256; c++ {
		t[c] = ctL
	}
	t[247] = ctP
	return t
}()

func isSpace(c byte) bool  { return kctype[c]&ctS != 0 }
func isDigit(c byte) bool  { return kctype[c]&ctD != 0 }
func isAlnum(c byte) bool  { return kctype[c]&(ctU|ctL|ctD) != 0 }
func isXDigit(c byte) bool { return kctype[c]&(ctD|ctX) != 0 }

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
