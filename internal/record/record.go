// Package record collects trace event samples into a perf.data file, as
// `perf record -a -e EVENT` does: from the kernel's perf ring buffers
// (perf_event_open(PERF_TYPE_TRACEPOINT) on every online CPU) or from a
// uetrace daemon's perf-like session, with the same output either way. A
// daemon's session is read through its streams (source_stream.go): one per
// ring index of the daemon's, of finished perf.data records the recording
// writes to its file as they lie, a run at a time; from a daemon before
// streams, or one that refuses them, over its socket. The ring sets of
// producers whose only consumer the recording is are handed to it, and read
// here in place (source_handover.go).
//
// The file has one attribute per event, named in HEADER_EVENT_DESC, and the
// tracing data (HEADER_TRACING_DATA) with every recorded event's format
// file, so perf script and uetrace report decode the records — also of
// events deleted since. Records the kernel or daemon had to drop are
// written as PERF_RECORD_LOST and counted in Stats: never silent.
//
// perf's libtraceevent cannot parse a multi-format event's name
// ("name.<hexid>"), so the tracing data names those "name_<hexid>"; the
// attributes' names (HEADER_EVENT_DESC), which perf script prints, keep the
// true one.
//
// Events created after the recording starts are picked up when a pattern
// selects them: the daemon attaches them as they are created; on the
// kernel they are found by rescanning tracefs every FollowInterval, since
// perf cannot open a tracepoint that does not exist yet. Writers test
// their enable bit, which only becomes set once the event is attached, so
// they do not write records that the late attach misses.
//
// Task names: a task's first sample is preceded by a PERF_RECORD_COMM of
// its name read from /proc, with time 0, as perf record names the tasks
// that exist when it starts. Tasks that are gone by then are named as they
// come: on the kernel the first event has attr.comm and attr.task, so exec
// and prctl names and the threads made (PERF_RECORD_FORK, a new thread
// has its parent's name) are in the file as perf record writes them; on
// the daemon the session gives each writer's name before its first record
// (the process's name as the daemon read it when it connected).
//
// The file is written from a goroutine of its own, so that a slow disk
// does not stop the rings or the session from being drained.
// It writes in chunks of 1 MiB, with O_DIRECT where the file system takes
// it (writer.go).
//
// Options.PIDs and Comms keep only some tasks' samples, as perf record
// --pid and perf script --comm select them; the rest are left out as they
// are drained, and counted. A recording given no file only counts — per
// event, per process and, on the kernel, each event's lost samples — for
// uetrace top's live view. Options.Sink gives its samples, as they are
// drained, to a live consumer (export) as the perfdata.Sample that a
// perf.data file's session gives, with their perfdata.Event.
//
// It is not the reader of perf.data files (package perfdata) nor the
// decoder (package report).
package record

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/perfdata"
)

// FollowInterval is how often a kernel recording looks for new events.
const FollowInterval = 250 * time.Millisecond

