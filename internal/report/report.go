// Package report decodes the tracepoint samples of a perf.data file — made
// by uetrace record or by perf record — and writes them as text like perf
// script, as JSON lines, or as a Perfetto trace.
//
// Records are decoded by the format files in the file's tracing data, so
// the events need not exist any more. Samples are put in time order the way
// perf does it: the file is read in rounds (PERF_RECORD_FINISHED_ROUND),
// and at the end of a round every buffered sample older than the previous
// round's newest is sorted and written. Task names come from the file's
// PERF_RECORD_COMM records, applied in time order.
//
// It does not evaluate a tracepoint's print fmt as perf script does: the
// text shows every field as name=value by its type, which for user events
// is exactly what their print fmt prints — integers of 1 and 2 bytes
// zero-extended whatever their sign, as perf script and the kernel's trace
// text show them (s16 0xfffe is 65534), but structs and the data of
// __data_loc and __rel_loc arrays other than text in hex, where perf
// script prints the number its print fmt makes of them.
//
// JSON lines show a tracepoint's fields as Microsoft's perf-decode
// (LinuxTracepoints' libtracepoint-decode-cpp) does: integers as numbers,
// signed by the format's signed: flag — so a __rel_loc u32[], which Linux
// marks signed:1, holds signed numbers — those of 1 and 2 bytes
// zero-extended (as its ReadAsU8/ReadAsU16 do); arrays of integers (fixed,
// __data_loc, __rel_loc) as JSON arrays; char text as strings; structs as
// their bytes in hex, "01 02 03"; pointers and types it does not know as
// "0x…" strings. Where report knowingly differs from perf-decode: text
// is read as UTF-8, invalid bytes becoming U+FFFD (perf-decode shows each
// byte as the Latin-1 character of its value, so UTF-8 "naïve" is
// "naÃ¯ve"); a field whose data lies outside its record is null
// (perf-decode: null for an integer, "" or [] for the others); and each
// sample is a JSON line with time, cpu, pid, tid, comm, system and name
// and the fields under "fields", not perf-decode's one document per file
// with "n" and "meta".
//
// EventHeader events (package eventheader: the format of Microsoft's
// LinuxTracepoints and OpenTelemetry's user_events exporters) are decoded
// from their own metadata: a tracepoint whose format holds only the
// EventHeader header and whose name is "<provider>_L<n>K<hex>…" shows
// "Provider:Event" and its fields, formatted as Microsoft's decoder
// formats them (hex, errno, IP, UUID, time, booleans, strings with invalid
// UTF-8 shown as the Latin-1 characters of its bytes, nested structs and
// arrays); JSON lines add "event" and the metadata "meta" (level, keyword,
// opcode, id, version, tag, activity ids); Perfetto names the event
// "Provider:Event", with the fields as annotations by path ("s.x",
// "a[2]") and the metadata as "meta.level" and so on. A record that does
// not decode is shown by its format.
//
// In a Perfetto trace, an EventHeader ActivityStart (opcode 1) begins a
// slice and an ActivityStop (opcode 2) ends it; other opcodes are
// instants. The stop's annotations, named "stop.status", "stop.meta.…",
// are added to the slice's (and "stop.event" names the stop when its name
// is not the start's). Events with an activity id pair by it, from any
// thread: each open activity has an async track of its own in its
// process's group, named "Provider:Event" — Perfetto shows tracks of one
// name as one, overlapping slices in rows — and a track is used again
// once its activity has ended, so there are as many tracks per name as
// activities ever overlapped. A start of an id already open nests on its
// track. Events without an activity id pair on their thread's track,
// nested as Perfetto requires: a stop ends the innermost slice open on
// its thread, whatever its name. A stop with nothing to end (no open
// activity with its id; without one, no open slice on its thread, those of
// activities not counting) is written as an instant and counted in
// Summary.UnmatchedStops; a start never stopped is a slice left open,
// which Perfetto shows as not ended (dur -1), counted in
// Summary.OpenStarts. Text and JSON show every event as a line.
//
// Files are read through package perfdata, so pipe-mode streams (perf
// record -o -) report as files do; an attr such a stream adds after its
// start becomes an event when it comes. With Options.Wall the times are
// also shown as wall-clock times, by the file's clock data.
//
// Text and JSON lines are formatted on every CPU the process may use
// (GOMAXPROCS), in batches, and written in order; the output is the same
// on one CPU or many. A Perfetto trace is written on one goroutine: its
// interning is a sequence.
package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/report/perfetto"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefmt"
)

