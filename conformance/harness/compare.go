package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// Results are one backend's results: each scenario's normalised output,
// in the order they ran.
type Results struct {
	Names []string
	Text  map[string]string
}

// ParseResults reads what Run wrote.
func ParseResults(r io.Reader) (*Results, error) {
	res := &Results{Text: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var cur string
	var b strings.Builder
	flush := func() {
		if cur != "" {
			res.Text[cur] = b.String()
		}
		b.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			if _, dup := res.Text[name]; dup {
				return nil, fmt.Errorf("results name scenario %s twice", name)
			}
			cur = name
			res.Names = append(res.Names, name)
			res.Text[name] = ""
			continue
		}
		if cur == "" {
			return nil, fmt.Errorf("results: line %q before the first scenario", line)
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	flush()
	return res, sc.Err()
}

// Known are the known differences: scenario → backend → reason.
type Known map[string]map[string]string

// LoadKnown reads a known-differences file: "SCENARIO BACKEND: reason"
// lines, '#' comments. A missing file is no known differences.
func LoadKnown(path string) (Known, error) {
	k := Known{}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		head, reason, ok := strings.Cut(line, ":")
		f := strings.Fields(head)
		if !ok || len(f) != 2 || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want \"SCENARIO BACKEND: reason\"", path, i+1)
		}
		if k[f[0]] == nil {
			k[f[0]] = map[string]string{}
		}
		k[f[0]][f[1]] = strings.TrimSpace(reason)
	}
	return k, nil
}

// Report is the comparison of backends against the kernel.
type Report struct {
	Total     int
	Identical int      // scenarios identical to the kernel on every backend
	Known     []string // "SCENARIO BACKEND: reason" of known differences seen
	Unknown   []string // "SCENARIO BACKEND" of differences not listed
	Stale     []string // listed differences that no longer differ
	Missing   []string // scenarios a backend has no results for
	// Same counts, for each backend compared, the scenarios it answers as
	// the kernel does.
	Same  map[string]int
	Diffs strings.Builder
}

// OK reports whether every difference is a known one.
func (r *Report) OK() bool { return len(r.Unknown) == 0 && len(r.Missing) == 0 }

// Summary is the line CI prints: the scenarios identical on every
// backend, then each backend's own count.
func (r *Report) Summary() string {
	var each []string
	for _, b := range Backends[1:] {
		if n, ok := r.Same[b]; ok {
			each = append(each, fmt.Sprintf("%s %d", b, n))
		}
	}
	return fmt.Sprintf("conformance: %d/%d scenarios identical (%s)", r.Identical, r.Total, strings.Join(each, ", "))
}

// Compare compares each backend's results with the kernel's.
func Compare(kernel *Results, backends map[string]*Results, known Known) *Report {
	rep := &Report{Total: len(kernel.Names), Same: map[string]int{}}
	for _, b := range Backends[1:] {
		if _, ok := backends[b]; ok {
			rep.Same[b] = 0
		}
	}
	for _, name := range kernel.Names {
		same := true
		for _, b := range Backends[1:] {
			res, ok := backends[b]
			if !ok {
				continue
			}
			got, ok := res.Text[name]
			if !ok {
				rep.Missing = append(rep.Missing, name+" "+b)
				same = false
				continue
			}
			reason, isKnown := known[name][b]
			if got == kernel.Text[name] {
				rep.Same[b]++
				if isKnown {
					rep.Stale = append(rep.Stale, name+" "+b)
				}
				continue
			}
			same = false
			if isKnown {
				rep.Known = append(rep.Known, name+" "+b+": "+reason)
			} else {
				rep.Unknown = append(rep.Unknown, name+" "+b)
			}
			fmt.Fprintf(&rep.Diffs, "--- %s: kernel (-) vs %s (+)\n%s\n", name, b,
				cmp.Diff(strings.Split(kernel.Text[name], "\n"), strings.Split(got, "\n")))
		}
		if same {
			rep.Identical++
		}
	}
	return rep
}
