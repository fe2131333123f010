package selftests

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// Script returns a POSIX sh script that runs, in its working directory
// (where Build's binaries are), each of Binaries and then Example, against
// /sys/kernel/tracing — the kernel's tracefs in a VM, uetrace's under
// `uetrace run`. Each program's output comes back in a section
// (vmtest.Section's format) and its exit status on a line
// "@@NAME-EXIT N@@"; ReadRun reads them.
//
// The example reads a line from stdin before each write and never exits,
// so the script feeds it through a FIFO: it waits (up to a minute, polling)
// for user_events_status to list ExampleEvent, records the status, enables
// the event, sends lines until the trace shows a record (up to a minute),
// records the trace, and kills the example. Before it enables the event it
// clears the trace: the selftests' records are still in the buffer, and the
// type id of their deleted __test_event may be the example's event's now, so
// the trace would print them as the example's (the kernel does). Each selftest runs under
// timeout(1) with 10 minutes, far over the 90 s of its settings file, as the
// VM is emulated.
func Script() string {
	var names []string
	for _, b := range Binaries {
		names = append(names, b.Name)
	}
	return strings.ReplaceAll(script, "@BINARIES@", strings.Join(names, " "))
}

const script = `#!/bin/sh
# The user_events selftests and the example, each output in a section.
trap '' PIPE
tmp="$(mktemp -d)" || exit 1
tracing=/sys/kernel/tracing
section() { # NAME FILE
  [ -n "$(tail -c 1 "$2")" ] && echo >>"$2"
  echo "@@$1-BEGIN@@"
  cat "$2"
  echo "@@$1-END $(sha256sum <"$2" | cut -d' ' -f1)@@"
}
for t in @BINARIES@; do
  timeout 600 "./$t" >"$tmp/$t.out" 2>&1
  echo "@@$t-EXIT $?@@"
  section "$t" "$tmp/$t.out"
done

mkfifo "$tmp/example.in" || exit 1
./example <"$tmp/example.in" >"$tmp/example.out" 2>&1 &
pid=$!
exec 3>"$tmp/example.in"
i=0
until grep -qE '^test( |$)' "$tracing/user_events_status" 2>/dev/null || [ $i -ge 600 ] || ! kill -0 $pid 2>/dev/null; do
  i=$((i + 1)); sleep 0.1
done
cat "$tracing/user_events_status" >"$tmp/status" 2>&1
section example-status "$tmp/status"
# The selftests' records stay in the buffer, and their deleted events' type
# ids go to new events: the example's event may have one, and the trace would
# print the old records as its own. Clear them first.
: >"$tracing/trace"
echo 1 >"$tracing/events/user_events/test/enable"
i=0
until grep -qE '^ +example-[0-9]+ .*: test: ' "$tracing/trace" 2>/dev/null || [ $i -ge 600 ] || ! kill -0 $pid 2>/dev/null; do
  echo >&3; i=$((i + 1)); sleep 0.1
done
cat "$tracing/trace" >"$tmp/trace" 2>&1
section example-trace "$tmp/trace"
kill $pid 2>/dev/null
wait $pid
echo "@@example-EXIT $?@@"
exec 3>&-
echo 0 >"$tracing/events/user_events/test/enable" 2>/dev/null
section example-output "$tmp/example.out"
rm -rf "$tmp"
`

// Run is what Script printed.
type Run struct {
	// Results and Exit are each selftest's output and exit status, by
	// Binary.Name.
	Results map[string]*Result
	Exit    map[string]int
	// ExampleStatus is user_events_status once the example registered;
	// ExampleTrace the trace once it wrote; ExampleExit its exit status
	// (143: killed by SIGTERM, as the script does), ExampleOutput what it
	// printed.
	ExampleStatus, ExampleTrace, ExampleOutput string
	ExampleExit                                int
}

// ReadRun reads Script's output: every section and exit line must be there.
func ReadRun(out []byte) (*Run, error) {
	run := &Run{Results: map[string]*Result{}, Exit: map[string]int{}}
	var errs []error
	section := func(name string) []byte {
		body, _, err := vmtest.Section(out, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return body
	}
	exit := func(name string) int {
		m := regexp.MustCompile(`(?m)^@@` + regexp.QuoteMeta(name) + `-EXIT (\d+)@@$`).FindSubmatch(out)
		if m == nil {
			errs = append(errs, fmt.Errorf("no exit status of %s", name))
			return -1
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	for _, b := range Binaries {
		run.Exit[b.Name] = exit(b.Name)
		body := section(b.Name)
		if body == nil {
			continue
		}
		res, err := ParseTAP(bytes.NewReader(body))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Name, err))
			continue
		}
		run.Results[b.Name] = &res
	}
	run.ExampleStatus = string(section("example-status"))
	run.ExampleTrace = string(section("example-trace"))
	run.ExampleOutput = string(section("example-output"))
	run.ExampleExit = exit("example")
	return run, errors.Join(errs...)
}

// exampleRecord is the example's first record in the trace: its comm, the
// event and count 0 as the event's print fmt shows a u32.
var exampleRecord = regexp.MustCompile(`(?m)^ +example-\d+ +\[\d+\] \S+ +\d+\.\d+: test: count=0x0 \(0\)$`)

// Check reports how the run differs from what it must be, or nil: each
// selftest as Binary.Check (onKernel allows the known kernel races), its
// exit status the harness's (0 when nothing failed, else 1), and the example
// registered, wrote a record that the trace shows, and was still running
// when killed.
func (r *Run) Check(onKernel bool) error {
	var errs []error
	for _, b := range Binaries {
		res := r.Results[b.Name]
		if res == nil {
			errs = append(errs, fmt.Errorf("%s: no output", b.Name))
			continue
		}
		if err := b.Check(res, onKernel); err != nil {
			errs = append(errs, err)
		}
		want := 0
		if c := res.Counts(); c.Fail+c.Error > 0 {
			want = 1 // KSFT_FAIL
		}
		if got := r.Exit[b.Name]; got != want {
			errs = append(errs, fmt.Errorf("%s exited with status %d, want %d for %v", b.Name, got, want, res.Counts()))
		}
	}
	if !regexp.MustCompile(`(?m)^` + ExampleEvent + `( |$)`).MatchString(r.ExampleStatus) {
		errs = append(errs, fmt.Errorf("user_events_status does not list the example's event %q:\n%s", ExampleEvent, r.ExampleStatus))
	}
	if !exampleRecord.MatchString(r.ExampleTrace) {
		errs = append(errs, fmt.Errorf("the trace has no record \"example-PID ... test: count=0x0 (0)\" from the example:\n%s", r.ExampleTrace))
	}
	if r.ExampleExit != 128+15 {
		errs = append(errs, fmt.Errorf("the example exited with status %d before it was killed (it returns errno when it cannot register); it printed:\n%s", r.ExampleExit, r.ExampleOutput))
	}
	return errors.Join(errs...)
}

// Summary is one line per selftest: its counts and the tests that failed.
func (r *Run) Summary() string {
	var sb strings.Builder
	for _, b := range Binaries {
		res := r.Results[b.Name]
		if res == nil {
			fmt.Fprintf(&sb, "%s: no output\n", b.Name)
			continue
		}
		fmt.Fprintf(&sb, "%s: %v", b.Name, res.Counts())
		var failed []string
		for _, t := range res.Tests {
			if t.Status != Pass {
				failed = append(failed, t.Name+" ("+t.Status.String()+")")
			}
		}
		if len(failed) > 0 {
			fmt.Fprintf(&sb, "; not passed: %s", strings.Join(failed, ", "))
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
