package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/realtime"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/userevents"
)

func newTopCmd(g *globals) *cobra.Command {
	var (
		ef         eventFilters
		delay      time.Duration
		duration   time.Duration
		iterations int
		by         string
		pids       []int
		comms      []string
		perf       bool
		rtPrio     int
	)
	cmd := &cobra.Command{
		Use:   "top [-e EVENT [--filter EXPR]]... [-d DELAY] [--by event|pid]",
		Short: "Watch events/s and lost records per event or per process, live",
		Long: `top counts the records of the events it selects, as "uetrace record" would
record them (perf events on every CPU on the kernel, a session on the daemon),
and shows every DELAY the events/s, the count and the lost records of each
event, or with --by pid (the p key) of each process, busiest first, under a
line with the totals. Nothing is written to disk. --filter EXPR after an -e
counts only that -e's records that pass the kernel's event filter, as for
"uetrace record".

On a kernel with user_events, top counts in the kernel when it may load a BPF
program (root, or CAP_BPF and CAP_PERFMON): a program counts each record
where it is written, per event and process, and top reads only the counts —
no record is copied out. --filter, --pid and --comm, which need the records,
and --perf use perf's rings instead, as does a kernel where BPF cannot be
loaded (top then says why).

On a terminal the view refreshes in place; q or Ctrl-C ends it and restores
the terminal. When stdout is not a terminal top prints a block of plain lines
every DELAY instead, for scripts:

  top <RFC 3339 time> interval=<s> events/s=<n> events=<n> lost=<n>
  event <system:name> events/s=<n> events=<n> lost=<n or ->
  pid <pid> comm=<quoted name> events/s=<n> events=<n>

and a blank line. It runs until SIGINT or SIGTERM, --duration or -n blocks.

Lost records: the kernel counts them per event (PERF_FORMAT_LOST, read every
half second; the records of tasks' names and lives, which a perf event of
its own reports as perf record's "dummy" event does, count in the header
alone); a daemon session counts them for all its events together, so
per event they show as "-" and the total is in the header. Neither says
which process's records were lost. Counting by BPF loses none; records its
map had no room for are counted as lost in the header.

-r N (--realtime N) runs top's threads at SCHED_FIFO priority N, as perf top -r
does, so that they read the rings as soon as records wait on a busy machine;
it needs root or CAP_SYS_NICE.`,
		Example: `  uetrace top
  uetrace top -e 'myapp_*' -d 500ms --by pid
  uetrace top -n 3 | grep ^event`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if delay <= 0 {
				return &userevents.Error{Op: "top --delay", Input: delay.String(), Errno: unix.EINVAL, Reason: "the delay between refreshes must be positive"}
			}
			if by != "event" && by != "pid" {
				return &userevents.Error{Op: "top --by", Input: by, Errno: unix.EINVAL, Reason: "rows are per event or per pid"}
			}
			if err := checkPIDs("top", pids); err != nil {
				return err
			}
			return runTop(cmd, g, topArgs{
				events: ef.events, filters: ef.filters, delay: delay, duration: duration, iterations: iterations,
				byPID: by == "pid", pids: pids, comms: comms, perf: perf, realtime: rtPrio,
			})
		},
	}
	f := cmd.Flags()
	ef.add(f, "event to watch: system:name or name, globs allowed (repeatable; default every user event)",
		"count only the records of the -e before it that pass this kernel event filter")
	f.DurationVarP(&delay, "delay", "d", time.Second, "time between refreshes")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: until q or interrupted)")
	f.IntVarP(&iterations, "iterations", "n", 0, "stop after this many refreshes (default: no limit)")
	f.StringVar(&by, "by", "event", "rows per event or per pid (the p key toggles)")
	f.IntSliceVar(&pids, "pid", nil, "count only these processes (comma-separated or repeated)")
	f.StringArrayVar(&comms, "comm", nil, "count only tasks with this name (repeatable)")
	f.BoolVar(&perf, "perf", false, "on the kernel, count through perf's rings even where a BPF program could count in the kernel")
	f.IntVarP(&rtPrio, "realtime", "r", 0, "run top's threads at this SCHED_FIFO priority (1-99), as perf top -r does")
	return cmd
}

type topArgs struct {
	perf       bool // perf's rings even where BPF could count
	realtime   int  // SCHED_FIFO priority; 0: the normal policy
	events     []string
	filters    []string
	delay      time.Duration
	duration   time.Duration
	iterations int
	byPID      bool
	pids       []int
	comms      []string
}