// Options configure a recording.
type Options struct {
	// Events select what to record (see Pattern); empty: DefaultEvents.
	Events []string
	// BufferKB is the buffer size: per CPU ring on the kernel (rounded up
	// to a power-of-two number of pages; 0: 512 KiB), the session's buffer
	// on the daemon (0: 16 MiB), its streams. A producer's ring set handed
	// over to the recording is read where it lies instead: its records
	// wait in the producer's rings (UETRACE_RING_KB), which that ring
	// drops from, counted, when full.
	BufferKB int
	// NoFollow records only the events that exist at the start.
	NoFollow bool
	// Notify, when set, is told what the user should know as it happens:
	// events picked up late, patterns that select nothing yet, the first
	// records lost.
	Notify func(msg string)
	// Cmdline is stored in the file's header (HEADER_CMDLINE).
	Cmdline []string
	// PIDs and Comms, when set, keep only the samples of those processes
	// (perf's --pid: the process id, every thread of it) and of tasks with
	// those names (perf script's --comm: the thread's name as it was when
	// the sample was taken); given both, a sample must match both. The
	// kernel and the daemon still deliver every task's records: they are
	// left out here, and counted in Stats.Filtered.
	PIDs  []int
	Comms []string
	// ByProcess counts samples per process too (Stats.Processes): what
	// uetrace top shows.
	ByProcess bool
	// Filters[i], when set, is the kernel's event filter for the events
	// Events[i] selects, as perf record --filter after an -e: on the
	// kernel each perf event gets it (PERF_EVENT_IOC_SET_FILTER) before it
	// is enabled, on the daemon the session's filter for that event. An
	// event selected by several gets the first one's. A filter the kernel
	// refuses fails the recording with its errno (EINVAL mostly). On the
	// daemon the session is attached before the filter is set: records
	// written in between are not filtered.
	Filters []string
	// SessionSocket reads a daemon's session over its socket, a request
	// per batch of records, even where the daemon offers the session's
	// shared-memory ring: the path taken with daemons that predate rings.
	SessionSocket bool
	// NoHandOver keeps every record of a daemon session on the daemon's
	// path: no producer's ring set is taken to read here, even where the
	// recording is its only consumer (source_handover.go). For comparing
	// the two paths.
	NoHandOver bool
	// Sink, when set, is given every sample the recording keeps, as it is
	// drained and before it is written to the file (if there is one):
	// what uetrace export sends on. It is called on the goroutine that
	// runs Run; the Sample and its Raw are valid only during the call.
	// A sample has its ID, PID, TID, Time, CPU and Raw; its Event (its
	// Format nil when the format file does not parse, which Notify is
	// told); the names of its task (Comm) and of its process's main
	// thread (ProcessComm), as far as they are known; and with
	// ClockMonotonic its Wall time. Samples come as the rings or the
	// session are drained, not in time order.
	Sink func(s *perfdata.Sample)
	// ClockMonotonic times a kernel recording's samples by
	// CLOCK_MONOTONIC (perf's use_clockid, perf record -k CLOCK_MONOTONIC)
	// instead of perf's own clock, so that they can be turned into
	// wall-clock times; the file then says so in its attrs and holds the
	// clock data (HEADER_CLOCK_DATA) that perf record -k writes. A daemon's
	// samples are CLOCK_MONOTONIC always: with ClockMonotonic its file
	// says so too. The samples Sink is given then have their wall-clock
	// time, by the clocks' offset read when the recording is made.
	ClockMonotonic bool
	// SinkLatency is how late a daemon session's sample may reach Sink,
	// at most: 0, as soon as the daemon delivers it (a wake per delivery,
	// at most one per 100 µs); more, and while the session's streams
	// fill slowly the recording takes them every SinkLatency — at most
	// 10 ms (streamWaitMax) — on a timer instead: runs of samples, and no
	// goroutine blocked in futex(2), which keeps Go's sysmon polling (see
	// streamWait). For a Sink that batches anyway: the userevents
	// receiver.
	SinkLatency time.Duration
}

// Stats are a recording's counts so far. Safe to read while it runs.
type Stats struct {
	Samples uint64 // samples written
	Bytes   uint64 // bytes written to the file
	Lost    uint64 // records the kernel or daemon dropped (PERF_RECORD_LOST)
	// TooLarge counts records the daemon, or this recording reading a ring
	// set handed over, dropped for exceeding perf's 8 KiB raw sample
	// limit; they are also in Lost.
	TooLarge uint64
	// Unknown counts samples of events that were gone before their format
	// could be read (daemon only); they are in the file but cannot be
	// decoded.
	Unknown uint64
	// Filtered counts samples of tasks that Options.PIDs and Comms left
	// out.
	Filtered uint64
	// Skipped counts events the selection matched that could not be
	// recorded: their names no tracefs path can hold (eventdef.PathName).
	Skipped uint64
	Events  []EventStats
	// Processes are the samples per process, with Options.ByProcess.
	Processes []ProcessStats
	// HandOvers are the producers' ring sets a daemon handed to the
	// recording to read itself, HandedRecords the records read from them
	// (source_handover.go).
	HandOvers, HandedRecords uint64
	// LostByEvent says whether EventStats.Lost is known: on the kernel
	// each perf event counts the samples it could not write
	// (PERF_FORMAT_LOST); a daemon session counts its drops for all its
	// events together, in Lost only.
	LostByEvent bool
}

