package eventdef

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// Error is a command or record the kernel would reject. It wraps the errno
// the kernel returns, so errors.Is(err, unix.EINVAL) works, and says in words
// what was wrong and where.
type Error struct {
	// Errno is what the kernel returns. It is EINVAL for nearly every parse
	// error; the struct-size quirk (see Parse) can make it any value.
	Errno unix.Errno
	// Field is the 1-based number of the field the error is in, counting the
	// non-empty ';'-separated pieces of the command; 0 when the error is not
	// about one field.
	Field int
	// Token is the offending text, when there is one.
	Token string
	// Reason says what was wrong.
	Reason string
}

// Error formats as "<errno text> (<symbol>): field <n> "<token>": <reason>",
// so that a caller's prefix reads naturally:
// register "x u32 a ": invalid argument (EINVAL): field 1 "u32 a ": ...
func (e *Error) Error() string {
	return ErrnoString(e.Errno) + ": " + e.Detail()
}

// Detail is the error without its errno: `field <n> "<token>": <reason>`,
// for callers that name the errno themselves.
func (e *Error) Detail() string {
	var b []byte
	if e.Field > 0 {
		b = append(b, "field "...)
		b = strconv.AppendInt(b, int64(e.Field), 10)
		if e.Token != "" {
			b = append(b, ' ')
			b = strconv.AppendQuote(b, e.Token)
		}
		b = append(b, ": "...)
	} else if e.Token != "" {
		b = strconv.AppendQuote(b, e.Token)
		b = append(b, ": "...)
	}
	b = append(b, e.Reason...)
	return string(b)
}

// Unwrap returns the errno.
func (e *Error) Unwrap() error { return e.Errno }

// ErrnoString is the errno's text and symbol, as in "invalid argument (EINVAL)".
// Errno values outside the kernel's range (the struct-size quirk) print as a
// number.
func ErrnoString(errno unix.Errno) string {
	if name := unix.ErrnoName(errno); name != "" {
		return errno.Error() + " (" + name + ")"
	}
	return fmt.Sprintf("kernel return value %d", -int64(errno))
}

func errorf(errno unix.Errno, field int, token, format string, args ...any) *Error {
	return &Error{Errno: errno, Field: field, Token: token, Reason: fmt.Sprintf(format, args...)}
}
