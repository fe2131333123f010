package subsys

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The trace instance's settings that trace-cmd reads and writes besides
// tracing_on and the buffer's size — trace_clock, trace_options,
// current_tracer, buffer_percent — as Linux 6.12 keeps them
// (kernel/trace/trace.c). Each is one of three kinds here: what this tree
// does (the clock's name, record-cmd, record-tgid, buffer_percent), what
// it has only as the kernel's default (every other trace option, the nop
// tracer: a write that would change it is EINVAL, saying so), and what
// does not exist here (other tracers and clocks, which the kernel lists).

// traceClocks are trace_clock's clocks, in the kernel's order
// (trace_clocks[] and x86-64's ARCH_TRACE_CLOCKS).
var traceClocks = []string{"local", "global", "counter", "uptime", "perf", "mono", "mono_raw", "boot", "tai", "x86-tsc"}

// clockShown reports whether the tree can show its stamps as clock c:
// they are CLOCK_MONOTONIC, which mono is, and which local, global and
// perf (sched_clock, nanoseconds since boot) are close to; counter,
// uptime, mono_raw, boot, tai and x86-tsc count something else.
func clockShown(c string) bool {
	switch c {
	case "local", "global", "perf", "mono":
		return true
	}
	return false
}

// appendClocks is trace_clock's text (tracing_clock_show): the clocks,
// the one in use in brackets.
func appendClocks(dst []byte, in int) []byte {
	for i, c := range traceClocks {
		if i > 0 {
			dst = append(dst, ' ')
		}
		if i == in {
			dst = append(dst, '[')
			dst = append(dst, c...)
			dst = append(dst, ']')
		} else {
			dst = append(dst, c...)
		}
	}
	return append(dst, '\n')
}

// writeClock is a write to trace_clock (tracing_clock_write,
// tracing_set_clock): under 64 bytes, white space around the name
// stripped; a clock the kernel does not have is EINVAL. Selecting a clock
// — even the one in use — empties the buffer, as the kernel does so that
// stamps of two clocks never mix.
func (t *traceBuffer) writeClock(p []byte) (int, error) {
	name, err := shortName(p, "trace_clock")
	if err != nil {
		return 0, err
	}
	i := -1
	for j, c := range traceClocks {
		if c == name {
			i = j
		}
	}
	if i < 0 {
		return 0, fmt.Errorf("trace_clock: no clock %q (%s): %w", name, strings.Join(traceClocks, " "), unix.EINVAL)
	}
	if !clockShown(name) {
		return 0, fmt.Errorf("trace_clock: uetrace's records are stamped with CLOCK_MONOTONIC, which local, global, perf and mono show; it has no %s clock: %w", name, unix.EINVAL)
	}
	t.clock.Store(int32(i))
	t.reset()
	return len(p), nil
}

// shortName is what a write of under 64 bytes to file names, as
// tracing_clock_write and tracing_trace_options_write take it into a
// 64-byte buffer: EINVAL for more, then strip.
func shortName(p []byte, file string) (string, error) {
	if len(p) >= 64 {
		return "", fmt.Errorf("%s: %d bytes written, a name is under 64: %w", file, len(p), unix.EINVAL)
	}
	return strip(p), nil
}

// strip is strstrip on what a write gave: up to the first NUL, without
// the white space around it.
func strip(p []byte) string {
	if i := bytes.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	return string(bytes.TrimFunc(p, isSpace))
}

// isSpace is the kernel's isspace (lib/ctype.c): the C white space, and
// Latin-1's non-breaking space.
func isSpace(r rune) bool { return r == ' ' || r >= '\t' && r <= '\r' || r == 0xa0 }

// A traceOption is one line of trace_options.
type traceOption struct {
	name string
	// on is the kernel's default, or, for an option this tree does
	// something about, what it is now.
	on func(t *traceBuffer) bool
	// set sets an option this tree has; nil for the others, which keep
	// their default.
	set func(t *traceBuffer, on bool)
	// refuse: the nop tracer's test_nop_refuse, which the kernel refuses
	// to set or clear.
	refuse bool
}

func fixed(on bool) func(*traceBuffer) bool { return func(*traceBuffer) bool { return on } }