// EventStats are the counts of one recorded event.
type EventStats struct {
	System, Name string
	ID           int
	Samples      uint64
	// Lost is the samples of this event the kernel could not write to
	// the ring, when Stats.LostByEvent: read when the recording ends, and
	// every LostInterval while one without a file runs (a read per CPU
	// and event, which only a live view needs).
	Lost uint64
	Late bool // picked up after the recording started
}

// ProcessStats are the samples of one process.
type ProcessStats struct {
	PID     uint32
	Comm    string // the name of the task that wrote its latest sample
	Samples uint64
}

// LostInterval is how often a kernel recording without a file reads its
// events' lost counts for Stats.
const LostInterval = 500 * time.Millisecond

// event is one recorded event.
type event struct {
	system, name string
	id           int
	format       []byte
	attr         unix.PerfEventAttr
	ids          []uint64
	late         bool
	samples      atomic.Uint64
	lost         atomic.Uint64   // by PERF_FORMAT_LOST, kernel only
	fds          []int           // the perf events, kernel only
	filter       string          // its filter (Options.Filters), "" for none
	sink         *perfdata.Event // with Options.Sink
}

// filterFor is the filter of the first selection that picks the event and
// has one (Options.Filters).
func (r *Recorder) filterFor(system, name string) string {
	for i, p := range r.pats {
		if i < len(r.opts.Filters) && r.opts.Filters[i] != "" && p.Match(system, name) {
			return r.opts.Filters[i]
		}
	}
	return ""
}

// Recorder is one recording: the events it selects are attached when it is
// made (their enable bits set); Run collects until told to stop.
type Recorder struct {
	src    source
	w      *perfdata.Writer
	bw     *fileWriter // under w
	opts   Options
	pats   []Pattern
	follow bool

	mu     sync.Mutex // guards events for Stats
	events []*event
	known  map[string]bool // "system/name" already looked at
	byID   map[uint64]*event
	tasks  map[uint32]struct{} // tids whose name the file has

	lastTID  uint32
	filter   *taskFilter // nil: every task
	filtered atomic.Uint64
	pending  [][]byte       // samples waiting for their task's name (flushPending)
	procs    *processCounts // with ByProcess
	samples  atomic.Uint64
	bytes    atomic.Uint64 // the size of the file so far
	dropped  atomic.Uint64 // records lost
	unknown  atomic.Uint64
	skipped  atomic.Uint64 // events matched that no path can name
	// unresolved are type ids of daemon records resolveType could not
	// find an event for; guarded by mu.
	unresolved map[int]bool
	tooLarge   func() uint64
	wrote      bool // records since the last FINISHED_ROUND
	err        error

	// With Options.Sink: the names of the tasks, the sample it is given,
	// and with ClockMonotonic the wall clock's offset from CLOCK_MONOTONIC.
	sinking bool
	comms   perfdata.Threads
	smp     perfdata.Sample
	wallOff int64
}

// Kernel starts a recording of the kernel's events under the tracefs
// root (e.g. /sys/kernel/tracing) into w.
func Kernel(root string, w io.WriteSeeker, opts Options) (*Recorder, error) {
	if opts.BufferKB <= 0 {
		opts.BufferKB = 512
	}
	src, err := newKernelSource(root, opts.BufferKB)
	if err != nil {
		return nil, err
	}
	src.monotonic = opts.ClockMonotonic
	src.tracking = w != nil || opts.Sink != nil || opts.ByProcess || len(opts.Comms) > 0 || len(opts.PIDs) > 0
	src.tracker = w == nil
	r, err := newRecorder(src, w, opts)
	if err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		r.abandon()
		return nil, err
	}
	return r, nil
}

