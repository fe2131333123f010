package tracefilter

// The string matchers of trace_events_filter.c (regex_match_*), over a
// string that may not end in NUL within len bytes. Bytes past the end of
// the record read as NUL (see the package doc).

type matchType uint8

const (
	matchFull matchType = iota
	matchFront
	matchMiddle
	matchEnd
	matchGlob
)

type regex struct {
	pattern string // no NUL inside
	typ     matchType
}

// bat is b[i], or NUL past the end.
func bat(b []byte, i int) byte {
	if i >= 0 && i < len(b) {
		return b[i]
	}
	return 0
}

// strncmpEq is strncmp(str, pat, n) == 0.
func strncmpEq(str []byte, pat string, n int) bool {
	if n <= len(pat) && n <= len(str) {
		// Both in range, and pat has no NUL: equal if the bytes are, up
		// to a NUL in str that pat would have to share.
		s := str[:n]
		for k := range s {
			if s[k] != pat[k] {
				return false
			}
		}
		return true
	}
	for k := 0; k < n; k++ {
		c, d := bat(str, k), at(pat, k)
		if c != d {
			return false
		}
		if c == 0 {
			return true
		}
	}
	return true
}

// memEq is memcmp(str+off, pat, len(pat)) == 0.
func memEq(str []byte, off int, pat string) bool {
	for k := 0; k < len(pat); k++ {
		if bat(str, off+k) != pat[k] {
			return false
		}
	}
	return true
}

func (r *regex) match(str []byte, length int) bool {
	switch r.typ {
	case matchFull:
		if length == 0 {
			// strcmp
			return strncmpEq(str, r.pattern, len(r.pattern)+1)
		}
		if length < len(r.pattern) {
			return false
		}
		return strncmpEq(str, r.pattern, length)
	case matchFront:
		if length != 0 && length < len(r.pattern) {
			return false
		}
		return strncmpEq(str, r.pattern, len(r.pattern))
	case matchMiddle:
		if length == 0 {
			// strstr: the pattern within the NUL-terminated string.
			if r.pattern == "" {
				return true
			}
			for off := 0; bat(str, off) != 0; off++ {
				if memEq(str, off, r.pattern) {
					return true
				}
			}
			return false
		}
		// strnstr: memcmp at every offset while length >= len(pattern);
		// it does not stop at a NUL.
		l2 := len(r.pattern)
		if l2 == 0 {
			return true
		}
		for off := 0; length >= l2; off++ {
			length--
			if memEq(str, off, r.pattern) {
				return true
			}
		}
		return false
	case matchEnd:
		// The kernel takes len-1 as the string's length: right for loc
		// strings, whose length counts the NUL, but for char[N] it means
		// the pattern must end at byte N-2.
		sl := length - 1
		return sl >= len(r.pattern) && memEq(str, sl-len(r.pattern), r.pattern)
	default:
		return globMatch(r.pattern, str, length)
	}
}

// globMatch is lib/glob.c's glob_match_len: *, ?, [...] classes with
// ranges and '!' inversion, and '\' escapes; str is read as NUL past
// length bytes.
func globMatch(pat string, str []byte, length int) bool {
	backPat, backStr := -1, 0
	p, s := 0, 0
	for {
		var c byte
		if s < length {
			c = bat(str, s)
		}
		d := at(pat, p)
		p++
		s++
		switch d {
		case '?':
			if c == 0 {
				return false
			}
			continue
		case '*':
			if at(pat, p) == 0 {
				return true
			}
			backPat = p
			s--
			backStr = s
			continue
		case '[':
			if c == 0 {
				return false
			}
			match := false
			inverted := at(pat, p) == '!'
			class := p
			if inverted {
				class++
			}
			a := at(pat, class)
			class++
			malformed := false
			for {
				b := a
				if a == 0 {
					malformed = true
					break
				}
				if at(pat, class) == '-' && at(pat, class+1) != ']' {
					b = at(pat, class+1)
					if b == 0 {
						malformed = true
						break
					}
					class += 2
				}
				if a <= c && c <= b {
					match = true
				}
				a = at(pat, class)
				class++
				if a == ']' {
					break
				}
			}
			if !malformed {
				if match == inverted {
					goto backtrack
				}
				p = class
				continue
			}
			// literal '['
		case '\\':
			d = at(pat, p)
			p++
		}
		// literal
		if c == d {
			if d == 0 {
				return true
			}
			continue
		}
	backtrack:
		if c == 0 || backPat < 0 {
			return false
		}
		p = backPat
		backStr++
		s = backStr
	}
}

// parseRegex is filter_parse_regex and filter_build_regex for '~': a
// leading '!' inverts the match; a pattern starting with a digit is
// matched whole (MATCH_INDEX); "*x", "x*", "*x*" match the end, the
// front, the middle; any other '*', or '[', '?', '\', makes it a glob.
func parseRegex(buff string) (r regex, not bool) {
	if at(buff, 0) == '!' {
		not = true
		buff = buff[1:]
	}
	if isDigit(at(buff, 0)) {
		return regex{pattern: buff, typ: matchFull}, not
	}
	typ := matchFull
	search := buff
	for i := 0; i < len(buff); i++ {
		switch buff[i] {
		case '*':
			if i == 0 {
				typ = matchEnd
			} else if i == len(buff)-1 {
				if typ == matchEnd {
					typ = matchMiddle
				} else {
					typ = matchFront
				}
				search = buff[:i]
				goto out
			} else {
				return regex{pattern: buff, typ: matchGlob}, not
			}
		case '[', '?', '\\':
			return regex{pattern: buff, typ: matchGlob}, not
		}
	}
out:
	if at(buff, 0) == '*' {
		search = search[1:]
	}
	return regex{pattern: search, typ: typ}, not
}