func runTop(cmd *cobra.Command, g *globals, a topArgs) error {
	if a.realtime != 0 {
		// Before the source's threads start: they inherit it.
		if err := realtime.Set(a.realtime); err != nil {
			return fmt.Errorf("top --realtime: %w", err)
		}
	}
	var notes topNotes
	rec, closeBackend, why, err := openTopSource(g, a, record.Options{
		Events:    a.events,
		Filters:   a.filters,
		PIDs:      a.pids,
		Comms:     a.comms,
		ByProcess: true,
		Notify:    notes.add,
	})
	if err != nil {
		return err
	}
	defer closeBackend()
	if why != "" {
		notes.add(why)
	}

	ctx, stop := interruptible(cmd)
	defer stop()
	if a.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.duration)
		defer cancel()
	}
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	runDone := make(chan error, 1)
	go func() { runDone <- rec.Run(ctx) }()

	out := cmd.OutOrStdout()
	var scr *topScreen
	if isTerminal(out) {
		scr, err = newTopScreen(out.(*os.File), cmd.InOrStdin())
		if err != nil {
			quit()
			<-runDone
			return err
		}
	}
	byPID := a.byPID
	var keys <-chan byte
	if scr != nil {
		keys = scr.keys
	}

	prev, prevT := rec.Stats(), time.Now()
	t := time.NewTicker(a.delay)
	defer t.Stop()
	n := 0
	var last topView
	show := func(now time.Time) {
		cur := rec.Stats()
		last = newTopView(prev, cur, now.Sub(prevT), rec.Source(), notes.last())
		last.at = now
		prev, prevT = cur, now
		if scr != nil {
			scr.draw(renderTop(last, byPID, scr.width(), scr.height()))
		} else {
			io.WriteString(out, strings.Join(renderPlain(last, byPID), "\n")+"\n\n")
		}
	}
	if scr != nil {
		show(time.Now()) // the frame, before the first interval has passed
	}
	var runErr error
	running := true
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-runDone:
			runErr, running = err, false
			break loop
		case k := <-keys:
			switch k {
			case 'q', 'Q':
				quit()
			case 'p', 'P':
				byPID = !byPID
				scr.draw(renderTop(last, byPID, scr.width(), scr.height()))
			}
		case now := <-t.C:
			show(now)
			n++
			if a.iterations > 0 && n >= a.iterations {
				quit()
			}
		}
	}
	quit()
	if running {
		runErr = <-runDone
	}
	if scr != nil {
		scr.restore()
	}
	return runErr
}

// topNotes keeps the recording's latest notice, to show.
type topNotes struct {
	mu   sync.Mutex
	text string
}

func (n *topNotes) add(s string) { n.mu.Lock(); n.text = s; n.mu.Unlock() }
func (n *topNotes) last() string { n.mu.Lock(); defer n.mu.Unlock(); return n.text }

// topView is one refresh: rates over the interval, counts since the start.
type topView struct {
	at       time.Time
	interval time.Duration
	source   string
	note     string
	rate     float64 // events/s, all events
	total    uint64
	lost     uint64
	lostRate float64
	// lostByEvent: the events' lost counts are known (kernel).
	lostByEvent bool
	events      []topRow
	procs       []topRow
}

// topRow is an event's or a process's counts.
type topRow struct {
	name  string // system:name, or the process's name
	pid   uint32
	rate  float64
	total uint64
	lost  uint64
}

// newTopView computes the rates between two snapshots dt apart.
func newTopView(prev, cur record.Stats, dt time.Duration, source, note string) topView {
	v := topView{
		interval: dt, source: source, note: note,
		total: cur.Samples, lost: cur.Lost, lostByEvent: cur.LostByEvent,
	}
	rate := func(now, before uint64) float64 {
		if dt <= 0 || now < before {
			return 0
		}
		return float64(now-before) / dt.Seconds()
	}
	v.rate = rate(cur.Samples, prev.Samples)
	v.lostRate = rate(cur.Lost, prev.Lost)
	before := map[string]uint64{}
	for _, e := range prev.Events {
		before[e.System+":"+e.Name] = e.Samples
	}
	for _, e := range cur.Events {
		name := e.System + ":" + e.Name
		v.events = append(v.events, topRow{name: name, rate: rate(e.Samples, before[name]), total: e.Samples, lost: e.Lost})
	}
	beforeP := map[uint32]uint64{}
	for _, p := range prev.Processes {
		beforeP[p.PID] = p.Samples
	}
	for _, p := range cur.Processes {
		v.procs = append(v.procs, topRow{name: p.Comm, pid: p.PID, rate: rate(p.Samples, beforeP[p.PID]), total: p.Samples})
	}
	busiest := func(a, b topRow) int {
		if c := cmp.Compare(b.rate, a.rate); c != 0 {
			return c
		}
		if c := cmp.Compare(b.total, a.total); c != 0 {
			return c
		}
		if c := cmp.Compare(a.name, b.name); c != 0 {
			return c
		}
		return cmp.Compare(a.pid, b.pid)
	}
	slices.SortFunc(v.events, busiest)
	slices.SortFunc(v.procs, busiest)
	return v
}