// traceOptions are trace_options as Linux 6.12 lists them with the nop
// tracer (tracing_trace_options_show: the core flags, then the tracer's),
// with their defaults — those of the test kernel's configuration, which
// has the function tracer (function-trace, function-fork, display-graph).
var traceOptions = []traceOption{
	{name: "print-parent", on: fixed(true)},
	{name: "sym-offset", on: fixed(false)},
	{name: "sym-addr", on: fixed(false)},
	{name: "verbose", on: fixed(false)},
	{name: "raw", on: fixed(false)},
	{name: "hex", on: fixed(false)},
	{name: "bin", on: fixed(false)},
	{name: "block", on: fixed(false)},
	{name: "fields", on: fixed(false)},
	{name: "trace_printk", on: fixed(true)},
	{name: "annotate", on: fixed(true)},
	{name: "userstacktrace", on: fixed(false)},
	{name: "sym-userobj", on: fixed(false)},
	{name: "printk-msg-only", on: fixed(false)},
	{name: "context-info", on: fixed(true)},
	{name: "latency-format", on: fixed(false)},
	{name: "record-cmd", on: func(t *traceBuffer) bool { return t.ring.RecordCmd() },
		set: func(t *traceBuffer, on bool) { t.ring.SetRecordCmd(on) }},
	{name: "record-tgid", on: func(t *traceBuffer) bool { return t.ring.RecordTGID() },
		set: func(t *traceBuffer, on bool) { t.ring.SetRecordTGID(on) }},
	{name: "overwrite", on: fixed(true)},
	{name: "disable_on_free", on: fixed(false)},
	{name: "irq-info", on: fixed(true)},
	{name: "markers", on: fixed(true)},
	{name: "event-fork", on: fixed(false)},
	{name: "trace_printk_dest", on: fixed(true)},
	{name: "pause-on-trace", on: fixed(false)},
	{name: "hash-ptr", on: fixed(true)},
	{name: "function-trace", on: fixed(true)},
	{name: "function-fork", on: fixed(false)},
	{name: "display-graph", on: fixed(false)},
	{name: "stacktrace", on: fixed(false)},
	// The nop tracer's own: the kernel takes test_nop_accept and does
	// nothing with it, as here.
	{name: "test_nop_accept", on: func(t *traceBuffer) bool { return t.nopAccept.Load() },
		set: func(t *traceBuffer, on bool) { t.nopAccept.Store(on) }},
	{name: "test_nop_refuse", on: fixed(false), refuse: true},
}

// appendOptions is trace_options's text: an option per line, "no" before
// the name of one that is off.
func (t *traceBuffer) appendOptions(dst []byte) []byte {
	for _, o := range traceOptions {
		if !o.on(t) {
			dst = append(dst, "no"...)
		}
		dst = append(dst, o.name...)
		dst = append(dst, '\n')
	}
	return dst
}

// writeOption is a write to trace_options (tracing_trace_options_write,
// trace_set_options): under 64 bytes, an option's name, "no" before it to
// clear it, white space around it stripped. An unknown option is EINVAL,
// and so is changing one this tree has only as the kernel's default.
func (t *traceBuffer) writeOption(p []byte) (int, error) {
	name, err := shortName(p, "trace_options")
	if err != nil {
		return 0, err
	}
	on := true
	if rest, ok := strings.CutPrefix(name, "no"); ok {
		name, on = rest, false
	}
	for _, o := range traceOptions {
		if o.name != name {
			continue
		}
		switch {
		case o.refuse:
			return 0, fmt.Errorf("trace_options: the nop tracer refuses %s: %w", name, unix.EINVAL)
		case o.set != nil:
			o.set(t, on)
		case o.on(t) != on:
			return 0, fmt.Errorf("trace_options: uetrace records and prints with the kernel's default for %s only: %w", name, unix.EINVAL)
		}
		return len(p), nil
	}
	return 0, fmt.Errorf("trace_options: no option %q: %w", name, unix.EINVAL)
}

// writeTracer is a write to current_tracer (tracing_set_trace_write): the
// first 100 bytes, white space around the name stripped. The tree has the
// nop tracer alone (available_tracers): selecting it again does nothing,
// as in the kernel; any other name is EINVAL, the kernel's answer for a
// tracer it does not have.
func writeTracer(p []byte) (int, error) {
	if name := strip(p[:min(len(p), 100)]); name != "nop" {
		return 0, fmt.Errorf("current_tracer: uetrace has the nop tracer only, not %q: %w", name, unix.EINVAL)
	}
	return len(p), nil
}

// bufferPercent is buffer_percent (default 50): how much of a CPU's
// buffer is filled before its trace_pipe_raw polls readable.
type bufferPercent struct{ v atomic.Int32 }

// write is buffer_percent_write: a decimal number up to 100.
func (b *bufferPercent) write(p []byte) (int, error) {
	v, err := kstrtoulFromUser(p)
	if err != nil {
		return 0, err
	}
	if v > 100 {
		return 0, fmt.Errorf("buffer_percent %d is over 100: %w", v, unix.EINVAL)
	}
	b.v.Store(int32(v))
	return len(p), nil
}