// Daemon starts a recording of a uetrace daemon's events into w, through
// a session on c. c is used by the recording until Run returns.
//
// With w nil (as with Kernel) nothing is written: the recording only
// counts, for Stats — what uetrace top does.
func Daemon(c *client.Conn, w io.WriteSeeker, opts Options) (*Recorder, error) {
	if opts.BufferKB <= 0 {
		opts.BufferKB = 16 << 10
	}
	src, err := newDaemonSource(c, opts.BufferKB, opts.SessionSocket)
	if err != nil {
		return nil, err
	}
	src.monotonic = opts.ClockMonotonic
	if src.streams != nil && opts.NoHandOver {
		src.streams.hand.off = true
	}
	r, err := newRecorder(src, w, opts)
	if err != nil {
		return nil, err
	}
	src.unknown = r.resolveType
	r.tooLarge = src.tooLarge
	if src.streams != nil && opts.Sink != nil {
		if opts.SinkLatency > 0 {
			src.streams.latency = opts.SinkLatency
			src.streams.hand.latency = opts.SinkLatency
		} else {
			// What the Sink shows, as soon as it is delivered.
			src.streams.watermark = 1
			src.streams.hand.first = true
		}
	}
	if err := src.attachPatterns(r.pats, r.follow); err != nil {
		r.abandon()
		return nil, err
	}
	if src.streams != nil {
		// The producers already there are handed over now, as soon as
		// the attach enabled their events — before the formats are read
		// (start: tens of milliseconds on a daemon just started) and
		// before the first round's end — rather than have the daemon's
		// drainers deliver their first records into the streams: a
		// producer enabled by the attach writes at once, and in issue
		// 31's zero-loss searches what it wrote meanwhile filled the
		// streams and its rings at rates the rest of the recording kept
		// whole. A filter that start sets takes the set back (subsys).
		src.askHandOvers()
	}
	if err := r.start(); err != nil {
		r.abandon()
		return nil, err
	}
	return r, nil
}

// abandon releases a recording that failed to start.
func (r *Recorder) abandon() {
	if r.bw != nil {
		r.bw.Close()
	}
	r.src.close()
}

func newRecorder(src source, w io.WriteSeeker, opts Options) (*Recorder, error) {
	r := &Recorder{
		src:    src,
		opts:   opts,
		follow: !opts.NoFollow,
		known:  make(map[string]bool),
		byID:   make(map[uint64]*event),
		tasks:  make(map[uint32]struct{}),
	}
	specs := opts.Events
	if len(specs) == 0 {
		specs = DefaultEvents
	}
	if len(opts.Filters) > len(opts.Events) {
		src.close()
		return nil, fmt.Errorf("record: %d filters for %d event selections: a filter belongs to an -e: %w", len(opts.Filters), len(opts.Events), unix.EINVAL)
	}
	for _, s := range specs {
		p, err := ParsePattern(s)
		if err != nil {
			src.close()
			return nil, err
		}
		r.pats = append(r.pats, p)
	}
	r.filter = newTaskFilter(opts.PIDs, opts.Comms)
	if opts.ByProcess {
		r.procs = newProcessCounts()
	}
	if opts.Sink != nil {
		r.sinking = true
		if opts.ClockMonotonic {
			var mono unix.Timespec
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
			r.wallOff = time.Now().UnixNano() - mono.Nano()
		}
	}
	if w == nil {
		return r, nil // counting only
	}
	r.bw = newFileWriter(w)
	pw, err := perfdata.NewWriter(r.bw)
	if err != nil {
		r.bw.Close()
		src.close()
		return nil, err
	}
	r.w = pw
	return r, nil
}

func (r *Recorder) notify(format string, args ...any) {
	if r.opts.Notify != nil {
		r.opts.Notify(fmt.Sprintf(format, args...))
	}
}

// start attaches what the patterns select now.
func (r *Recorder) start() error {
	if err := r.scan(false); err != nil {
		return err
	}
	if len(r.events) == 0 {
		if !r.follow {
			return fmt.Errorf("no event matches %s: %w", r.patternList(), unix.ENOENT)
		}
		r.notify("no event matches %s yet; recording them when they are registered", r.patternList())
	}
	return nil
}

