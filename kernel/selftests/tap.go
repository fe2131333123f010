package selftests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Status is what a test's result line says.
type Status int

const (
	Pass  Status = iota // "ok N name"
	Fail                // "not ok N name"
	Skip                // "ok N name # SKIP reason" (kselftest also prints "not ok ... # SKIP")
	XFail               // "ok N name # XFAIL reason": failed as expected
	XPass               // "ok N name # XPASS reason": passed where a failure was expected
	Error               // "not ok N # error reason": kselftest.h's ksft_test_result_error
)

func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Skip:
		return "skip"
	case XFail:
		return "xfail"
	case XPass:
		return "xpass"
	case Error:
		return "error"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Test is one result line and what the program printed before it since the
// previous one: the harness prints a test's "#  RUN" line, its failed
// assertions ("# file.c:LINE:test:Expected ...") and whatever the test
// itself writes, then the result.
type Test struct {
	Number int
	Name   string
	Status Status
	// Directive is the text after "# SKIP", "# XFAIL", "# XPASS" or
	// "# TODO" (the reason), or after "#" for any other directive.
	Directive string
	// Output holds the lines before the result line, "# " comments
	// included, as printed.
	Output []string
}

// Totals is the harness's "# Totals: pass:P fail:F xfail:XF xpass:XP
// skip:S error:E" line, or the same counts taken from the result lines.
type Totals struct {
	Pass, Fail, XFail, XPass, Skip, Error int
}

func (t Totals) String() string {
	return fmt.Sprintf("pass:%d fail:%d xfail:%d xpass:%d skip:%d error:%d",
		t.Pass, t.Fail, t.XFail, t.XPass, t.Skip, t.Error)
}

// Result is one program's TAP output.
type Result struct {
	// Version is the number of the "TAP version N" line (0: none).
	Version int
	// Plan is N of the "1..N" line, -1 when there was none.
	Plan int
	// Tests are the result lines in the order printed.
	Tests []Test
	// Totals is the program's own "# Totals:" line, nil when it printed
	// none (a program that crashed before the end).
	Totals *Totals
	// Bailout is the reason of a "Bail out!" line; Bailed says there was one.
	Bailout string
	Bailed  bool
	// Trailing are the lines after the last result line.
	Trailing []string
}

// Counts counts the result lines by status.
func (r *Result) Counts() Totals {
	var t Totals
	for _, tc := range r.Tests {
		switch tc.Status {
		case Pass:
			t.Pass++
		case Fail:
			t.Fail++
		case Skip:
			t.Skip++
		case XFail:
			t.XFail++
		case XPass:
			t.XPass++
		case Error:
			t.Error++
		}
	}
	return t
}

// Test returns the test of that name, or nil.
func (r *Result) Test(name string) *Test {
	for i := range r.Tests {
		if r.Tests[i].Name == name {
			return &r.Tests[i]
		}
	}
	return nil
}

// Complete reports why the output is not that of a program that ran its
// whole plan, or nil: a plan, one result line per planned test numbered 1
// to N, no bail-out, and a Totals line that agrees with the result lines.
func (r *Result) Complete() error {
	var errs []error
	if r.Plan < 0 {
		errs = append(errs, errors.New("no plan line \"1..N\""))
	} else if len(r.Tests) != r.Plan {
		errs = append(errs, fmt.Errorf("the plan is %d tests but %d result lines were printed", r.Plan, len(r.Tests)))
	}
	for i, tc := range r.Tests {
		if tc.Number != i+1 {
			errs = append(errs, fmt.Errorf("result line %d is numbered %d", i+1, tc.Number))
			break
		}
	}
	if r.Bailed {
		errs = append(errs, fmt.Errorf("bailed out: %s", r.Bailout))
	}
	if r.Totals == nil {
		errs = append(errs, errors.New("no \"# Totals:\" line: did the program end early?"))
	} else if c := r.Counts(); *r.Totals != c {
		errs = append(errs, fmt.Errorf("the Totals line says %v but the result lines count %v", *r.Totals, c))
	}
	return errors.Join(errs...)
}

// maxLine bounds one line of output: a test that prints a runaway line must
// not make the parser hold it whole.
const maxLine = 1 << 20

