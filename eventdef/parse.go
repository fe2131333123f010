package eventdef

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/kctype"
)

// SplitCommand splits a command the way user_event_parse_cmd does: the name
// ends at the first ASCII space (0x20 only; a tab stays in the name) and args
// is everything after it. A ':' in the name starts a flags section, and since
// Linux 6.12 knows no text flags, any ':' — even "name:" — is EINVAL.
//
// The command ends at its first NUL byte, as the C string the kernel copies
// from user memory does.
func SplitCommand(cmd string) (name, args string, err error) {
	cmd = cString(cmd)
	name, args, _ = strings.Cut(cmd, " ")
	if i := strings.IndexByte(name, ':'); i >= 0 {
		return "", "", errorf(unix.EINVAL, 0, name, "text flags after ':' are not supported")
	}
	return name, args, nil
}

// Parse parses a user_events command, "name[:flags] [field1[;field2...]]",
// with the kernel's grammar and errno (user_event_parse_cmd,
// user_event_parse_fields, user_event_parse_field, user_field_size):
//
//   - Fields are separated by ';'; empty pieces are ignored and leading white
//     space (isspace) of a piece is skipped.
//   - Within a field, tokens are split on single spaces: "u32  a" and a
//     trailing space ("u32 a ") are EINVAL, a tab is not a separator.
//   - A field is "type name", or "struct tag name size" with a base-10 size.
//   - Accepted types are s8..s64, u8..u64, char, short, int and their
//     "unsigned " forms, char[N] and unsigned char[N] (N parsed by kstrtouint
//     with base 0 from at most 7 characters after '[', 1..1024, text after ']'
//     ignored), any "__data_loc …" or "__rel_loc …" type (4 bytes), and
//     "struct tag" with an explicit size. Everything else — long, bool,
//     size_t, u8[4] — is EINVAL.
//   - The struct size is stored in an int by the kernel, so a size ≥ 2^31
//     becomes negative and is returned as the error code: 4294967295 gives
//     EPERM (−1), 4294967274 gives EINVAL (−22). Sizes from 2^31 to
//     2^32−4096 make the kernel return a negative value that is no errno;
//     Error.Errno then holds its negation.
//
// The name is not checked: it may be empty or contain any byte but space,
// ':' and NUL. Parse does not apply MaxCommandLen; that limit belongs to the
// ioctl path.
func Parse(cmd string) (*Event, error) {
	name, args, err := SplitCommand(cmd)
	if err != nil {
		return nil, err
	}
	return ParseFields(name, args)
}

// ParseFields parses the field list of a command whose name has already been
// split off by SplitCommand.
func ParseFields(name, args string) (*Event, error) {
	args = cString(args)
	ev := &Event{Name: name}
	offset := uint32(HeaderSize)
	n := 0
	for piece := range strings.SplitSeq(args, ";") {
		piece = skipSpaces(piece)
		if piece == "" {
			continue
		}
		n++
		f, err := parseField(piece, n)
		if err != nil {
			return nil, err
		}
		// The kernel keeps the running offset in a u32 and the field's offset
		// and min_size in ints; sizes near 2^31 wrap, exactly as there.
		f.Offset = int(int32(offset))
		offset += uint32(f.Size)
		ev.MinSize = int(int32(offset - HeaderSize))
		if f.Kind == DataLoc || f.Kind == RelLoc {
			ev.hasLoc = true
		}
		ev.Fields = append(ev.Fields, f)
	}
	return ev, nil
}

var spacedPrefixes = [...]string{
	"unsigned ",
	"struct ",
	"__data_loc unsigned ",
	"__data_loc ",
	"__rel_loc unsigned ",
	"__rel_loc ",
}