// Run records until ctx is done, then stops the events, takes what is
// still buffered and completes the file. It returns the first error that
// stopped the recording; the file is completed even then.
func (r *Recorder) Run(ctx context.Context) error {
	var err error
	lastScan, lastLost := time.Now(), time.Now()
	for err == nil && ctx.Err() == nil {
		r.src.wait(100 * time.Millisecond)
		if err = r.src.drain(r); err != nil {
			break
		}
		r.flushPending()
		r.finishRound()
		if r.w == nil && time.Since(lastLost) >= LostInterval {
			r.readLost()
			lastLost = time.Now()
		}
		if r.follow && time.Since(lastScan) >= FollowInterval {
			// The daemon attaches new events itself, but their formats
			// are read here: before their first record if possible.
			err = r.scan(true)
			lastScan = time.Now()
		}
		if err == nil {
			err = r.err
		}
	}
	r.src.stop()
	if derr := r.src.drain(r); err == nil {
		err = derr
	}
	r.flushPending()
	r.readLost()
	r.finishRound()
	if cerr := r.finish(); err == nil {
		err = cerr
	}
	if cerr := r.src.close(); err == nil {
		err = cerr
	}
	return err
}

func (r *Recorder) patternList() string {
	var s []string
	for _, p := range r.pats {
		s = append(s, p.text)
	}
	return strings.Join(s, ", ")
}

// scan attaches the events the patterns select that are not recorded yet.
// It goes by available_events, the kernel's complete list: a directory
// listing of events/<system> stops at an event whose name no entry can
// have, and a producer may register one (" u32 a"). An event whose name
// no tracefs path can hold (eventdef.PathName) has no id or format to
// read: it is skipped and said so, once.
func (r *Recorder) scan(late bool) error {
	text, err := r.src.readFile("available_events")
	if err != nil {
		return fmt.Errorf("list events (available_events): %w", err)
	}
	tps := eventdef.ParseAvailableEvents(text)
	slices.SortFunc(tps, func(a, b eventdef.Tracepoint) int {
		return cmp.Or(strings.Compare(a.System, b.System), strings.Compare(a.Name, b.Name))
	})
	for _, tp := range tps {
		sys, name := tp.System, tp.Name
		key := sys + "/" + name
		if r.known[key] {
			continue
		}
		match := false
		for _, p := range r.pats {
			match = match || p.Match(sys, name)
		}
		if !match {
			continue
		}
		r.known[key] = true
		if !eventdef.PathName(name) {
			r.skipped.Add(1)
			r.notify("skipping %s:%q: no tracefs path can name it (empty, '/', '.' or '..'), so its format cannot be read; its records are not recorded", sys, name)
			continue
		}
		if err := r.add(sys, name, late); err != nil {
			if late || errors.Is(err, fs.ErrNotExist) {
				// A new event can go again before we open it; so can one
				// listed a moment ago.
				r.notify("could not record %s:%s: %v", sys, name, err)
				continue
			}
			return err
		}
	}
	return nil
}

