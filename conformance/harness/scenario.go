// Package harness runs differential conformance scenarios: small scripts of
// user_events operations (conformance/README.md documents their format) run
// against the real kernel, the daemon, in-process subsys and uetrace's FUSE
// tree (the kernel's driver under uetrace run), with results normalised so
// that they can be compared byte for byte.
//
// It is part of the kernel-oracle tooling, not of the product: nothing
// uetrace ships imports it. conformance/cmd/ueconform is its command line,
// and the package's test runs the project's corpus.
package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Scenario is one scenario file.
type Scenario struct {
	Name  string // the file name without .scn
	Steps []Step
}

// Step is one line of a scenario, or a child block.
type Step struct {
	Line int      // line number in the file
	Text string   // the line as written, trimmed
	Verb string   // the first word
	Args []string // the other words, strings unquoted and expanded
	// Quoted says which of Args were written as strings: only unquoted
	// words can be key=value options.
	Quoted []bool
	Child  []Step // the steps of a "child" block
}

// Load reads every *.scn file named by paths (files or directories), sorted
// by name within each directory.
func Load(paths ...string) ([]*Scenario, error) {
	var out []*Scenario
	seen := map[string]string{}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		files := []string{p}
		if st.IsDir() {
			files, err = filepath.Glob(filepath.Join(p, "*.scn"))
			if err != nil {
				return nil, err
			}
			slices.Sort(files)
		}
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			name := strings.TrimSuffix(filepath.Base(f), ".scn")
			if other, dup := seen[name]; dup {
				return nil, fmt.Errorf("scenario %s is both %s and %s", name, other, f)
			}
			seen[name] = f
			steps, err := Parse(string(text))
			if err != nil {
				return nil, fmt.Errorf("%s:%w", f, err)
			}
			out = append(out, &Scenario{Name: name, Steps: steps})
		}
	}
	return out, nil
}

// Parse parses a scenario's text into steps.
func Parse(text string) ([]Step, error) {
	lines := strings.Split(text, "\n")
	steps, next, err := parseBlock(lines, 0, false)
	if err != nil {
		return nil, err
	}
	if next != len(lines) {
		return nil, fmt.Errorf("%d: \"end\" without \"child\"", next+1)
	}
	return steps, nil
}

func parseBlock(lines []string, i int, inChild bool) ([]Step, int, error) {
	var steps []Step
	for ; i < len(lines); i++ {
		text := strings.TrimSpace(lines[i])
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		words, quoted, err := split(text)
		if err != nil {
			return nil, 0, fmt.Errorf("%d: %v", i+1, err)
		}
		st := Step{Line: i + 1, Text: text, Verb: words[0], Args: words[1:], Quoted: quoted[1:]}
		switch st.Verb {
		case "end":
			if !inChild {
				return steps, i, nil
			}
			return steps, i + 1, nil
		case "child":
			child, next, err := parseBlock(lines, i+1, true)
			if err != nil {
				return nil, 0, err
			}
			if next > len(lines) || next == 0 || strings.TrimSpace(lines[next-1]) != "end" {
				return nil, 0, fmt.Errorf("%d: \"child\" without \"end\"", i+1)
			}
			st.Child = child
			steps = append(steps, st)
			i = next - 1
			continue
		}
		if err := checkStep(st); err != nil {
			return nil, 0, fmt.Errorf("%d: %s: %v", i+1, text, err)
		}
		steps = append(steps, st)
	}
	if inChild {
		return nil, 0, fmt.Errorf("%d: \"child\" without \"end\"", len(lines))
	}
	return steps, i, nil
}

// arity is how many positional words each verb takes: min and max (-1:
// any number).
var arity = map[string][2]int{
	"open": {1, 2}, "close": {1, 1}, "reg": {2, -1}, "unreg": {1, -1}, "del": {2, 5},
	"writev": {1, -1}, "write": {1, -1}, "pwrite": {2, -1},
	"mem": {0, 1}, "setmem": {2, 2}, "cat": {1, 1}, "echo": {3, 3}, "trunc": {1, 1},
	"ls": {1, 1}, "exists": {1, 1}, "wait-gone": {1, 1}, "wait-count": {2, 2}, "perf": {2, 3}, "protect": {1, 1},
}

