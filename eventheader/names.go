package eventheader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// NameMax is the limit on a tracepoint name "Provider_LnKn...": its
// length must be less than NameMax (the C library's buffer holds the NUL).
const NameMax = 256

// CommandTypes are the fields every EventHeader tracepoint registers with
// user_events after its name: the header, as the kernel sees it.
const CommandTypes = "u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level"

// commandFields are CommandTypes' field names, in order.
var commandFields = [...]string{"eventheader_flags", "version", "id", "tag", "opcode", "level"}

// FromFormat tells whether a tracepoint named name whose format's fields
// are named field(0) … field(n-1) is an EventHeader tracepoint: exactly
// the fields CommandTypes registers and a name "<provider>_L<n>K<hex>…"
// (ParseTracepointName), a multi-format registration's ".<hexid>" suffix
// aside. It returns the name to decode its events by (without that
// suffix). The event starts at the first field's offset.
func FromFormat(name string, n int, field func(i int) string) (string, bool) {
	if n != len(commandFields) {
		return "", false
	}
	for i, f := range commandFields {
		if field(i) != f {
			return "", false
		}
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if _, err := strconv.ParseUint(name[i+1:], 16, 64); err == nil {
			name = name[:i]
		}
	}
	if _, err := ParseTracepointName(name); err != nil {
		return "", false
	}
	return name, true
}

// ErrName reports a provider name, tracepoint name, or option string that
// the EventHeader naming rules do not allow.
var ErrName = errors.New("eventheader: invalid name")

// TracepointName is the parsed form of "<provider>_L<level>K<keyword>[options]".
type TracepointName struct {
	Provider string // everything before the last '_'
	Level    Level  // 1..255, lowercase hex in the name
	Keyword  uint64 // category bits, lowercase hex in the name
	Options  string // "" or e.g. "Gmygroup": uppercase letter + [0-9a-z]*, sorted by letter
}

// Group returns the value of the G option, the provider group, or "".
func (t TracepointName) Group() string {
	for o := t.Options; o != ""; {
		n := 1
		for n < len(o) && isOptionValueChar(o[n]) {
			n++
		}
		if o[0] == 'G' {
			return o[1:n]
		}
		o = o[n:]
	}
	return ""
}

// String formats the tracepoint name, like the C library's
// EVENTHEADER_FORMAT_TRACEPOINT_NAME; it does not validate (see Validate).
func (t TracepointName) String() string {
	return string(t.Append(make([]byte, 0, len(t.Provider)+24+len(t.Options))))
}

// Append appends the formatted tracepoint name to dst.
func (t TracepointName) Append(dst []byte) []byte {
	dst = append(dst, t.Provider...)
	dst = append(dst, "_L"...)
	dst = strconv.AppendUint(dst, uint64(t.Level), 16)
	dst = append(dst, 'K')
	dst = strconv.AppendUint(dst, t.Keyword, 16)
	return append(dst, t.Options...)
}

// Command returns the user_events register command for the tracepoint:
// "<name> u8 eventheader_flags; u8 version; u16 id; u16 tag; u8 opcode; u8 level".
func (t TracepointName) Command() string {
	return t.String() + " " + CommandTypes
}

// Validate checks the rules a producer must follow: a non-empty provider
// without ' ', ':' or NUL, level 1..255, well-formed sorted options, and a
// name shorter than NameMax.
func (t TracepointName) Validate() error {
	if err := ValidateProvider(t.Provider); err != nil {
		return err
	}
	if t.Level == 0 {
		return fmt.Errorf("%w: level 0 is invalid; use 1 (critical) to 5 (verbose) or up to 255", ErrName)
	}
	if err := validateOptions(t.Options); err != nil {
		return err
	}
	if n := len(t.Append(make([]byte, 0, NameMax+64))); n >= NameMax {
		return fmt.Errorf("%w: tracepoint name is %d bytes, must be less than %d: shorten the provider name", ErrName, n, NameMax)
	}
	return nil
}

