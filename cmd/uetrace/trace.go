package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

func newTraceCmd(g *globals) *cobra.Command {
	var (
		follow bool
		ef     eventFilters
		pids   []int
		comms  []string
	)
	cmd := &cobra.Command{
		Use:   "trace [-f] [-e EVENT [--filter EXPR]]... [--pid PID[,PID...]] [--comm NAME]...",
		Short: "Print the trace buffer, or with -f follow it as records arrive",
		Long: `trace prints the ftrace buffer: the records of every enabled event, one line
each, as Linux prints them. -f reads trace_pipe instead, which consumes records
and waits for new ones until interrupted.

-e enables the events it selects for the duration of the trace, as trace-cmd
does: it implies -f, and when the trace ends (Ctrl-C, SIGTERM) the events it
enabled are disabled again, so every enable file is as it was before. Events
already enabled stay enabled. EVENT is "system:name" or a name, globs allowed,
as for "uetrace enable".

--filter EXPR after an -e sets the kernel's event filter (the events' filter
files) of the events that -e selects for the duration of the trace, as
trace-cmd record -f does, so the buffer only takes the records that pass:
"status >= 500 && path ~ \"/api/*\"". The filter language is the kernel's
(Documentation/trace/events.rst, "Event filtering"); the daemon has the same.
A filter the kernel refuses is reported with its error text and position.
When the trace ends every filter is set back to what it was.

--pid and --comm keep only the lines of those tasks, like perf script's: --pid
matches the task id a line shows (a thread's id; a process's main thread has
the process's id) and the tgid column where the trace shows one — on the
kernel "uetrace write options/record-tgid 1" adds it, and --pid then matches
every thread of a process; --comm matches the task's name, exactly. Given
both, a line must match both. This filters the lines uetrace prints: the
buffer still holds every task's records. On the kernel the name and tgid in
a line come from what ftrace saved of the task, which it learns when the
task is scheduled out after writing: a line read from trace_pipe at once can
show "<...>" or "(-------)", and then does not match. On the kernel, ftrace's
set_event_pid would filter at the source instead; uetrace leaves it alone,
since it is one setting for every reader of the buffer.`,
		Example: `  uetrace enable myapp_request
  uetrace trace -f
  uetrace trace -e 'myapp_*' --pid 4242`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			filt, err := newLineFilter(pids, comms)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if filt != nil {
				out = filt.writer(out)
				defer out.(*filterWriter).flush()
			}
			if len(ef.events) == 0 {
				if follow {
					return catFile(cmd, g, "trace -f", "trace_pipe", out)
				}
				return catFile(cmd, g, "trace", "trace", out)
			}
			return traceEnabled(cmd, g, &ef, out)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "follow trace_pipe until interrupted")
	ef.add(f, "enable this event while tracing, then restore (repeatable; implies -f)",
		"the kernel's event filter for the -e before it while tracing, then restore (as trace-cmd -f)")
	f.IntSliceVar(&pids, "pid", nil, "only lines of these task ids (comma-separated or repeated)")
	f.StringArrayVar(&comms, "comm", nil, "only lines of tasks with this name (repeatable)")
	return cmd
}