func checkStep(st Step) error {
	a, ok := arity[st.Verb]
	if !ok {
		return fmt.Errorf("unknown step %q", st.Verb)
	}
	if len(st.Args) < a[0] || (a[1] >= 0 && len(st.Args) > a[1]) {
		return fmt.Errorf("%s takes %d..%d arguments, not %d", st.Verb, a[0], a[1], len(st.Args))
	}
	if st.Verb == "echo" && st.Args[0] != ">" && st.Args[0] != ">>" {
		return fmt.Errorf("echo needs > or >>, not %q", st.Args[0])
	}
	if st.Verb == "del" {
		switch n := len(st.Args); {
		case n == 3 && st.Args[2] != "retry", n == 4, n == 5 && st.Args[2] != "until":
			return fmt.Errorf("del takes F \"NAME\" [retry | until GLOB N], not %q", st.Text)
		}
	}
	if st.Verb == "wait-count" {
		if _, err := strconv.Atoi(st.Args[1]); err != nil {
			return fmt.Errorf("wait-count takes GLOB N, not %q", st.Text)
		}
	}
	return nil
}

var repeat = regexp.MustCompile(`\$\{(\d+)\*([^}]*)\}`)

// split cuts a line into words at spaces; a word in double quotes is a Go
// string (with ${N*x} expanded afterwards). quoted says which words had
// quotes.
func split(line string) (words []string, quoted []bool, err error) {
	for i := 0; i < len(line); {
		if line[i] == ' ' || line[i] == '\t' {
			i++
			continue
		}
		if line[i] == '#' {
			break
		}
		var word strings.Builder
		q := false
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			if line[i] != '"' {
				word.WriteByte(line[i])
				i++
				continue
			}
			lit, err := strconv.QuotedPrefix(line[i:])
			if err != nil {
				return nil, nil, fmt.Errorf("bad string at column %d: %v", i+1, err)
			}
			s, _ := strconv.Unquote(lit)
			s, err = expand(s)
			if err != nil {
				return nil, nil, err
			}
			word.WriteString(s)
			i += len(lit)
			q = true
		}
		words = append(words, word.String())
		quoted = append(quoted, q)
	}
	if len(words) == 0 {
		return nil, nil, fmt.Errorf("empty step")
	}
	return words, quoted, nil
}

// maxRepeat bounds ${N*x}: scenarios need a few KiB at most.
const maxRepeat = 1 << 16

func expand(s string) (string, error) {
	var err error
	out := repeat.ReplaceAllStringFunc(s, func(m string) string {
		sub := repeat.FindStringSubmatch(m)
		n, e := strconv.Atoi(sub[1])
		if e != nil || n > maxRepeat || n*len(sub[2]) > maxRepeat {
			err = fmt.Errorf("${%s*...} repeats more than %d bytes", sub[1], maxRepeat)
			return ""
		}
		return strings.Repeat(sub[2], n)
	})
	return out, err
}

// options splits a step's words into positional ones and key=value ones.
func (st Step) options() (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for i, a := range st.Args {
		if k, v, ok := strings.Cut(a, "="); ok && !st.Quoted[i] && isKey(k) {
			kv[k] = v
			continue
		}
		pos = append(pos, a)
	}
	return pos, kv
}

func isKey(k string) bool {
	switch k {
	case "bit", "size", "flags", "addr", "regsize", "tail", "name", "res", "res2", "avail":
		return true
	}
	return false
}

// source renders steps back as scenario text, for a child process.
func source(steps []Step) string {
	var b strings.Builder
	for _, st := range steps {
		if st.Verb == "child" {
			b.WriteString("child\n")
			b.WriteString(source(st.Child))
			b.WriteString("end\n")
			continue
		}
		b.WriteString(st.Text)
		b.WriteByte('\n')
	}
	return b.String()
}