// add reads an event's id and format and starts recording it.
func (r *Recorder) add(system, name string, late bool) error {
	dir := "events/" + system + "/" + name + "/"
	idText, err := r.src.readFile(dir + "id")
	if err != nil {
		return err
	}
	var id int
	if _, err := fmt.Sscanf(string(idText), "%d", &id); err != nil {
		return fmt.Errorf("%sid: %q: %w", dir, idText, unix.EINVAL)
	}
	format, err := r.src.readFile(dir + "format")
	if err != nil {
		return err
	}
	ev := &event{system: system, name: name, id: id, format: format, late: late, filter: r.filterFor(system, name)}
	if err := r.src.attach(ev); err != nil {
		return err
	}
	attr := perfdata.Attr{
		Name:         system + ":" + name,
		Type:         ev.attr.Type,
		Config:       ev.attr.Config,
		SamplePeriod: ev.attr.Sample,
		SampleType:   ev.attr.Sample_type,
		ReadFormat:   ev.attr.Read_format,
		Flags:        ev.attr.Bits,
		Wakeup:       ev.attr.Wakeup,
		ClockID:      ev.attr.Clockid,
		IDs:          ev.ids,
	}
	// The attr goes in now: the records that follow need it to be written
	// (a recording that only counts has no file).
	if r.w != nil {
		if _, err := r.w.AddAttr(attr); err != nil {
			return err
		}
	}
	if r.sinking {
		pe, err := perfdata.NewEvent(system, name, format)
		if err != nil {
			// Its samples go on undecoded.
			r.notify("%v", err)
			pe, _ = perfdata.NewEvent(system, name, nil)
		}
		pe.Attr, pe.Index = attr, len(r.events)
		ev.sink = pe
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	for _, sid := range ev.ids {
		r.byID[sid] = ev
	}
	r.mu.Unlock()
	if late {
		r.notify("recording %s:%s, registered after the recording started", system, name)
	}
	return nil
}

// resolveType finds the event of a daemon record's type id that the
// session was attached to after the start.
//
// A type id looked for in vain is not looked for again: an event no path
// can name (scan skips it) would otherwise cost a scan per record its
// producer writes. The set is bounded, forgotten when full.
func (r *Recorder) resolveType(typeID int) *event {
	r.mu.Lock()
	tried := r.unresolved[typeID]
	r.mu.Unlock()
	if !tried {
		if err := r.scan(true); err != nil {
			r.notify("looking for new events: %v", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.id == typeID {
			return ev
		}
	}
	// Gone before we could read its format, or unnamable: count it,
	// never hide it.
	if r.unresolved == nil || len(r.unresolved) >= maxUnresolved {
		r.unresolved = make(map[int]bool)
	}
	r.unresolved[typeID] = true
	r.unknown.Add(1)
	return nil
}

// maxUnresolved bounds the type ids resolveType remembers it could not
// resolve.
const maxUnresolved = 4096

// record writes a perf record from a kernel ring, keeping the counts.
func (r *Recorder) record(rec []byte) {
	if r.err != nil {
		return
	}
	switch ne.Uint32(rec) {
	case perfdata.RecordSample:
		// Laid out by SampleType: identifier, pid/tid, time, cpu, raw.
		if len(rec) >= 40 {
			pid, tid := ne.Uint32(rec[16:]), ne.Uint32(rec[20:])
			if !r.wantedRecord(rec, pid, tid) {
				return
			}
			r.seen(ne.Uint64(rec[8:]), pid, tid)
			r.sinkRecord(rec)
		}
	case perfdata.RecordLost:
		if len(rec) >= 24 {
			r.countLost(ne.Uint64(rec[16:]))
		}
	case perfdata.RecordComm:
		if len(rec) >= 16 {
			tid := ne.Uint32(rec[12:])
			r.tasks[tid] = struct{}{}
			r.renamed(ne.Uint32(rec[8:]), tid, commName(rec))
		}
	case perfdata.RecordFork:
		// pid, ppid, tid, ptid, time.
		if len(rec) >= 24 && r.filter != nil {
			r.filter.fork(ne.Uint32(rec[16:]), ne.Uint32(rec[20:]))
		}
	}
	if r.w != nil {
		r.check(r.w.WriteRecord(rec))
	}
}

// sample writes a sample of the daemon source.
func (r *Recorder) sample(s *perfdata.Sample) {
	if r.err != nil {
		return
	}
	if len(r.byID) == 0 {
		// No attr yet to lay it out by: an event gone before its format
		// was read, already counted in Unknown.
		return
	}
	if !r.wanted(s.PID, s.TID) {
		return
	}
	r.seen(s.ID, s.PID, s.TID)
	if r.sinking {
		r.sinkSample(s.ID, s.PID, s.TID, s.CPU, s.Time, s.Raw)
	}
	if r.w != nil {
		r.check(r.w.WriteSample(s))
	}
}

// lost writes that n records were dropped, with the trailer at if known.
func (r *Recorder) lost(id, n uint64, at *perfdata.Sample) {
	if r.err != nil {
		return
	}
	r.countLost(n)
	if r.w != nil {
		r.check(r.w.WriteLost(id, n, at))
	}
}

// comm writes a task's name, from the daemon source.
func (r *Recorder) comm(pid, tid uint32, name string, trailer *perfdata.Sample) {
	if r.err != nil {
		return
	}
	r.tasks[tid] = struct{}{}
	r.renamed(pid, tid, name)
	if r.w != nil {
		r.check(r.w.WriteComm(pid, tid, name, trailer))
	}
}

// seen counts a sample of sample id id by task tid of process pid, and
// names the task in the file before its first sample, as perf record
// names the tasks that exist when it starts.
func (r *Recorder) seen(id uint64, pid, tid uint32) {
	if ev := r.byID[id]; ev != nil {
		ev.samples.Add(1)
	}
	r.samples.Add(1)
	if r.procs != nil {
		r.procs.add(pid, tid)
	}
	if tid == r.lastTID {
		return
	}
	r.lastTID = tid
	if _, ok := r.tasks[tid]; ok {
		return
	}
	r.tasks[tid] = struct{}{}
	comm, ok := taskComm(int32(pid), int32(tid))
	if !ok {
		return // gone: perf shows such tasks as ":<tid>"
	}
	if r.sinking {
		r.comms.SetComm(tid, comm)
	}
	if r.procs != nil {
		r.procs.rename(pid, tid, comm)
	}
	if r.w == nil {
		return
	}
	// Time 0, as perf gives the names it synthesizes at the start: the
	// name holds from the beginning, also for this task's samples on other
	// CPUs that are earlier than this one but come later in the file.
	r.check(r.w.WriteComm(pid, tid, comm, &perfdata.Sample{PID: pid, TID: tid, ID: id}))
}

// sinkRecord gives Options.Sink a sample of a kernel ring, laid out by
// SampleType: identifier, pid/tid, time, cpu/res, raw size and data.
func (r *Recorder) sinkRecord(rec []byte) {
	if !r.sinking || len(rec) < 44 {
		return
	}
	n := int(ne.Uint32(rec[40:]))
	if 44+n > len(rec) {
		return
	}
	r.sinkSample(ne.Uint64(rec[8:]), ne.Uint32(rec[16:]), ne.Uint32(rec[20:]), ne.Uint32(rec[32:]), ne.Uint64(rec[24:]), rec[44:44+n])
}

// sinkSample gives Options.Sink a sample of sample id id.
func (r *Recorder) sinkSample(id uint64, pid, tid, cpu uint32, time uint64, raw []byte) {
	ev := r.byID[id]
	if ev == nil || ev.sink == nil {
		return
	}
	r.smp = perfdata.Sample{Event: ev.sink, ID: id, PID: pid, TID: tid, CPU: cpu, Time: time, Raw: raw}
	if r.opts.ClockMonotonic {
		r.smp.Wall = uint64(int64(time) + r.wallOff)
	}
	r.smp.Comm, _ = r.comms.Comm(tid)
	r.smp.ProcessComm, _ = r.comms.Comm(pid)
	if r.smp.ProcessComm == "" && pid != tid {
		if comm, ok := taskComm(int32(pid), int32(pid)); ok {
			r.comms.SetComm(pid, comm)
			r.smp.ProcessComm = comm
		}
	}
	r.opts.Sink(&r.smp)
}

func (r *Recorder) countLost(n uint64) {
	if r.dropped.Add(n) == n {
		r.notify("lost %d records: the buffer was full (a bigger buffer, fewer events or a faster disk may help)", n)
	}
}

// check keeps the first write error, and the file's size for Stats.
func (r *Recorder) check(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
	if r.w != nil {
		r.bytes.Store(uint64(r.w.Size()))
	}
	r.wrote = true
}

// finishRound marks that every ring has been read up to here, which lets
// readers sort by time within bounded memory (PERF_RECORD_FINISHED_ROUND).
func (r *Recorder) finishRound() {
	if !r.wrote || r.err != nil || r.w == nil {
		return
	}
	if rd, ok := r.src.(interface{ roundDone() bool }); ok && !rd.roundDone() {
		return // not every record of the round is in yet (source_stream.go)
	}
	r.wrote = false
	if err := r.w.WriteFinishedRound(); err != nil {
		r.err = err
	}
}

// finish writes the tracing data (every recorded event's format) and the
// host's facts, and completes the file.
func (r *Recorder) finish() error {
	if r.w == nil {
		return r.err
	}
	err := r.finishFile()
	if cerr := r.bw.Close(); err == nil {
		err = cerr
	}
	return err
}

// finishFile writes the end of the file.
func (r *Recorder) finishFile() error {
	if r.err != nil {
		r.w.Close()
		return r.err
	}
	// Only this goroutine adds events: no lock needed to read them.
	td := &perfdata.TracingData{
		HeaderPage:  []byte(perfdata.HeaderPage),
		HeaderEvent: []byte(perfdata.HeaderEvent),
	}
	if hp, err := r.src.readFile("events/header_page"); err == nil && len(hp) > 0 {
		td.HeaderPage = hp
	}
	if he, err := r.src.readFile("events/header_event"); err == nil && len(he) > 0 {
		td.HeaderEvent = he
	}
	for _, ev := range r.events {
		i := slices.IndexFunc(td.Systems, func(s perfdata.TracingSystem) bool { return s.Name == ev.system })
		if i < 0 {
			td.Systems = append(td.Systems, perfdata.TracingSystem{Name: ev.system})
			i = len(td.Systems) - 1
		}
		td.Systems[i].Formats = append(td.Systems[i].Formats, perfSafeFormat(ev.format))
	}
	r.w.SetTracingData(td)
	r.w.SetMeta(perfdata.HostMeta(r.opts.Cmdline))
	if r.opts.ClockMonotonic {
		// As perf record -k writes it: a reading of the clock and of the
		// wall clock, one after the other.
		var mono unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
		wall := time.Now()
		r.w.SetClockData(&perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNS: uint64(wall.UnixNano()), ClockNS: uint64(mono.Nano())})
	}
	return r.w.Close()
}

// Source names where the records come from: "kernel" (perf events) or
// "daemon" (a session).
func (r *Recorder) Source() string {
	if _, ok := r.src.(*kernelSource); ok {
		return "kernel"
	}
	return "daemon"
}

// SharedMemory reports whether a daemon recording takes its session's
// records from shared memory (the session's streams) rather than over
// the socket, and if not, why not (nil when it was not asked
// to, or on the kernel).
func (r *Recorder) SharedMemory() (bool, error) {
	d, ok := r.src.(*daemonSource)
	if !ok {
		return false, nil
	}
	return d.streams != nil, d.ringErr
}

// Stats returns the counts so far.
func (r *Recorder) Stats() Stats {
	st := Stats{
		Samples:  r.samples.Load(),
		Bytes:    r.bytes.Load(),
		Lost:     r.dropped.Load(),
		Unknown:  r.unknown.Load(),
		Filtered: r.filtered.Load(),
		Skipped:  r.skipped.Load(),
	}
	_, st.LostByEvent = r.src.(*kernelSource)
	if r.tooLarge != nil {
		st.TooLarge = r.tooLarge()
	}
	if d, ok := r.src.(*daemonSource); ok && d.streams != nil {
		st.HandOvers, st.HandedRecords = d.streams.hand.taken.Load(), d.streams.hand.records.Load()
	}
	r.mu.Lock()
	for _, ev := range r.events {
		st.Events = append(st.Events, EventStats{
			System: ev.system, Name: ev.name, ID: ev.id, Samples: ev.samples.Load(),
			Lost: ev.lost.Load(), Late: ev.late,
		})
	}
	r.mu.Unlock()
	if r.procs != nil {
		st.Processes = r.procs.snapshot()
	}
	return st
}

// perfSafeFormat is the format text as the tracing data carries it. The
// libtraceevent built into Debian's perf 6.1 cannot read an event name
// with a '.' — every multi-format event's, "name.<hexid>" — and perf script
// then fails on the whole file. Such a name becomes "name_<hexid>" in this
// copy only; perf and report show the true name, from HEADER_EVENT_DESC.
func perfSafeFormat(format []byte) []byte {
	line, rest, ok := bytes.Cut(format, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte("name: ")) || !bytes.Contains(line, []byte(".")) {
		return format
	}
	out := bytes.ReplaceAll(line, []byte("."), []byte("_"))
	out = append(out, '\n')
	return append(out, rest...)
}