// traceEnabled enables what the patterns select that is not enabled yet,
// follows trace_pipe until interrupted and disables again what it enabled.
func traceEnabled(cmd *cobra.Command, g *globals, ef *eventFilters, out io.Writer) (err error) {
	fs, err := g.tracefs()
	if err != nil {
		return err
	}
	defer fs.Close()
	// The signals are caught from here on, so that an interrupt while
	// enabling still restores.
	ctx, stop := interruptible(cmd)
	defer stop()
	var enabled []string
	defer func() {
		for _, ev := range slices.Backward(enabled) {
			if rerr := fs.WriteFile("events/"+ev+"/enable", []byte("0"), 0); rerr != nil && err == nil {
				err = fmt.Errorf("restoring %s: %w", ev, rerr)
			}
		}
		if len(enabled) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "uetrace trace: disabled %s again\n", eventList(enabled))
		}
	}()
	// Filters go first, so that the records of an event enabled here are
	// filtered from the first; they are set back before the events are
	// disabled (the deferred calls run in reverse).
	var filtered []savedFilter
	defer func() {
		for _, sf := range slices.Backward(filtered) {
			if rerr := sf.restore(fs); rerr != nil && err == nil {
				err = fmt.Errorf("restoring the filter of %s: %w", sf.ev, rerr)
			}
		}
		if len(filtered) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "uetrace trace: filters of %s set back\n", eventList(savedEvents(filtered)))
		}
	}()
	var already []string
	for i, pat := range ef.events {
		evs, err := matchEvents(fs, "trace -e", pat, cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if ef.filters[i] != "" {
			for _, ev := range evs {
				sf, err := setFilter(fs, ev, ef.filters[i])
				if err != nil {
					return err
				}
				filtered = append(filtered, sf)
			}
		}
		for _, ev := range evs {
			if slices.Contains(enabled, ev) || slices.Contains(already, ev) {
				continue
			}
			on, err := eventEnabled(fs, ev)
			if err != nil {
				return err
			}
			if on {
				already = append(already, ev)
				continue
			}
			if err := fs.WriteFile("events/"+ev+"/enable", []byte("1"), 0); err != nil {
				return err
			}
			enabled = append(enabled, ev)
		}
	}
	stderr := cmd.ErrOrStderr()
	if len(enabled) > 0 {
		fmt.Fprintf(stderr, "uetrace trace: enabled %s until the trace ends\n", eventList(enabled))
	}
	if len(already) > 0 {
		fmt.Fprintf(stderr, "uetrace trace: %s already enabled, left so\n", eventList(already))
	}
	f, err := fs.Open("trace_pipe", os.O_RDONLY)
	if err != nil {
		return err
	}
	return copyUntil(ctx, out, f)
}

// eventEnabled reads an event's enable file: "0" or "1", the kernel adding
// "*" when soft-disabled.
// savedFilter is an event's filter before trace set it.
type savedFilter struct {
	ev  string // system/name
	old string // the filter file's text then
}

func savedEvents(sfs []savedFilter) []string {
	evs := make([]string, len(sfs))
	for i, sf := range sfs {
		evs[i] = sf.ev
	}
	return evs
}

// readFilter reads an event's filter file in one large read: the kernel
// answers only a read at offset 0, so a reader starting with a small
// buffer would get the text cut.
func readFilter(fs *tracefs.Tracefs, ev string) (string, error) {
	return readWhole(fs, "events/"+ev+"/filter")
}

