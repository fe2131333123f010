package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/export/live"
	"github.com/uetrace/uetrace/internal/realtime"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/userevents"
)

func newRecordCmd(g *globals) *cobra.Command {
	var (
		ef       eventFilters
		output   string
		duration time.Duration
		bufferKB int
		noFollow bool
		quiet    bool
		pids     []int
		comms    []string
		clockID  string
		rtPrio   int
	)
	cmd := &cobra.Command{
		Use:   "record [-e EVENT [--filter EXPR]]... [-o FILE] [--duration D] [-- COMMAND [ARG...]]",
		Short: "Record events of every process into a perf.data file",
		Long: `record samples events into a perf.data file that "uetrace report" and perf's
own tools (perf script, perf report) read, like "perf record -a -e EVENT".

It records every process's events until interrupted (Ctrl-C), until --duration
has passed, or — when a command is given — until the command exits; the
command only bounds the recording, it does not filter it. As with perf
record, uetrace then exits with the command's status (or dies of the signal
that killed it), and SIGINT or SIGTERM to uetrace stops the recording and
sends the command SIGTERM if it is still running.

-e selects events as system:name or name, either part a glob; a multi-format
event's name selects every version of it (name.<hexid>). Without -e every user
event is recorded. Events registered while the recording runs are picked up if
a pattern selects them (the daemon attaches them at once; on the kernel they
are found within 250 ms, and their writers see the event enabled only then).

--filter EXPR after an -e records only the records of that -e's events that
pass the kernel's event filter EXPR, as perf record --filter does: the kernel
(or the daemon) tests each record and delivers only those, so the others cost
no copy. The language is the kernel's event filter language
(Documentation/trace/events.rst, "Event filtering"):
'status >= 500 && path ~ "/api/*"'. A second --filter for one -e is joined to
the first with &&.

--pid and --comm record only some tasks' samples, as perf record --pid and perf
script --comm select them: --pid the processes with those ids (every thread),
--comm the tasks with that name (exactly, as it was when the sample was
taken); given both, a sample must match both. The kernel and the daemon still
deliver every task's records, which uetrace leaves out as they come (the
summary counts them): records lost for a full buffer can be any task's.

-r N (--realtime N) runs the recording's threads at SCHED_FIFO priority N, as
perf record -r does, so that they read the rings as soon as records wait: on
a busy machine a normal thread may wait milliseconds for a CPU while a fast
producer's ring fills. It needs root or CAP_SYS_NICE; a COMMAND is started
with the normal policy.

On a terminal a status line shows events/s, bytes written and records lost.
Lost records are counted in the file and reported, never dropped silently.`,
		Example: `  uetrace record -e 'myapp_*' --duration 10s
  uetrace record -e user_events:request -o req.data -- ./loadtest
  uetrace record -e request --filter 'status >= 500' --duration 1m
  uetrace report req.data --format json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRecord(cmd, g, recordArgs{
				events: ef.events, filters: ef.filters, output: output, duration: duration, bufferKB: bufferKB,
				noFollow: noFollow, quiet: quiet, command: args, pids: pids, comms: comms, clockID: clockID,
				realtime: rtPrio,
			})
		},
	}
	f := cmd.Flags()
	ef.add(f, "event to record: system:name or name, globs allowed (repeatable; default every user event)",
		"only the records of the -e before it that pass this kernel event filter (as perf record --filter)")
	f.StringVarP(&output, "output", "o", "perf.data", "the perf.data file to write (an existing one is kept as FILE.old)")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: until interrupted or the command exits)")
	f.IntVar(&bufferKB, "buffer-kb", 0, "buffer size in KiB (default: 512 per CPU on the kernel, 16384 for a daemon session)")
	f.BoolVar(&noFollow, "no-follow", false, "record only events that exist at the start")
	f.BoolVarP(&quiet, "quiet", "q", false, "no status line or notices; the summary and lost counts are still printed")
	f.IntSliceVar(&pids, "pid", nil, "record only these processes (comma-separated or repeated)")
	f.StringArrayVar(&comms, "comm", nil, "record only tasks with this name (repeatable)")
	f.IntVarP(&rtPrio, "realtime", "r", 0, "run the recording's threads at this SCHED_FIFO priority (1-99), as perf record -r does")
	f.StringVarP(&clockID, "clockid", "k", "", "CLOCK_MONOTONIC: time samples by it and store the clock data, as perf record -k does (report --time wall and export then give wall-clock times)")
	return cmd
}

type recordArgs struct {
	events   []string
	filters  []string
	output   string
	duration time.Duration
	bufferKB int
	noFollow bool
	quiet    bool
	command  []string
	pids     []int
	comms    []string
	clockID  string
	realtime int // SCHED_FIFO priority; 0: the normal policy
}

func runRecord(cmd *cobra.Command, g *globals, a recordArgs) error {
	stderr := &lineWriter{w: cmd.ErrOrStderr()}
	opts := record.Options{
		Events:   a.events,
		Filters:  a.filters,
		BufferKB: a.bufferKB,
		NoFollow: a.noFollow,
		Cmdline:  os.Args,
		PIDs:     a.pids,
		Comms:    a.comms,
	}
	if err := checkPIDs("record", a.pids); err != nil {
		return err
	}
	switch strings.ToUpper(a.clockID) {
	case "":
	case "CLOCK_MONOTONIC", "MONOTONIC", "MONO":
		opts.ClockMonotonic = true
	default:
		return fmt.Errorf("record -k %q: only CLOCK_MONOTONIC is supported: %w", a.clockID, unix.EINVAL)
	}
	if !a.quiet {
		opts.Notify = func(msg string) { stderr.line("uetrace record: " + msg) }
	}
	if a.realtime != 0 {
		// Before the recorder's threads start: they inherit it.
		if err := realtime.Set(a.realtime); err != nil {
			return fmt.Errorf("record --realtime: %w", err)
		}
	}
	if _, err := os.Stat(a.output); err == nil {
		if err := os.Rename(a.output, a.output+".old"); err != nil {
			return err
		}
	}
	out, err := os.Create(a.output)
	if err != nil {
		return err
	}
	defer out.Close()
	// SIGINT and SIGTERM are caught before the events are enabled: a
	// Ctrl-C the moment they are must finish the file, not kill us with
	// it half written.
	ctx, stop, signalled := recordSignals(cmd)
	defer stop()
	rec, closeBackend, err := openRecorder(g, out, opts)
	if err != nil {
		os.Remove(a.output)
		return err
	}
	defer closeBackend()
	if !a.quiet {
		st := rec.Stats()
		var names []string
		for _, e := range st.Events {
			names = append(names, e.System+":"+e.Name)
		}
		if len(names) > 0 {
			if len(names) > 4 {
				names = append(names[:4], fmt.Sprintf("and %d more", len(names)-4))
			}
			stderr.line("uetrace record: recording " + strings.Join(names, ", "))
		}
	}

	if a.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.duration)
		defer cancel()
	}
	var child *exec.Cmd
	childDone := make(chan struct{})
	if len(a.command) > 0 {
		child = exec.Command(a.command[0], a.command[1:]...)
		child.Stdin, child.Stdout, child.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
		start := child.Start
		if a.realtime != 0 {
			start = func() error { return realtime.StartNormal(child) }
		}
		if err := start(); err != nil {
			cancelRun(rec)
			return fmt.Errorf("record -- %s: %w", a.command[0], err)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		// Wait's error is read from child.ProcessState once childDone
		// is closed.
		go func() { child.Wait(); close(childDone); cancel() }()
	}

	start := time.Now()
	var wg sync.WaitGroup
	statusDone := make(chan struct{})
	if !a.quiet && isTerminal(cmd.ErrOrStderr()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statusLine(rec, stderr, start, statusDone)
		}()
	}
	runErr := rec.Run(ctx)
	close(statusDone)
	wg.Wait()
	stderr.clear()

	if child != nil {
		// As perf record does (builtin-record.c, out_child): a workload
		// still running when the recording stops — on SIGINT or SIGTERM
		// to us, or at --duration — gets SIGTERM, whatever stopped us,
		// and is waited for; its exit status is then ours.
		select {
		case <-childDone:
		default:
			child.Process.Signal(syscall.SIGTERM)
			<-childDone
		}
	}

	st := rec.Stats()
	printSummary(cmd.ErrOrStderr(), st, a.output, time.Since(start))
	if runErr != nil {
		return runErr
	}
	if child != nil {
		if err := workloadStatus(child.ProcessState, signalled()); err != nil {
			return err
		}
	}
	return incomplete("record", st, a.events)
}

// incomplete is the error of a recording that has nothing to show for
// what it was asked, said rather than left as an empty file: no event
// matched the selection in all its time, or records came that cannot be
// decoded.
func incomplete(op string, st record.Stats, events []string) error {
	sel := strings.Join(events, ", ")
	if sel == "" {
		sel = strings.Join(record.DefaultEvents, ", ")
	}
	e := &userevents.Error{Op: op, Input: sel}
	switch {
	case len(st.Events) == 0 && st.Skipped > 0:
		e.Errno, e.Reason = unix.ENOENT, fmt.Sprintf("nothing recorded: the %d events that match have names no tracefs path can hold (skipped)", st.Skipped)
	case len(st.Events) == 0:
		e.Errno, e.Reason = unix.ENOENT, "nothing recorded: no event matched (uetrace status lists them)"
	case st.Unknown > 0:
		e.Errno, e.Reason = unix.EIO, fmt.Sprintf("%d samples cannot be decoded: their events' formats could not be read (above)", st.Unknown)
	default:
		return nil
	}
	return e
}

// workloadStatus is what uetrace record exits with after a workload, as
// perf record does: the workload's exit code; or, when the workload was
// killed by a signal, death by that signal; or, when we were signalled and
// the workload exited, death by our signal (record__sig_exit re-raises it
// with the default action). A zero exit with no signal is nil.
func workloadStatus(ps *os.ProcessState, ours syscall.Signal) error {
	ws, _ := ps.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		return &exitStatus{signal: ws.Signal()}
	case ours != 0:
		return &exitStatus{signal: ours}
	case ps.ExitCode() != 0:
		return &exitStatus{code: ps.ExitCode()}
	}
	return nil
}

// recordSignals is the recording's context, cancelled by SIGINT or
// SIGTERM, and which of them came first (0: none). The signals stay
// caught until stop, so that a second Ctrl-C while the workload is being
// stopped does not kill us before the file is complete.
func recordSignals(cmd *cobra.Command) (context.Context, func(), func() syscall.Signal) {
	ctx, cancel := context.WithCancel(cmd.Context())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	var first syscall.Signal
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				mu.Lock()
				if first == 0 {
					first = s.(syscall.Signal)
				}
				mu.Unlock()
				cancel()
			case <-done:
				return
			}
		}
	}()
	stop := func() { signal.Stop(ch); close(done); cancel() }
	got := func() syscall.Signal { mu.Lock(); defer mu.Unlock(); return first }
	return ctx, stop, got
}

// cancelRun completes the file of a recording that will not run.
func cancelRun(rec *record.Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec.Run(ctx)
}

// openRecorder starts a recording on the backend the flags choose: the
// kernel's perf events when it has user_events, else the daemon. With out
// nil it only counts (uetrace top).
func openRecorder(g *globals, out io.WriteSeeker, opts record.Options) (*record.Recorder, func(), error) {
	o, err := g.options()
	if err != nil {
		return nil, nil, err
	}
	return live.OpenRecorder(live.Where{Source: o.Backend, Socket: o.Socket, Tracefs: o.Tracefs}, out, opts)
}

func statusLine(rec *record.Recorder, w *lineWriter, start time.Time, done <-chan struct{}) {
	ticker(w, start, done, func() uint64 { return rec.Stats().Samples }, func(elapsed time.Duration, n uint64, rate float64) string {
		st := rec.Stats()
		return fmt.Sprintf("[ recording %s: %d events, %s/s, %s, lost %d ]", elapsed, n, siCount(rate), byteSize(st.Bytes), st.Lost)
	})
}

// ticker shows on w, every second until done, the line line makes of the
// time since start, count() and its rate since the last tick.
func ticker(w *lineWriter, start time.Time, done <-chan struct{}, count func() uint64, line func(elapsed time.Duration, n uint64, rate float64) string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last uint64
	lastT := start
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			n := count()
			rate := float64(n-last) / now.Sub(lastT).Seconds()
			last, lastT = n, now
			w.status(line(now.Sub(start).Truncate(time.Second), n, rate))
		}
	}
}

func printSummary(w io.Writer, st record.Stats, file string, elapsed time.Duration) {
	fmt.Fprintf(w, "[ uetrace record: %d samples of %d events in %s, %s written to %s ]\n",
		st.Samples, len(st.Events), elapsed.Round(time.Millisecond), byteSize(st.Bytes), file)
	width := 0
	for _, e := range st.Events {
		width = max(width, len(e.System)+1+len(e.Name))
	}
	for _, e := range st.Events {
		late := ""
		if e.Late {
			late = "  (registered during the recording)"
		}
		fmt.Fprintf(w, "  %-*s %10d%s\n", width, e.System+":"+e.Name, e.Samples, late)
	}
	if st.Lost > 0 {
		big := ""
		if st.TooLarge > 0 {
			big = fmt.Sprintf(", %d of them larger than perf's 8 KiB sample limit", st.TooLarge)
		}
		fmt.Fprintf(w, "warning: %d records were lost%s; try a larger --buffer-kb\n", st.Lost, big)
	}
	if st.Filtered > 0 {
		fmt.Fprintf(w, "  (%d samples of other tasks left out by --pid/--comm)\n", st.Filtered)
	}
	if st.Skipped > 0 {
		fmt.Fprintf(w, "warning: %d events that match were skipped: no tracefs path can name them (empty, '/', '.' or '..'), so their formats cannot be read\n", st.Skipped)
	}
	if st.Unknown > 0 {
		fmt.Fprintf(w, "warning: %d samples belong to events whose format could not be read (deleted first, or named so that no path reaches them); they cannot be decoded\n", st.Unknown)
	}
}

func siCount(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}

func byteSize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// lineWriter writes whole lines to a terminal that may show a status line,
// which is cleared before a line and redrawn after it.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	current string // the status line shown, "" when none
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != "" {
		io.WriteString(l.w, "\r\x1b[K")
	}
	io.WriteString(l.w, strings.TrimRight(s, "\n")+"\n")
	if l.current != "" {
		io.WriteString(l.w, l.current)
	}
}

func (l *lineWriter) status(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current = s
	io.WriteString(l.w, "\r\x1b[K"+s)
}

func (l *lineWriter) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != "" {
		io.WriteString(l.w, "\r\x1b[K")
		l.current = ""
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
