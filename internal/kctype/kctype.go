// Package kctype is the kernel's <linux/ctype.h>: the classes of all 256
// byte values from lib/ctype.c's ISO 8859-1 table, not the C locale's —
// 0xA0 (no-break space) is a space, 0xC0..0xFF (but for 0xD7 and 0xF7) are
// letters, 0xA0..0xFF printable. Parsers that must split, name and print
// exactly as the kernel does (eventdef's commands, tracefilter's filters)
// use it rather than package unicode. It is nothing more than the table.
package kctype

// Classes, as lib/ctype.c's _U, _L, ...
const (
	upper  = 0x01 // _U
	lower  = 0x02 // _L
	digit  = 0x04 // _D
	cntrl  = 0x08 // _C
	punct  = 0x10 // _P
	space  = 0x20 // _S: white space (space, \t \n \v \f \r, 0xA0)
	xdigit = 0x40 // _X
	hard   = 0x80 // _SP: hard space (0x20, 0xA0)
)

var table = func() (t [256]byte) {
	for c := 0; c < 32; c++ {
		t[c] = cntrl
	}
	for _, c := range []byte{'\t', '\n', '\v', '\f', '\r'} {
		t[c] |= space
	}
	t[' '] = space | hard
	for c := 33; c < 127; c++ {
		t[c] = punct
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = digit
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = upper
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = lower
	}
	for c := 'A'; c <= 'F'; c++ {
		t[c] |= xdigit
		t[c+'a'-'A'] |= xdigit
	}
	t[127] = cntrl
	// 128..159 are 0.
	t[160] = space | hard
	for c := 161; c < 192; c++ {
		t[c] = punct
	}
	for c := 192; c < 224; c++ {
		t[c] = upper
	}
	t[215] = punct // multiplication sign
	t[223] = lower // sharp s
	for c := 224; c < 256; c++ {
		t[c] = lower
	}
	t[247] = punct // division sign
	return t
}()

// IsSpace is isspace().
func IsSpace(c byte) bool { return table[c]&space != 0 }

// IsDigit is isdigit().
func IsDigit(c byte) bool { return table[c]&digit != 0 }

// IsAlnum is isalnum().
func IsAlnum(c byte) bool { return table[c]&(upper|lower|digit) != 0 }

// IsXDigit is isxdigit().
func IsXDigit(c byte) bool { return table[c]&(digit|xdigit) != 0 }

// IsPrint is isprint().
func IsPrint(c byte) bool { return table[c]&(punct|upper|lower|digit|hard) != 0 }
