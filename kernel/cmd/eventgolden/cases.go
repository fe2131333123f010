package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A directive is one line of the case file, with the write lines that
// follow a case.
type directive struct {
	kind   string // "case", "match" or "delete"
	line   int    // line number in the case file
	a, b   string // case: a = command; match: first, second; delete: create, line
	flags  uint16 // case and match only
	flags2 uint16 // match only: flags of the second registration
	writes [][]byte
}

// parseCases reads the case file format documented in the package comment.
func parseCases(r io.Reader) ([]*directive, error) {
	var out []*directive
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		kw, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s: %s", n, kw, fmt.Sprintf(format, args...))
		}
		switch kw {
		case "case", "match", "delete":
			want := 1
			if kw != "case" {
				want = 2
			}
			var strs []string
			for range want {
				s, tail, err := quoted(rest)
				if err != nil {
					return nil, fail("%v", err)
				}
				strs = append(strs, s)
				rest = strings.TrimSpace(tail)
			}
			d := &directive{kind: kw, line: n, a: strs[0]}
			if want == 2 {
				d.b = strs[1]
			}
			seen2 := false
			for _, opt := range strings.Fields(rest) {
				k, v, _ := strings.Cut(opt, "=")
				f, err := strconv.ParseUint(v, 0, 16)
				switch {
				case kw == "delete" || (k != "flags" && (k != "flags2" || kw != "match")):
					return nil, fail("unexpected %q", opt)
				case err != nil:
					return nil, fail("%s: %v", k, err)
				case k == "flags":
					d.flags = uint16(f)
				default:
					d.flags2, seen2 = uint16(f), true
				}
			}
			if !seen2 {
				d.flags2 = d.flags
			}
			out = append(out, d)
		case "write":
			if len(out) == 0 || out[len(out)-1].kind != "case" {
				return nil, fail("write must follow a case")
			}
			var p []byte
			if rest != "-" {
				var err error
				if p, err = parseHex(rest); err != nil {
					return nil, fail("payload: %v", err)
				}
			}
			c := out[len(out)-1]
			c.writes = append(c.writes, p)
		default:
			return nil, fmt.Errorf("line %d: unknown directive %q", n, kw)
		}
	}
	return out, sc.Err()
}

// quoted takes one Go-quoted string from the start of s. The result must
// be valid UTF-8 so that it survives the JSON output unchanged.
func quoted(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", fmt.Errorf("want a Go-quoted string at %q", s)
	}
	v, err := strconv.Unquote(q)
	if err != nil {
		return "", "", err
	}
	if !utf8.ValidString(v) {
		return "", "", fmt.Errorf("%s is not valid UTF-8", q)
	}
	return v, s[len(q):], nil
}

// parseHex decodes a payload: space-separated groups of hex digits, each
// optionally followed by *N to repeat it N times ("41 00*3" is 41 00 00 00).
func parseHex(s string) ([]byte, error) {
	var out []byte
	for _, tok := range strings.Fields(s) {
		h, rep, hasRep := strings.Cut(tok, "*")
		n := 1
		if hasRep {
			v, err := strconv.Atoi(rep)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("bad repeat count in %q", tok)
			}
			n = v
		}
		b, err := hex.DecodeString(h)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("bad hex %q", tok)
		}
		for range n {
			out = append(out, b...)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty payload (use - for an empty one)")
	}
	return out, nil
}