// readWhole reads a file in one large read (see readFilter).
func readWhole(fs *tracefs.Tracefs, name string) (string, error) {
	f, err := fs.Open(name, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, err := f.Read(buf)
	if err != nil && err != io.EOF {
		return "", err
	}
	return string(buf[:n]), nil
}

// setFilter writes filter to ev's filter file. A refused filter is an
// error carrying the kernel's text: the filter with a caret under the
// error and its message.
func setFilter(fs *tracefs.Tracefs, ev, filter string) (savedFilter, error) {
	old, err := readFilter(fs, ev)
	if err != nil {
		return savedFilter{}, fmt.Errorf("trace --filter: %s: %w", strings.Replace(ev, "/", ":", 1), err)
	}
	sf := savedFilter{ev: ev, old: old}
	if err := fs.WriteFile("events/"+ev+"/filter", []byte(filter), 0); err != nil {
		text, _ := readFilter(fs, ev)
		_ = sf.restore(fs)
		var why string
		if text != "" && text != old {
			why = "\n" + strings.TrimRight(text, "\n")
		}
		return savedFilter{}, fmt.Errorf("trace --filter %q on %s: %w%s", filter, strings.Replace(ev, "/", ":", 1), err, why)
	}
	return sf, nil
}

// restore sets the filter back: "none" is cleared with "0"; a text that
// was an error (it cannot be written back) is cleared too.
func (sf savedFilter) restore(fs *tracefs.Tracefs) error {
	old := strings.TrimSuffix(sf.old, "\n")
	if old == "none" || strings.Contains(old, "\nparse_error: ") || strings.Contains(old, "\nError: (") {
		old = "0"
	}
	if err := fs.WriteFile("events/"+sf.ev+"/filter", []byte(old), 0); err != nil {
		return fs.WriteFile("events/"+sf.ev+"/filter", []byte("0"), 0)
	}
	return nil
}

func eventEnabled(fs *tracefs.Tracefs, ev string) (bool, error) {
	b, err := fs.ReadFile("events/" + ev + "/enable")
	if err != nil {
		return false, err
	}
	return len(b) > 0 && b[0] == '1', nil
}

func eventList(evs []string) string {
	names := make([]string, len(evs))
	for i, ev := range evs {
		names[i] = strings.Replace(ev, "/", ":", 1)
	}
	return strings.Join(names, ", ")
}

// lineFilter keeps the trace lines of some tasks.
type lineFilter struct {
	pids  []int
	comms []string
}

func newLineFilter(pids []int, comms []string) (*lineFilter, error) {
	if len(pids) == 0 && len(comms) == 0 {
		return nil, nil
	}
	if err := checkPIDs("trace", pids); err != nil {
		return nil, err
	}
	return &lineFilter{pids: pids, comms: comms}, nil
}

// taskColumn matches the start of a trace line: the task's name, "-", its
// id, with record-tgid the tgid in parentheses, then the CPU in brackets
// (trace_print_context: "%16s-%-7d", " (%7d)" or " (-------)", " [%03d]").
// The name may hold anything, "-" and spaces included: the greedy match
// takes the last "-id" before the CPU.
var taskColumn = regexp.MustCompile(`^\s*(.*)-(\d+)\s+(?:\(\s*(\d+|-+)\)\s+)?\[\d+\]`)

// keep reports whether a line is kept: headers ("#") and lines that are
// not records are.
func (lf *lineFilter) keep(line []byte) bool {
	if len(line) == 0 || line[0] == '#' {
		return true
	}
	m := taskColumn.FindSubmatch(line)
	if m == nil {
		return true
	}
	if len(lf.pids) > 0 {
		tid, _ := strconv.Atoi(string(m[2]))
		tgid, err := strconv.Atoi(string(m[3]))
		if !slices.Contains(lf.pids, tid) && (err != nil || !slices.Contains(lf.pids, tgid)) {
			return false
		}
	}
	if len(lf.comms) > 0 {
		comm := string(bytes.TrimSpace(m[1]))
		if !slices.Contains(lf.comms, comm) {
			return false
		}
	}
	return true
}

func (lf *lineFilter) writer(w io.Writer) io.Writer { return &filterWriter{lf: lf, w: w} }

// filterWriter writes the kept whole lines of what it is given.
type filterWriter struct {
	lf      *lineFilter
	w       io.Writer
	partial []byte
}

func (fw *filterWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			fw.partial = append(fw.partial, p...)
			break
		}
		line := p[:i+1]
		if len(fw.partial) > 0 {
			line = append(fw.partial, line...)
			fw.partial = fw.partial[:0]
		}
		if fw.lf.keep(line) {
			if _, err := fw.w.Write(line); err != nil {
				return 0, err
			}
		}
		p = p[i+1:]
	}
	return n, nil
}

// flush writes a last line that had no newline.
func (fw *filterWriter) flush() {
	if len(fw.partial) > 0 && fw.lf.keep(fw.partial) {
		fw.w.Write(fw.partial)
	}
	fw.partial = nil
}

// checkPIDs checks --pid's values.
func checkPIDs(op string, pids []int) error {
	for _, p := range pids {
		if p <= 0 {
			return &userevents.Error{Op: op + " --pid", Input: strconv.Itoa(p), Errno: unix.EINVAL, Reason: "a process id is a positive number"}
		}
	}
	return nil
}
