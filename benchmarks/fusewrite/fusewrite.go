// Package fusewrite measures a C program writing user_events through
// uetrace's FUSE tree (`uetrace run`), beside the same writes to a FUSE
// server that only answers (the bare round trip) and the same event written
// by a Go program through the daemon's socket and ring transports, in one
// run so the ratios mean something (BenchmarkWrite, in this package's
// tests).
//
// The program (testdata/fusewrite.c, built static by Build) is a producer as
// one is written for the kernel: it opens /sys/kernel/tracing/user_events_data,
// registers "bench_fuse u32 a; u64 b" with DIAG_IOCSREG, enables the event
// itself, writes records with writev([write_index][payload]) behind the
// enable-bit check, then disables the event and times the check alone. It
// times itself with CLOCK_MONOTONIC and prints one line per phase, which
// Parse reads.
//
// The null server (testdata/nullfuse.c, built static by BuildNull) serves
// one file whose writes it answers at once, from one thread blocked in
// read(2) of /dev/fuse, as libfuse's single-threaded loop does; the program
// writes to it with -n.
//
// It is tooling, beside the product and never imported by it: it starts the
// uetrace binary, a daemon and the null server, and does not touch a FUSE
// mount itself (the C program is the only one that does).
package fusewrite

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// dir is this package's directory, where testdata is.
func dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	return filepath.Dir(file)
}

// SourcePath is the C program's source.
func SourcePath() string { return filepath.Join(dir(), "testdata", "fusewrite.c") }

// NullSourcePath is the null FUSE server's source.
func NullSourcePath() string { return filepath.Join(dir(), "testdata", "nullfuse.c") }

// Build compiles the C program into a static binary at out.
func Build(out string) error { return build(SourcePath(), out) }

// BuildNull compiles the null FUSE server into a static binary at out.
func BuildNull(out string) error { return build(NullSourcePath(), out) }

func build(src, out string) error {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return fmt.Errorf("building %s needs gcc and a static C library: apt-get install gcc libc6-dev (%w)", filepath.Base(src), err)
	}
	cmd := exec.Command(gcc, "-static", "-O2", "-Wall", "-Werror", "-o", out, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gcc %s: %w\n%s", filepath.Base(src), err, msg)
	}
	return nil
}

// Phase is one timed phase of the program: Count writes (enabled) or
// enable-bit checks (disabled) in Nanos nanoseconds, and for writes the
// median time of one, MedianNanos.
type Phase struct {
	Count, Nanos uint64
	MedianNanos  uint64
}

// PerSecond is the phase's rate.
func (p Phase) PerSecond() float64 { return float64(p.Count) * 1e9 / float64(max(p.Nanos, 1)) }

// NanosPerOp is the phase's time per write or check.
func (p Phase) NanosPerOp() float64 { return float64(p.Nanos) / float64(max(p.Count, 1)) }

// Result is what the program printed: the phases it ran (a zero Phase for
// one it skipped).
type Result struct {
	Enabled, Disabled Phase
}

// Parse reads the program's output: the lines
//
//	enabled events=N ns=T events/s=R median_ns=W
//	disabled checks=M ns=T checks/s=R
//
// each at most once, in that order or alone. The rate is recomputed from
// the counts, not read.
func Parse(out []byte) (Result, error) {
	var r Result
	seen := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		var p *Phase
		var unit string
		want := 4
		switch {
		case len(f) == 0:
		case f[0] == "enabled":
			p, unit, want = &r.Enabled, "events", 5
		case f[0] == "disabled":
			p, unit = &r.Disabled, "checks"
		default:
			return Result{}, fmt.Errorf("fusewrite: %q: unknown phase %q (want enabled or disabled): %w", line, f[0], unix.EINVAL)
		}
		if len(f) != want {
			return Result{}, fmt.Errorf("fusewrite: %q: want a phase and %d key=value fields: %w", line, want-1, unix.EINVAL)
		}
		if seen[f[0]] {
			return Result{}, fmt.Errorf("fusewrite: the %s phase is reported twice: %w", f[0], unix.EINVAL)
		}
		seen[f[0]] = true
		var err error
		if p.Count, err = field(f[1], unit); err != nil {
			return Result{}, err
		}
		if p.Nanos, err = field(f[2], "ns"); err != nil {
			return Result{}, err
		}
		if _, ok := strings.CutPrefix(f[3], unit+"/s="); !ok {
			return Result{}, fmt.Errorf("fusewrite: %q: want %s/s=: %w", f[3], unit, unix.EINVAL)
		}
		if want == 5 {
			if p.MedianNanos, err = field(f[4], "median_ns"); err != nil {
				return Result{}, err
			}
		}
		if p.Count == 0 || p.Nanos == 0 {
			return Result{}, fmt.Errorf("fusewrite: %q: a phase with no %s or no time: %w", line, unit, unix.EINVAL)
		}
		if p.MedianNanos > p.Nanos {
			return Result{}, fmt.Errorf("fusewrite: %q: a write's median longer than the whole phase: %w", line, unix.EINVAL)
		}
	}
	if !seen["enabled"] && !seen["disabled"] {
		return Result{}, fmt.Errorf("fusewrite: no phase in the output: %w", unix.EINVAL)
	}
	return r, nil
}

func field(s, key string) (uint64, error) {
	v, ok := strings.CutPrefix(s, key+"=")
	if !ok {
		return 0, fmt.Errorf("fusewrite: %q: want %s=: %w", s, key, unix.EINVAL)
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fusewrite: %q: not a count: %w", s, unix.EINVAL)
	}
	return n, nil
}