// ValidateProvider checks a provider name: not empty, no ' ', ':' or NUL,
// and short enough that its longest tracepoint name fits. Only
// [A-Za-z0-9_] is portable to every tracefs, but the format allows more.
func ValidateProvider(p string) error {
	if p == "" {
		return fmt.Errorf("%w: empty provider name", ErrName)
	}
	if i := strings.IndexAny(p, " :\x00"); i >= 0 {
		return fmt.Errorf("%w: provider name %q has %q at %d; ' ', ':' and NUL are not allowed", ErrName, p, p[i], i)
	}
	// "_L" + 2 + "K" + 16 hex digits is the longest suffix without options.
	if len(p)+21 >= NameMax {
		return fmt.Errorf("%w: provider name is %d bytes; at most %d leave room for _L<level>K<keyword>", ErrName, len(p), NameMax-22)
	}
	return nil
}

func isOptionValueChar(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' }

func validateOptions(o string) error {
	var prev byte
	for o != "" {
		if o[0] < 'A' || o[0] > 'Z' {
			return fmt.Errorf("%w: option %q must start with an uppercase ASCII letter", ErrName, o)
		}
		if o[0] < prev {
			return fmt.Errorf("%w: options must be sorted by letter, %q comes after %q", ErrName, o[0], prev)
		}
		prev = o[0]
		n := 1
		for n < len(o) && isOptionValueChar(o[n]) {
			n++
		}
		o = o[n:]
	}
	return nil
}

// ParseTracepointName parses "<provider>_L<level>K<keyword>[options]" as
// a decoder does: the provider is everything before the last '_', level
// and keyword are lowercase hex, options are uppercase letters each
// followed by [0-9a-z]*. It does not require the options to be sorted.
// It is stricter than Microsoft's decoder in one way: the level (1 or 2
// digits) and the keyword (1 to 16) must have digits, where that decoder
// reads no digits as 0 and lets too many overflow.
func ParseTracepointName(name string) (TracepointName, error) {
	var t TracepointName
	if len(name) >= NameMax {
		return t, fmt.Errorf("%w: tracepoint name is %d bytes, must be less than %d", ErrName, len(name), NameMax)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return t, fmt.Errorf("%w: tracepoint name holds a NUL", ErrName)
	}
	u := strings.LastIndexByte(name, '_')
	if u < 0 {
		return t, fmt.Errorf("%w: %q has no '_' before the attributes _L<level>K<keyword>", ErrName, name)
	}
	t.Provider = name[:u]
	a := name[u+1:]
	if a == "" || a[0] != 'L' {
		return t, fmt.Errorf("%w: %q: attributes must start with L<level>", ErrName, name)
	}
	lv, n, ok := lowerHex(a[1:], 2)
	if !ok {
		return t, fmt.Errorf("%w: %q: level must be 1 or 2 lowercase hex digits", ErrName, name)
	}
	t.Level = Level(lv)
	a = a[1+n:]
	if a == "" || a[0] != 'K' {
		return t, fmt.Errorf("%w: %q: L<level> must be followed by K<keyword>", ErrName, name)
	}
	t.Keyword, n, ok = lowerHex(a[1:], 16)
	if !ok {
		return t, fmt.Errorf("%w: %q: keyword must be 1 to 16 lowercase hex digits", ErrName, name)
	}
	a = a[1+n:]
	t.Options = a
	for a != "" {
		if a[0] < 'A' || a[0] > 'Z' {
			return t, fmt.Errorf("%w: %q: option %q must start with an uppercase ASCII letter", ErrName, name, a)
		}
		n := 1
		for n < len(a) && isOptionValueChar(a[n]) {
			n++
		}
		a = a[n:]
	}
	return t, nil
}

// lowerHex reads 1..max lowercase hex digits from the start of s.
func lowerHex(s string, max int) (v uint64, n int, ok bool) {
	for n < len(s) {
		c := s[n]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		default:
			return v, n, n > 0
		}
		if n == max {
			return v, n, false
		}
		v = v<<4 | uint64(d)
		n++
	}
	return v, n, n > 0
}