// ParseTAP reads the output of a kselftest program: TAP version 13 as the
// kselftest harness (kselftest_harness.h) and kselftest.h print it. Lines that
// are not TAP (what the tests print themselves) are kept with the next
// result line. It is an error for a line that starts like a TAP line ("ok",
// "not ok", "1..", "TAP version", "# Totals:") not to parse, or for a plan,
// version or Totals line to come twice; whether the output is complete is
// Result.Complete's question, since a crashed test's output still parses.
func ParseTAP(r io.Reader) (Result, error) {
	res := Result{Plan: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	var pending []string
	lineNo := 0
	fail := func(format string, args ...any) (Result, error) {
		return res, fmt.Errorf("TAP line %d: "+format, append([]any{lineNo}, args...)...)
	}
	for sc.Scan() {
		lineNo++
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "TAP version "):
			if res.Version != 0 {
				return fail("a second version line %q", line)
			}
			v, err := strconv.Atoi(strings.TrimPrefix(line, "TAP version "))
			if err != nil || v <= 0 {
				return fail("bad version line %q", line)
			}
			res.Version = v
		case strings.HasPrefix(line, "1.."):
			if res.Plan >= 0 {
				return fail("a second plan %q", line)
			}
			n, _, _ := strings.Cut(strings.TrimPrefix(line, "1.."), " ")
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 || n != strconv.Itoa(v) {
				return fail("bad plan %q", line)
			}
			res.Plan = v
		case line == "ok" || line == "not ok" || strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "not ok "):
			tc, err := parseResult(line)
			if err != nil {
				return fail("%v", err)
			}
			tc.Output = pending
			pending = nil
			res.Tests = append(res.Tests, tc)
		case strings.HasPrefix(line, "# Totals:"):
			if res.Totals != nil {
				return fail("a second Totals line %q", line)
			}
			t, err := parseTotals(line)
			if err != nil {
				return fail("%v", err)
			}
			res.Totals = &t
		case strings.HasPrefix(line, "Bail out!"):
			res.Bailed = true
			res.Bailout = strings.TrimSpace(strings.TrimPrefix(line, "Bail out!"))
		default:
			pending = append(pending, line)
		}
	}
	if err := sc.Err(); err != nil {
		lineNo++
		return fail("%v", err)
	}
	res.Trailing = pending
	return res, nil
}

// parseResult parses "ok N name", "not ok N name # DIRECTIVE reason". The
// number is required (kselftest always prints one); the name may be empty.
func parseResult(line string) (Test, error) {
	var tc Test
	rest, failed := strings.CutPrefix(line, "not ok")
	if !failed {
		rest = strings.TrimPrefix(line, "ok")
	}
	rest, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return tc, fmt.Errorf("no test number in %q", line)
	}
	num, rest, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || num != strconv.Itoa(n) {
		return tc, fmt.Errorf("bad test number in %q", line)
	}
	tc.Number = n
	name, directive, hasDirective := strings.Cut(rest, " # ")
	if !hasDirective {
		// "ok 3 # SKIP reason": no name.
		if d, ok := strings.CutPrefix(rest, "# "); ok {
			name, directive, hasDirective = "", d, true
		}
	}
	tc.Name = strings.TrimSpace(name)
	tc.Status = Pass
	if failed {
		tc.Status = Fail
	}
	if !hasDirective {
		return tc, nil
	}
	word, reason, _ := strings.Cut(strings.TrimSpace(directive), " ")
	switch strings.ToUpper(word) {
	case "SKIP":
		tc.Status = Skip
	case "XFAIL":
		tc.Status = XFail
	case "XPASS":
		tc.Status = XPass
	case "TODO":
		// TAP's TODO: the result stands, the directive says why.
	case "ERROR":
		if failed {
			tc.Status = Error
		}
	default:
		reason = strings.TrimSpace(directive)
	}
	tc.Directive = strings.TrimSpace(reason)
	return tc, nil
}

// parseTotals parses "# Totals: pass:5 fail:1 xfail:0 xpass:0 skip:0 error:0".
func parseTotals(line string) (Totals, error) {
	var t Totals
	fields := strings.Fields(strings.TrimPrefix(line, "# Totals:"))
	seen := map[string]bool{}
	for _, f := range fields {
		key, val, ok := strings.Cut(f, ":")
		n, err := strconv.Atoi(val)
		if !ok || err != nil || n < 0 || val != strconv.Itoa(n) {
			return t, fmt.Errorf("bad count %q in %q", f, line)
		}
		if seen[key] {
			return t, fmt.Errorf("%s counted twice in %q", key, line)
		}
		seen[key] = true
		switch key {
		case "pass":
			t.Pass = n
		case "fail":
			t.Fail = n
		case "xfail":
			t.XFail = n
		case "xpass":
			t.XPass = n
		case "skip":
			t.Skip = n
		case "error":
			t.Error = n
		default:
			return t, fmt.Errorf("unknown count %q in %q", key, line)
		}
	}
	for _, k := range []string{"pass", "fail", "xfail", "xpass", "skip", "error"} {
		if !seen[k] {
			return t, fmt.Errorf("no %s count in %q", k, line)
		}
	}
	return t, nil
}
