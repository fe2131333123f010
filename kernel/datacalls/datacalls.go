// Package datacalls holds a C program that makes about a hundred and fifty
// system calls on tracefs's user_events_data and the text files beside it, the
// way an unmodified C program would, and prints what each returned, and a
// golden of what Linux 6.12.117 answered (testdata/kernel.golden).
//
// The program is the oracle for serving tracefs over FUSE: run under
// `uetrace run`, where /sys/kernel/tracing is uetrace's FUSE tree, its output
// must equal the golden row by row ([Diff]). Each output line is a [Row]:
//
//	<label>: <return value> <errno name or 0>[ <observed state>]
//	<label>: "<a line of a tracefs file, escaped>"
//
// The state is what the call left behind where that is what matters: a
// write_index, an enable word, whether an event's directory exists, whether
// something the kernel does asynchronously happened within a bounded wait
// (only whether it settled is printed, never how long it took). Nothing in
// the output depends on addresses, pids, time or event IDs (an ID line of a
// format file is masked), so two runs on a freshly booted kernel print the
// same bytes. The program expects a kernel where no user event exists yet.
//
// What the golden proves, beyond the spec (../shared/spec) — the kernel facts
// that surprised us when capturing it:
//
//   - DIAG_IOCSREG whose struct user_reg is in read-only memory succeeds
//     and the enabler works, but write_index is never stored: the kernel
//     ignores put_user's failure (reg.struct_readonly).
//   - An enable_addr that cannot be written (unmapped, read-only, NULL)
//     gives ENOMEM, not EFAULT, and the event it named is created anyway
//     and held by the fd; a kernel address gives EFAULT (access_ok).
//   - The (address, bit) clash is checked before the name is read: a
//     clashing registration with an unmapped name is EADDRINUSE, and it
//     clashes across fds of the same process and across enable sizes.
//   - A 4-byte enable word at an address 4 past an 8-byte boundary is
//     written as bit+32 of the aligned 8-byte word; the kernel's atomic
//     bit operations leave the word's other bits alone.
//   - DIAG_IOCSUNREG of an enabler whose word has been unmapped or made
//     read-only removes it and then fails with EFAULT (the clear of the
//     bit fails); a second call gives ENOENT.
//   - DIAG_IOCSUNREG's reserved fields are checked before the copy's
//     result: non-zero reserved with non-zero trailing bytes is EINVAL.
//   - Closing the fd that registered does not drop its enablers: they
//     belong to the process, so the event stays and its bit still flips.
//   - write(2) checks the file position (pwrite at 8 is EFAULT) but
//     writev/pwritev do not; an unknown or negative index is judged
//     before a fault in the payload, and a disabled event is EBADF even
//     when its payload is unmapped (no fault-in before the state check).
//   - After fork, the parent's own enable words are copy-on-write too, so
//     the kernel's updates of the parent's bits become asynchronous as well
//     as the child's: the program makes its forks last, and waits for the
//     bits after them.
//   - exec drops the process's enablers (an event held only by a child's
//     copy is deleted when the child execs) but not its fds' events: an
//     inherited user_events_data fd still writes with its old indices.
//   - Without CAP_PERFMON, PERSIST is EPERM even for an existing event,
//     while user_events_data itself is 0640 root (EACCES on open).
//
// Not covered: perf (perf_event_open), the user_events_max limit, a 32-bit
// process, threads sharing an mm.
package datacalls

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Row is one line of the program's output: Label is the text before the
// first ": ", Result the rest (return value, errno name and state, or a
// quoted line of a tracefs file).
type Row struct {
	Label, Result string
}

func (r Row) String() string { return r.Label + ": " + r.Result }

// dir is this package's directory, where testdata is.
func dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Dir(file)
}

// SourcePath is the C program's source.
func SourcePath() string { return filepath.Join(dir(), "testdata", "datacalls.c") }

// GoldenPath is the kernel's output of the program, as captured in the VM.
func GoldenPath() string { return filepath.Join(dir(), "testdata", "kernel.golden") }

// Build compiles the C program into a static binary at out, as the VM and a
// FUSE tree's test both need (the guest has no C library).
func Build(out string) error {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return fmt.Errorf("building datacalls needs gcc and a static C library: apt-get install gcc libc6-dev (%w)", err)
	}
	cmd := exec.Command(gcc, "-static", "-O2", "-Wall", "-Werror", "-o", out, SourcePath())
	msg, err := cmd.CombinedOutput()
	if err != nil {
		hint := ""
		if bytes.Contains(msg, []byte("cannot find -lc")) || bytes.Contains(msg, []byte("No such file")) {
			hint = " (the static C library or kernel headers are missing: apt-get install libc6-dev)"
		}
		return fmt.Errorf("gcc datacalls.c%s: %w\n%s", hint, err, msg)
	}
	return nil
}

// ReadGolden reads and parses the golden.
func ReadGolden() ([]Row, error) {
	b, err := os.ReadFile(GoldenPath())
	if err != nil {
		return nil, err
	}
	rows, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", GoldenPath(), err)
	}
	return rows, nil
}

// ErrSyntax is what Parse's errors wrap.
var ErrSyntax = errors.New("not datacalls output")

// Parse splits the program's output into rows. Lines that are empty or
// start with "#" are comments. Every other line must be "label: result"
// with a label of printable bytes without spaces or ": ", and a label may
// appear only once, so that Diff can name what differs.
func Parse(out []byte) ([]Row, error) {
	var rows []Row
	seen := map[string]int{}
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		label, result, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("line %d %q: no \": \" after a label: %w", i+1, line, ErrSyntax)
		}
		if label == "" || strings.IndexFunc(label, func(r rune) bool { return r <= ' ' || r >= 0x7f }) >= 0 {
			return nil, fmt.Errorf("line %d %q: a label is printable ASCII without spaces: %w", i+1, line, ErrSyntax)
		}
		if j, dup := seen[label]; dup {
			return nil, fmt.Errorf("line %d: label %q already on line %d: %w", i+1, label, j, ErrSyntax)
		}
		seen[label] = i + 1
		rows = append(rows, Row{Label: label, Result: result})
	}
	return rows, nil
}

// Diff lists how got differs from want, one sentence a row: rows whose
// results differ, rows missing from got, rows got has that want has not,
// and rows that came in another order. Nil means they are the same.
func Diff(want, got []Row) []string {
	var d []string
	gotAt := map[string]int{}
	for i, r := range got {
		gotAt[r.Label] = i
	}
	wantAt := map[string]int{}
	for i, r := range want {
		wantAt[r.Label] = i
	}
	last := -1
	for _, w := range want {
		i, ok := gotAt[w.Label]
		if !ok {
			d = append(d, fmt.Sprintf("%s: missing (want %q)", w.Label, w.Result))
			continue
		}
		if g := got[i]; g.Result != w.Result {
			d = append(d, fmt.Sprintf("%s: got %q, want %q", w.Label, g.Result, w.Result))
		}
		if i < last {
			d = append(d, fmt.Sprintf("%s: out of order (row %d of got, after row %d)", w.Label, i+1, last+1))
		}
		last = max(last, i)
	}
	for _, g := range got {
		if _, ok := wantAt[g.Label]; !ok {
			d = append(d, fmt.Sprintf("%s: unexpected row %q", g.Label, g.Result))
		}
	}
	return d
}