// Format is an output format.
type Format int

const (
	Text     Format = iota // perf script's lines
	JSON                   // one JSON object per line
	Perfetto               // a perfetto.protos.Trace
)

var formatNames = [...]string{Text: "text", JSON: "json", Perfetto: "perfetto"}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat parses "text", "json" or "perfetto".
func ParseFormat(s string) (Format, error) {
	for f, n := range formatNames {
		if n == s {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("report format %q: want text, json or perfetto: %w", s, unix.EINVAL)
}

// Summary counts what a report saw.
type Summary struct {
	Samples uint64 // samples written
	Lost    uint64 // records lost while recording (PERF_RECORD_LOST)
	// Undecoded counts samples written without fields: their event has no
	// format in the file, or their id matches no event.
	Undecoded uint64
	// Filtered counts samples of other tasks than the Filter's.
	Filtered uint64
	// In a Perfetto trace, UnmatchedStops counts EventHeader ActivityStop
	// events with no open ActivityStart to end (none with their activity
	// id, or without one none on their thread): each is written as an
	// instant instead. OpenStarts counts ActivityStart slices never
	// ended: they are left open, and Perfetto shows them as not ended.
	UnmatchedStops, OpenStarts uint64
}

// Filter keeps some tasks' samples, as perf script's --pid and --comm do:
// those of processes PIDs (the process id, so every thread of it) and of
// tasks named one of Comms (the thread's name when the sample was taken);
// given both, a sample must match both. The zero Filter keeps every sample.
type Filter struct {
	PIDs  []int
	Comms []string
}

func (f *Filter) keep(pid int32, comm string) bool {
	if len(f.PIDs) > 0 && !slices.Contains(f.PIDs, int(pid)) {
		return false
	}
	return len(f.Comms) == 0 || slices.Contains(f.Comms, comm)
}

// item is a buffered sample or task name, waiting for its turn.
type item struct {
	time     uint64
	cpu      uint32 // a sample's CPU; a fork's parent thread (ptid)
	pid, tid int32
	kind     itemKind
	ev       *event // a sample's event
	heads    *heads // the task's, set when the sample is emitted
	seq      uint64 // order in the file: ties in time keep it
	data     []byte // a sample's raw data, a COMM's name
}

// itemKind says what an item is.
type itemKind uint8

const (
	sampleItem itemKind = iota
	commItem            // a task's name: data
	forkItem            // a new thread, tid, made by thread cpu (its ptid)
)

// reporter is one report being written.
type reporter struct {
	format Format
	filter *Filter    // nil: every sample
	wall   *wallClock // nil: perf clock times only
	lines  *lines     // text and JSON
	pf     *perfetto.Writer
	pfOut  *bufio.Writer

	byID    map[uint64]*event
	formats map[uint64]*tracefmt.Format // of the tracing data, by tracefs id
	nattrs  int                         // attrs made events of
	width   int                         // of the text's name column
	only    *event                      // the event of a file with one attr and no ids
	// unknown stands for samples of no known event.
	unknown *event

	mapped  bool   // records alias the file's mapping until it is closed
	seq     uint64 // items pushed so far
	runs    []int  // where the ordered runs of a round end (flush)
	next    []int  // the next item of each run (flush)
	queue   []item
	arena   []byte
	limit   uint64            // end of the previous round: what may be written
	maxTS   uint64            // newest time seen so far
	threads map[int32]*thread // by tid
	recent  [64]*thread       // threads by tid % 64, a cache of threads
	args    []perfetto.Arg
	sum     Summary

	// EventHeader samples in Perfetto: scratch and names (eventheader.go).
	ehText  []byte
	ehStrs  []ehStr
	ehPath  []byte
	ehStack []int
	ehNames map[string]string
	// Open slices of ActivityStart events: by activity id, and by thread
	// (threadKey) for those without one.
	ehActs    map[[16]byte]*ehActivity
	ehThreads map[uint64][]string
	ehPools   map[ehPoolKey][]perfetto.Track // free async tracks
	ehFree    []*ehActivity                  // ended, for reuse
}

// Write reads every record of r and writes its samples to w in format.
func Write(w io.Writer, r *perfdata.Reader, format Format) (Summary, error) {
	return WriteFilter(w, r, format, Filter{})
}

// WriteFilter is Write of the samples f keeps.
func WriteFilter(w io.Writer, r *perfdata.Reader, format Format, f Filter) (Summary, error) {
	return WriteOptions(w, r, Options{Format: format, Filter: f})
}

// Options are what WriteOptions writes.
type Options struct {
	Format Format
	Filter Filter
	// Wall adds wall-clock times, by the file's clock data (perf record
	// -k CLOCK_MONOTONIC writes it; perfdata.Reader.ClockData): text
	// shows them before the time column as perf script's tod field does
	// ("2006-01-02 15:04:05.000000" in Location), JSON lines add
	// "wall_ns" (ns since 1970) after "time", and a Perfetto trace is
	// timed in wall-clock ns. A file without clock data is an error.
	Wall bool
	// Location is the time zone of the text's wall-clock times; nil is
	// time.Local, as perf uses.
	Location *time.Location
}

// ErrNoClockData is wrapped by the error of a report asked for wall-clock
// times of a file that has no clock data.
var ErrNoClockData = errors.New("the file has no clock data (HEADER_CLOCK_DATA) to turn its times into wall-clock times: record with perf record -k CLOCK_MONOTONIC")

// WriteOptions writes the samples of r to w as o says.
func WriteOptions(w io.Writer, r *perfdata.Reader, o Options) (Summary, error) {
	format, f := o.Format, o.Filter
	var wall *wallClock
	if o.Wall {
		c, ok := r.ClockData()
		if !ok {
			return Summary{}, fmt.Errorf("%w: %w", ErrNoClockData, unix.EINVAL)
		}
		wall = &wallClock{clock: c, loc: o.Location}
		if wall.loc == nil {
			wall.loc = time.Local
		}
	}
	rp := &reporter{
		wall:    wall,
		format:  format,
		byID:    make(map[uint64]*event),
		threads: make(map[int32]*thread),
		mapped:  r.Mapped(),
	}
	if len(f.PIDs) > 0 || len(f.Comms) > 0 {
		rp.filter = &f
	}
	if err := rp.events(r); err != nil {
		return rp.sum, err
	}
	if format == Perfetto {
		rp.pfOut = bufio.NewWriterSize(w, 256<<10)
		rp.pf = perfetto.NewWriter(rp.pfOut)
	} else {
		rp.lines = newLines(w, format, wall)
	}
	err := rp.records(r)
	if rp.lines != nil {
		if cerr := rp.lines.close(); err == nil {
			err = cerr
		}
		return rp.sum, err
	}
	rp.sum.OpenStarts = uint64(rp.pf.OpenSlices())
	if err == nil {
		err = rp.pf.Flush()
	}
	if err == nil {
		err = rp.pfOut.Flush()
	}
	return rp.sum, err
}

// records reads and handles every record of r.
func (rp *reporter) records(r *perfdata.Reader) error {
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if rec.Type == perfdata.RecordHeaderAttr {
			if attrs := r.Attrs(); len(attrs) > rp.nattrs {
				for _, ev := range rp.newEvents(attrs) {
					ev.textName = append(appendPadLeft(nil, ev.full, rp.width), ':')
				}
			}
		}
		if err := rp.record(&rec); err != nil {
			return err
		}
	}
	return rp.flush(^uint64(0))
}

// events makes an event of every attr, with the format its config names.
func (rp *reporter) events(r *perfdata.Reader) error {
	formats := make(map[uint64]*tracefmt.Format)
	if td := r.TracingData(); td != nil {
		for _, sys := range td.Systems {
			for _, text := range sys.Formats {
				f, err := tracefmt.Parse(text)
				if err != nil {
					return fmt.Errorf("tracing data of %s: %w", sys.Name, err)
				}
				f.System = sys.Name
				formats[uint64(f.ID)] = f
			}
		}
	}
	rp.formats = formats
	rp.unknown = newUnknownEvent()
	events := append([]*event{rp.unknown}, rp.newEvents(r.Attrs())...)
	// perf script right-aligns the names in the width of the longest.
	for _, ev := range events {
		rp.width = max(rp.width, len(ev.full))
	}
	for _, ev := range events {
		ev.textName = append(appendPadLeft(nil, ev.full, rp.width), ':')
	}
	return nil
}

// newEvents makes the events of the attrs not seen yet: at the start, and
// when a pipe-mode stream adds one later (its name column is then as wide
// as the others' or its own).
func (rp *reporter) newEvents(attrs []perfdata.Attr) []*event {
	var events []*event
	for i := rp.nattrs; i < len(attrs); i++ {
		a := &attrs[i]
		var format *tracefmt.Format
		if a.Type == unix.PERF_TYPE_TRACEPOINT {
			format = rp.formats[a.Config]
		}
		// The attr's name (HEADER_EVENT_DESC) is the event's true name:
		// uetrace record's tracing data writes a multi-format event's
		// "name.<hexid>" as "name_<hexid>", which perf can parse.
		var system, name string
		switch {
		case a.Name != "":
			system, name = splitName(a.Name)
		case format != nil:
			system, name = format.System, format.Name
		default:
			system, name = fmt.Sprintf("type%d", a.Type), fmt.Sprintf("config%d", a.Config)
		}
		ev := newEvent(system, name, format)
		events = append(events, ev)
		for _, id := range a.IDs {
			rp.byID[id] = ev
		}
	}
	rp.only = nil
	if len(attrs) == 1 && len(events) == 1 {
		rp.only = events[0]
	}
	rp.nattrs = len(attrs)
	return events
}

func splitName(full string) (system, name string) {
	for i := 0; i < len(full); i++ {
		if full[i] == ':' {
			return full[:i], full[i+1:]
		}
	}
	return "", full
}

func (rp *reporter) record(rec *perfdata.Record) error {
	switch rec.Type {
	case perfdata.RecordSample:
		s := &rec.Sample
		ev := rp.byID[s.ID]
		if ev == nil {
			ev = rp.only
		}
		if ev == nil {
			ev = rp.unknown
		}
		rp.push(item{time: s.Time, cpu: s.CPU, pid: int32(s.PID), tid: int32(s.TID), ev: ev}, s.Raw)
	case perfdata.RecordComm:
		rp.push(item{time: rec.Sample.Time, pid: int32(rec.PID), tid: int32(rec.TID), kind: commItem}, rec.Comm)
	case perfdata.RecordFork:
		rp.push(item{time: rec.Time, pid: int32(rec.PID), tid: int32(rec.TID), cpu: rec.PTID, kind: forkItem}, nil)
	case perfdata.RecordLost:
		rp.sum.Lost += rec.Lost
	case perfdata.RecordFinishedRound:
		limit := rp.limit
		rp.limit = rp.maxTS
		return rp.flush(limit)
	}
	return nil
}

// push buffers an item. Its data is the file's own when the file is mapped
// (valid until Close); otherwise it is copied into the arena, whose old
// arrays stay alive as long as an item points into them.
func (rp *reporter) push(it item, data []byte) {
	if !rp.mapped {
		start := len(rp.arena)
		rp.arena = append(rp.arena, data...)
		data = rp.arena[start:len(rp.arena):len(rp.arena)]
	}
	it.data = data
	rp.seq++
	it.seq = rp.seq
	rp.maxTS = max(rp.maxTS, it.time)
	rp.queue = append(rp.queue, it)
}

// flush writes the buffered items up to time limit, in time order (stable:
// a task's name comes before its samples of the same time).
//
// A round is a few runs already in order, one per CPU ring read, so the
// items are not sorted: each step writes the oldest of the runs' first
// items, and what is left of each run stays queued, still in order.
func (rp *reporter) flush(limit uint64) error {
	q := rp.queue
	rp.runs = rp.runs[:0]
	for i := 1; i < len(q); i++ {
		if byTime(q[i-1], q[i]) > 0 {
			rp.runs = append(rp.runs, i)
		}
	}
	if len(rp.runs) > 16 {
		// Too many runs to pick from: one run.
		slices.SortFunc(q, byTime)
		rp.runs = rp.runs[:0]
	}
	rp.runs = append(rp.runs, len(q))
	// next[r] is the first item of run r not yet written; run r ends at
	// rp.runs[r].
	next := slices.Grow(rp.next[:0], len(rp.runs))
	start := 0
	for _, end := range rp.runs {
		next = append(next, start)
		start = end
	}
	rp.next = next
	written := 0
	switch len(next) {
	case 1: // in order already
		n, err := rp.emitRun(q, limit)
		if err != nil {
			return err
		}
		next[0], written = n, n
	case 2: // the usual round: two CPUs' rings
		mid := rp.runs[0]
		i, j, err := rp.emitTwo(q[:mid], q[mid:], limit)
		if err != nil {
			return err
		}
		next[0], next[1], written = i, mid+j, i+j
	}
	for len(next) > 2 {
		best := -1
		for r, i := range next {
			if i < rp.runs[r] && (best < 0 || byTime(q[i], q[next[best]]) < 0) {
				best = r
			}
		}
		if best < 0 || q[next[best]].time > limit {
			break
		}
		if err := rp.emit(&q[next[best]]); err != nil {
			return err
		}
		next[best]++
		written++
	}
	if written == len(q) && rp.lines == nil {
		// Nothing points into the arena any more.
		rp.queue, rp.arena = q[:0], rp.arena[:0]
		return nil
	}
	// The rest, and lines not yet formatted, keep their data; new items
	// go to a new arena.
	n := 0
	for r, i := range next {
		n += copy(q[n:], q[i:rp.runs[r]])
	}
	clear(q[n:])
	rp.queue = q[:n]
	if !rp.mapped && written > 0 {
		rp.arena = make([]byte, 0, cap(rp.arena))
	}
	return nil
}

// emitRun writes the items of run up to time limit; it returns how many.
func (rp *reporter) emitRun(run []item, limit uint64) (int, error) {
	for i := range run {
		if run[i].time > limit {
			return i, nil
		}
		if err := rp.emit(&run[i]); err != nil {
			return i, err
		}
	}
	return len(run), nil
}

// emitTwo merges runs a and b as it writes their items up to time limit;
// it returns how many it took of each.
func (rp *reporter) emitTwo(a, b []item, limit uint64) (i, j int, err error) {
	for i < len(a) && j < len(b) {
		from := &i
		it := &a[i]
		if byTime(b[j], a[i]) < 0 {
			from, it = &j, &b[j]
		}
		if it.time > limit {
			return i, j, nil
		}
		if err := rp.emit(it); err != nil {
			return i, j, err
		}
		*from++
	}
	n, err := rp.emitRun(a[i:], limit)
	i += n
	if err != nil {
		return i, j, err
	}
	n, err = rp.emitRun(b[j:], limit)
	return i, j + n, err
}

// byTime orders items by time, then by their order in the file.
func byTime(a, b item) int {
	switch {
	case a.time < b.time:
		return -1
	case a.time > b.time:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

func (rp *reporter) emit(it *item) error {
	t := rp.thread(it.tid)
	switch it.kind {
	case commItem:
		return rp.rename(it, t, string(it.data))
	case forkItem:
		// A new thread has its parent's name (perf's thread__fork).
		if p := rp.threads[int32(it.cpu)]; p != nil && p.comm != "" {
			return rp.rename(it, t, p.comm)
		}
		return nil
	}
	if rp.filter != nil && !rp.filter.keep(it.pid, t.comm) {
		rp.sum.Filtered++
		return nil
	}
	if it.ev.format == nil {
		rp.sum.Undecoded++
	}
	rp.sum.Samples++
	if rp.format == Perfetto {
		return rp.instant(it, t)
	}
	it.heads = t.headsFor(it.pid, it.tid)
	return rp.lines.add(it)
}

// rename gives thread t of item it its name comm.
func (rp *reporter) rename(it *item, t *thread, comm string) error {
	t.comm = comm
	t.heads = nil
	if t.described {
		return rp.pf.Thread(it.pid, it.tid, t.comm)
	}
	return nil
}

// thread returns what is known of task tid.
func (rp *reporter) thread(tid int32) *thread {
	// Most samples come from a few busy threads: a small direct-mapped
	// cache in front of the map saves most lookups.
	slot := &rp.recent[uint32(tid)%uint32(len(rp.recent))]
	if t := *slot; t != nil && t.tid == tid {
		return t
	}
	t := rp.threads[tid]
	if t == nil {
		t = &thread{tid: tid}
		rp.threads[tid] = t
	}
	*slot = t
	return t
}

func (rp *reporter) instant(it *item, t *thread) error {
	if !t.described {
		t.described = true
		if p := rp.threads[it.pid]; p != nil && p.comm != "" {
			if err := rp.pf.Process(it.pid, p.comm); err != nil {
				return err
			}
		}
		if err := rp.pf.Thread(it.pid, it.tid, t.comm); err != nil {
			return err
		}
	}
	ev := it.ev
	if ev.ehOff >= 0 {
		if e, ok := decodeEH(it); ok {
			return rp.ehEvent(it, &e, rp.ts(it))
		}
	}
	rp.args = rp.args[:0]
	for i := range ev.fields {
		p := &ev.fields[i]
		name := p.f.Name
		data, ok := p.data(it.data)
		switch {
		case !ok:
			rp.args = append(rp.args, perfetto.String(name, "<OVERFLOW>"))
		case p.op == opInt:
			rp.args = append(rp.args, perfetto.Int(name, tracefmt.Value{Field: p.f, Data: data}.Int()))
		case p.op == opUint:
			rp.args = append(rp.args, perfetto.Uint(name, tracefmt.Value{Field: p.f, Data: data}.Uint()))
		case p.op == opText:
			rp.args = append(rp.args, perfetto.String(name, view(tracefmt.Value{Field: p.f, Data: data}.Text())))
		default:
			rp.args = append(rp.args, perfetto.Bytes(name, data))
		}
	}
	return rp.pf.Instant(rp.ts(it), it.pid, it.tid, ev.system, ev.name, rp.args)
}

// ts is the Perfetto timestamp of a sample: its time, or with Wall its
// wall-clock time.
func (rp *reporter) ts(it *item) uint64 {
	if rp.wall != nil {
		return uint64(rp.wall.clock.Wall(it.time))
	}
	return it.time
}

// view is b as a string without a copy; the perfetto Writer does not keep
// the strings it is given.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
