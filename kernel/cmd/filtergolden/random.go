package main

import (
	"math/rand/v2"
	"strings"
)

// randomFilters makes n filters from seed: terms on the first event's
// fields, the common and generic fields and an unknown one, with every
// operator and many kinds of value, joined with && and ||, negated and
// parenthesised at random; one in five is then damaged by deleting,
// doubling or inserting a byte. The same seed gives the same filters, so
// the golden holds them and the test needs no generator.
func randomFilters(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	intFields := []string{"idx", "a", "b", "c", "e", "f", "g", "common_pid", "common_type", "common_preempt_count"}
	strFields := []string{"s", "r", "d", "comm"}
	ops := []string{"==", "!=", "<", "<=", ">", ">=", "&", "~"}
	nums := []string{"0", "1", "-1", "7", "42", "100", "128", "255", "256", "404", "500", "503", "65535", "0x2a", "0xff",
		"052", "0x80000000", "2147483647", "-2147483648", "4294967296", "18446744073709551615", "-9223372036854775808",
		"9223372036854775807", "08", "0x", "1a", "-0", "+1"}
	pats := []string{"", "abc", "ab*", "*bc", "*b*", "*", "a?c", "[a-c]*", "[!a]*", "/api/*", "*/*", "*.png", "hello*",
		"*world", "!abc", "42", "4*", "a*b", "a\\*b", "[x]", "\\[x]", "x", "xyz", "abcdefghijklmno", "filter*", "*golden"}
	term := func() string {
		switch k := r.IntN(10); {
		case k < 5:
			f := pick(intFields)
			return f + pick([]string{" ", "", "  "}) + pick(ops[:7]) + " " + pick(nums)
		case k < 8:
			f := pick(strFields)
			q := pick([]string{`"`, `"`, `'`})
			return f + " " + pick([]string{"==", "!=", "~", "~", "~"}) + " " + q + pick(pats) + q
		case k < 9:
			f := pick([]string{"CPU", "cpu", "a", "b", "c", "common_pid"})
			return f + " " + pick([]string{"==", "!=", "&"}) + " " + pick([]string{"CPUS{0}", "CPUS{1}", "CPUS{0-1}", "CPUS{N}", "CPUS{all}", "CPUS{0,1}", "CPUS{2}"})
		default:
			return pick([]string{"x", "CPU", "comm", "stacktrace", "s", "a"}) + " " + pick(ops) + " " + pick(append(nums[:6:6], `"x"`, "CPUS{0}", "y"))
		}
	}
	var expr func(depth int) string
	expr = func(depth int) string {
		if depth > 3 || r.IntN(3) == 0 {
			t := term()
			if r.IntN(6) == 0 {
				t = "!" + t
			}
			return t
		}
		switch r.IntN(4) {
		case 0:
			return "(" + expr(depth+1) + ")"
		case 1:
			return "!(" + expr(depth+1) + ")"
		default:
			return expr(depth+1) + pick([]string{" && ", " || ", "&&", " ||"}) + expr(depth+1)
		}
	}
	out := make([]string, 0, n)
	for len(out) < n {
		f := expr(0)
		if r.IntN(5) == 0 && len(f) > 0 {
			i := r.IntN(len(f))
			switch r.IntN(3) {
			case 0:
				f = f[:i] + f[i+1:]
			case 1:
				f = f[:i] + f[i:i+1] + f[i:]
			default:
				f = f[:i] + pick(strings.Split(`( ) ! & | " ' = < > ~ * {`, " ")) + f[i:]
			}
		}
		out = append(out, f)
	}
	return out
}