// renderTop lays a view out for a terminal of width × height: the totals,
// the column heads, then the busiest rows that fit.
func renderTop(v topView, byPID bool, width, height int) []string {
	lines := []string{
		fmt.Sprintf("uetrace top — %s, every %s: %s events/s, %d events, %d lost (%s/s)",
			v.source, fmtInterval(v.interval), fmtRate(v.rate), v.total, v.lost, fmtRate(v.lostRate)),
		"q quit  p per event/per process",
	}
	if v.note != "" {
		lines = append(lines, "note: "+v.note)
	}
	lines = append(lines, "")
	if byPID {
		lines = append(lines, fmt.Sprintf("%10s %12s %8s  %s", "EVENTS/S", "EVENTS", "PID", "COMM"))
		for _, r := range v.procs {
			lines = append(lines, fmt.Sprintf("%10s %12d %8d  %s", fmtRate(r.rate), r.total, r.pid, r.name))
		}
		if len(v.procs) == 0 {
			lines = append(lines, "(no records yet)")
		}
	} else {
		lines = append(lines, fmt.Sprintf("%10s %12s %10s  %s", "EVENTS/S", "EVENTS", "LOST", "EVENT"))
		for _, r := range v.events {
			lost := "-"
			if v.lostByEvent {
				lost = strconv.FormatUint(r.lost, 10)
			}
			lines = append(lines, fmt.Sprintf("%10s %12d %10s  %s", fmtRate(r.rate), r.total, lost, r.name))
		}
		if len(v.events) == 0 {
			lines = append(lines, "(no event selected yet)")
		}
	}
	if height > 0 && len(lines) > height {
		lines = lines[:height]
	}
	if width > 0 {
		for i, l := range lines {
			if r := []rune(l); len(r) > width {
				lines[i] = string(r[:width])
			}
		}
	}
	return lines
}

// renderPlain is a view as the lines of one block of plain output.
func renderPlain(v topView, byPID bool) []string {
	lines := []string{fmt.Sprintf("top %s interval=%.3f events/s=%.1f events=%d lost=%d",
		v.at.UTC().Format(time.RFC3339Nano), v.interval.Seconds(), v.rate, v.total, v.lost)}
	if v.note != "" {
		lines = append(lines, "note "+strconv.Quote(v.note))
	}
	for _, r := range v.events {
		lost := "-"
		if v.lostByEvent {
			lost = strconv.FormatUint(r.lost, 10)
		}
		lines = append(lines, fmt.Sprintf("event %s events/s=%.1f events=%d lost=%s", r.name, r.rate, r.total, lost))
	}
	if byPID {
		for _, r := range v.procs {
			lines = append(lines, fmt.Sprintf("pid %d comm=%s events/s=%.1f events=%d", r.pid, strconv.Quote(r.name), r.rate, r.total))
		}
	}
	return lines
}

func fmtRate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.1f", x)
}

func fmtInterval(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// topScreen is the terminal top draws on: the alternate screen, the
// cursor hidden, and the keyboard in non-canonical mode without echo so
// that a key counts at once. restore undoes all three.
type topScreen struct {
	out   *os.File
	in    *os.File // nil when stdin is not a terminal: no keys
	saved *unix.Termios
	keys  chan byte
	once  sync.Once
}

func newTopScreen(out *os.File, in io.Reader) (*topScreen, error) {
	s := &topScreen{out: out, keys: make(chan byte, 16)}
	if f, ok := in.(*os.File); ok {
		if t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			s.in, s.saved = f, t
			raw := *t
			// ISIG stays: Ctrl-C is SIGINT, which ends top as it ends
			// every command.
			raw.Lflag &^= unix.ICANON | unix.ECHO
			raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
			if err := unix.IoctlSetTermios(int(f.Fd()), unix.TCSETS, &raw); err != nil {
				return nil, fmt.Errorf("set the terminal's mode: %w", err)
			}
			go s.readKeys()
		}
	}
	io.WriteString(out, "\x1b[?1049h\x1b[?25l")
	return s, nil
}

// readKeys passes on the keys typed; it ends with the process.
func (s *topScreen) readKeys() {
	var b [16]byte
	for {
		n, err := s.in.Read(b[:])
		if err != nil {
			return
		}
		for _, c := range b[:n] {
			select {
			case s.keys <- c:
			default:
			}
		}
	}
}

func (s *topScreen) size() (int, int) {
	ws, err := unix.IoctlGetWinsize(int(s.out.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 80, 24
	}
	return int(ws.Col), int(ws.Row)
}

func (s *topScreen) width() int  { w, _ := s.size(); return w }
func (s *topScreen) height() int { _, h := s.size(); return h }

// draw replaces the screen's content with lines.
func (s *topScreen) draw(lines []string) {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
		b.WriteString("\x1b[K")
	}
	b.WriteString("\x1b[J")
	io.WriteString(s.out, b.String())
}

// restore gives the terminal back as it was.
func (s *topScreen) restore() {
	s.once.Do(func() {
		io.WriteString(s.out, "\x1b[?25h\x1b[?1049l")
		if s.saved != nil {
			unix.IoctlSetTermios(int(s.in.Fd()), unix.TCSETS, s.saved)
		}
	})
}