// parseField is user_event_parse_field for one non-empty piece.
func parseField(piece string, n int) (Field, error) {
	var f Field
	rest := piece
	depth := 0
	isStruct := false
	for _, p := range spacedPrefixes {
		if !strings.HasPrefix(piece, p) {
			continue
		}
		// The type runs to the next space after the prefix.
		i := strings.IndexByte(piece[len(p):], ' ')
		if i < 0 {
			return f, errorf(unix.EINVAL, n, piece, "type %q is not followed by a field name", piece)
		}
		f.Type = piece[:len(p)+i]
		rest = piece[len(p)+i+1:]
		isStruct = p == "struct "
		depth = 1
		break
	}
	haveName := false
	size := 0
	explicitSize := false
	for {
		tok, after, more := strings.Cut(rest, " ")
		switch depth {
		case 0:
			f.Type = tok
		case 1:
			f.Name = tok
			haveName = true
		case 2:
			if !isStruct {
				return f, errorf(unix.EINVAL, n, piece, "only struct fields take a size (%q after the name)", tok)
			}
			v, ok := kstrtoull(tok, 10)
			if !ok || v > 0xFFFFFFFF {
				return f, errorf(unix.EINVAL, n, piece, "struct size %q is not a base-10 u32", tok)
			}
			size = int(int32(uint32(v))) // stored into an int by the kernel
			explicitSize = true
		default:
			return f, errorf(unix.EINVAL, n, piece, "unexpected %q after the field", tok)
		}
		depth++
		if !more {
			break
		}
		rest = after
	}
	if !haveName {
		return f, errorf(unix.EINVAL, n, piece, "field %q has no name", piece)
	}
	if !explicitSize {
		var err *Error
		size, err = fieldSize(f.Type)
		if err != nil {
			err.Field, err.Token = n, piece
			return f, err
		}
	}
	if size == 0 {
		if isStruct {
			return f, errorf(unix.EINVAL, n, piece, "struct size is 0")
		}
		return f, errorf(unix.EINVAL, n, piece, "array length is 0")
	}
	if size < 0 {
		return f, errorf(unix.Errno(-int64(size)), n, piece,
			"struct size %d does not fit the kernel's int and is returned as error code %d", uint32(size), size)
	}
	f.Size = size
	f.Signed = f.Type == "" || f.Type[0] != 'u'
	f.Filter = filterAssignType(f.Type)
	switch {
	case strings.HasPrefix(f.Type, "__data_loc "):
		f.Kind = DataLoc
		f.CString = strings.Contains(f.Type, "char")
	case strings.HasPrefix(f.Type, "__rel_loc "):
		f.Kind = RelLoc
		f.CString = strings.Contains(f.Type, "char")
	case isStruct:
		f.Kind = Struct
	case strings.HasPrefix(f.Type, "char[") || strings.HasPrefix(f.Type, "unsigned char["):
		f.Kind = Array
	default:
		f.Kind = Integer
	}
	f.show = printClassOf(&f)
	f.label = " " + f.Name + "="
	return f, nil
}

// fieldSize is user_field_size: the size of a type written without an
// explicit size.
func fieldSize(typ string) (int, *Error) {
	switch typ {
	case "s64", "u64":
		return 8, nil
	case "s32", "u32", "int", "unsigned int":
		return 4, nil
	case "s16", "u16", "short", "unsigned short":
		return 2, nil
	case "s8", "u8", "char", "unsigned char":
		return 1, nil
	}
	switch {
	case strings.HasPrefix(typ, "char["), strings.HasPrefix(typ, "unsigned char["):
		return arraySize(typ)
	case strings.HasPrefix(typ, "__data_loc "), strings.HasPrefix(typ, "__rel_loc "):
		return 4, nil
	case strings.HasPrefix(typ, "struct "):
		return 0, errorf(unix.EINVAL, 0, "", "struct field has no size (want \"struct tag name size\")")
	}
	return 0, errorf(unix.EINVAL, 0, "", "unknown type %q", typ)
}

// arraySize is user_field_array_size: strscpy of what follows '[' into an
// 8-byte buffer (so at most 7 characters), cut at ']', then kstrtouint with
// base 0. A length of 0 passes here and is rejected by the caller.
func arraySize(typ string) (int, *Error) {
	val := typ[strings.IndexByte(typ, '[')+1:]
	if val == "" || len(val) > 7 {
		return 0, errorf(unix.EINVAL, 0, "", "array length text %q must be 1 to 7 characters up to ']'", val)
	}
	num, _, found := strings.Cut(val, "]")
	if !found {
		return 0, errorf(unix.EINVAL, 0, "", "no ']' within 7 characters of '[' in %q", typ)
	}
	v, ok := kstrtoull(num, 0)
	if !ok || v > 0xFFFFFFFF {
		return 0, errorf(unix.EINVAL, 0, "", "array length %q is not a number", num)
	}
	if v > MaxArrayLen {
		return 0, errorf(unix.EINVAL, 0, "", "array length %d is over %d", v, MaxArrayLen)
	}
	return int(v), nil
}

// kstrtoull is lib/kstrtox.c's kstrtoull: an optional '+', the radix fixup
// for base 0 ("0x" hex if a hex digit follows, else leading "0" octal), at
// least one digit, then an optional single '\n' and nothing else. ok is false
// where the kernel returns -EINVAL or -ERANGE.
func kstrtoull(s string, base uint64) (v uint64, ok bool) {
	s = strings.TrimPrefix(s, "+")
	lower := func(c byte) byte { return c | 0x20 }
	if base == 0 {
		if len(s) > 0 && s[0] == '0' {
			if len(s) > 2 && lower(s[1]) == 'x' && kctype.IsXDigit(s[2]) {
				base = 16
			} else {
				base = 8
			}
		} else {
			base = 10
		}
	}
	if base == 16 && len(s) > 1 && s[0] == '0' && lower(s[1]) == 'x' {
		s = s[2:]
	}
	i := 0
digits:
	for ; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= lower(c) && lower(c) <= 'f':
			d = uint64(lower(c)-'a') + 10
		default:
			d = base
		}
		if d >= base {
			break digits
		}
		if v > (^uint64(0)-d)/base {
			return 0, false // KSTRTOX_OVERFLOW: -ERANGE
		}
		v = v*base + d
	}
	if i == 0 {
		return 0, false
	}
	s = s[i:]
	s = strings.TrimPrefix(s, "\n")
	if s != "" {
		return 0, false
	}
	return v, true
}

// cString cuts s at its first NUL, as a C string ends there.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}
