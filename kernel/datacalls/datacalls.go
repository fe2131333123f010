// Package datacalls holds a C program, testdata/datacalls.c, that makes the
// system calls an unmodified C program makes on tracefs's user_events_data and
// the text files beside it (about 270 calls, and 120 lines of tracefs text),
// printing what each returned; and testdata/kernel.golden, what Linux
// 6.12.117 with CONFIG_USER_EVENTS=y answered, captured in the VM
// (kernel/vmtest) by TestGoldenMatchesKernel.
//
// It is the oracle for serving tracefs over FUSE: run under `uetrace run`,
// where /sys/kernel/tracing is uetrace's FUSE tree, the program must print
// the golden row by row ([Parse], [Diff]). Each line is a [Row]:
//
//	<label>: <return value> <errno name or 0>[ <observed state>]
//	<label>: "<a line of a tracefs file, escaped>"
//
// The state is what the call left behind where that is the point: a
// write_index, an enable word, whether an event's directory exists, or
// whether something the kernel does asynchronously (a forked child's enable
// bit, a deferred delete) happened within a bounded wait — only whether it
// settled, never how long it took. Nothing printed depends on addresses,
// pids, time or event IDs (format files' ID lines are masked), so two runs on
// freshly booted kernels print the same bytes (15 runs in a row, 5 of them with
// the host's CPUs busy). The program expects a kernel where no user event
// exists yet: its status and dynamic_events listings count on it.
//
// What the golden proves: the return value and errno of every call, in the
// order the kernel checks things, for DIAG_IOCSREG (struct size, flags,
// enable size, alignment, bit, unwritable or unreadable memory, names),
// DIAG_IOCSUNREG, DIAG_IOCSDEL, write/pwrite/writev/pwritev (sizes, indices,
// faults in the index or the payload, enabled or not), read, lseek, ioctl,
// opens in each mode, dynamic_events creates and deletes, enable and status
// file writes; the enable bits the kernel writes (and when); what reaches
// the trace; and the exact text of user_events_status, dynamic_events and
// format files. It does not cover perf (perf_event_open), the
// user_events_max limit, threads sharing an mm, or 32-bit processes.
//
// Kernel facts it found that surprised us:
//
//   - DIAG_IOCSREG whose struct user_reg is in read-only memory returns 0
//     and its enabler works, but write_index is never stored: the kernel
//     ignores put_user's failure (reg.struct_readonly).
//   - An enable_addr that cannot be written (unmapped, read-only, NULL) is
//     ENOMEM, not EFAULT, and the event it named is created anyway and
//     stays, held by the fd; a kernel address is EFAULT (access_ok).
//   - The (address, bit) clash is checked before the name is read: with an
//     unmapped name it is EADDRINUSE, not EFAULT; it clashes across fds of
//     the process and across enable sizes.
//   - DIAG_IOCSUNREG of an enabler whose word was unmapped or made
//     read-only removes the enabler and still fails with EFAULT (the clear
//     of the bit failed); asking again gives ENOENT.
//   - DIAG_IOCSUNREG with non-zero reserved fields and non-zero bytes past
//     16 is E2BIG, not EINVAL: the reserved check reads the kernel's copy,
//     which copy_struct_from_user left zeroed when it stopped.
//   - Closing the fd that registered does not drop its enablers, which
//     belong to the process: the event stays and its bit still flips.
//   - write(2) checks the file position (pwrite at 8 is EFAULT) but
//     writev and pwritev do not. A fault in the index is EFAULT even for a
//     disabled event, but a fault in the payload of a disabled event is
//     EBADF (the state is checked before the payload is faulted in); an
//     enabled event's payload fault is EFAULT and leaves no record.
//   - A record the trace buffer's page cannot hold (over 4072 bytes with
//     its header) is never validated: user_event_ftrace cannot reserve it,
//     so a write of a __rel_loc string without its NUL succeeds and nothing
//     reaches the trace; one byte less is validated and EFAULT.
//   - read(2) of 0 bytes is EINVAL (no read method), FIONREAD answers 0
//     (the VFS handles it), lseek is ESPIPE, yet pwrite at 0 works.
//   - exec drops the enablers (an event held only by a child's copy of one
//     is deleted when the child execs) but not the events of its fds: an
//     inherited user_events_data fd writes with its old indices.
//   - Without CAP_PERFMON, PERSIST is EPERM even for an event that exists
//     (checked before the lookup); user_events_data is 0640 root, so such a
//     process cannot even open it (EACCES) and works on an inherited fd.
//   - dynamic_events: "!u:NAME" deletes only an event without fields, and
//     "!u:NAME u32 a;char[4] b" (no space after ';') matches nothing;
//     an O_TRUNC open fails at open (EBUSY) while a non-persistent event
//     exists; an enable file takes "1\n" and "0\0" but not "on" or "".
//
// The program makes its forks last and waits for enable bits after a fork:
// a fork makes the parent's pages copy-on-write too, and the kernel writes an
// enable word it cannot pin without faulting from a worker, later.
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
func Build(out string) error { return build(out, "-static") }

// BuildDynamic compiles it linked against the machine's C library, so that
// the loader preloads uetrace run's interposer into it.
func BuildDynamic(out string) error { return build(out) }

func build(out string, flags ...string) error {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return fmt.Errorf("building datacalls needs gcc and a static C library: apt-get install gcc libc6-dev (%w)", err)
	}
	args := append(flags, "-O2", "-Wall", "-Werror", "-o", out, SourcePath())
	cmd := exec.Command(gcc, args...)
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
// start with "#" are comments, and a line may end in "\r\n". Every other
// line must be "label: result", the label printable ASCII without spaces,
// the result without control characters (the program escapes them in
// tracefs text); a label may appear only once, so that Diff can name what
// differs.
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
		if strings.IndexFunc(result, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
			return nil, fmt.Errorf("line %d %q: a control character in the result (the program escapes them): %w", i+1, line, ErrSyntax)
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
