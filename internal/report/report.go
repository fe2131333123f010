// Package report decodes the tracepoint samples of a perf.data file — made
// by uetrace record or by perf record — and writes them as text like perf
// script, as JSON lines, or as a Perfetto trace.
//
// The file is read through a perfdata.Session, as perf script reads it
// through perf's session: samples in time order (the file read in rounds,
// PERF_RECORD_FINISHED_ROUND, and at the end of a round every sample older
// than the previous round's newest written), each with its event — decoded
// by the format files in the file's tracing data, so the events need not
// exist any more — and its task's name as the file's PERF_RECORD_COMM and
// FORK records had it then. What report does is print them.
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
// from their own metadata (perfdata.Event.EventHeader): a tracepoint whose
// format holds only the EventHeader header and whose name is
// "<provider>_L<n>K<hex>…" shows
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

// item is a sample as the formatters take it.
type item struct {
	time     uint64
	cpu      uint32
	pid, tid int32
	ev       *event
	heads    *heads // the task's
	data     []byte // the raw record
}

// reporter is one report being written.
type reporter struct {
	format Format
	filter *Filter    // nil: every sample
	wall   *wallClock // nil: perf clock times only
	lines  *lines     // text and JSON
	pf     *perfetto.Writer
	pfOut  *bufio.Writer

	events []*event // by perfdata.Event.Index
	width  int      // of the text's name column
	// unknown stands for samples of no known event.
	unknown *event

	heads [64]headSlot // the latest tasks' heads, by tid % 64
	// described are the threads given to Perfetto, by tid; descr caches
	// the latest, by tid % 64.
	described map[int32]bool
	descr     [64]descrSlot
	args      []perfetto.Arg
	sum       Summary

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
var ErrNoClockData = errors.New("the file has no clock data (HEADER_CLOCK_DATA) to turn its times into wall-clock times: record with uetrace record -k CLOCK_MONOTONIC (or perf record -k CLOCK_MONOTONIC)")

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
	rp := &reporter{wall: wall, format: format, described: make(map[int32]bool)}
	if len(f.PIDs) > 0 || len(f.Comms) > 0 {
		rp.filter = &f
	}
	so := perfdata.SessionOptions{Retain: format != Perfetto}
	if format == Perfetto {
		so.Comm = rp.renamed
	}
	sess, err := perfdata.NewSession(r, &so)
	if err != nil {
		return rp.sum, err
	}
	rp.unknown = newUnknownEvent()
	// perf script right-aligns the names in the width of the longest.
	rp.width = len(rp.unknown.full)
	for _, pe := range sess.Events() {
		rp.width = max(rp.width, len(pe.String()))
	}
	rp.unknown.textName = append(appendPadLeft(nil, rp.unknown.full, rp.width), ':')
	if format == Perfetto {
		rp.pfOut = bufio.NewWriterSize(w, 256<<10)
		rp.pf = perfetto.NewWriter(rp.pfOut)
	} else {
		rp.lines = newLines(w, format, wall)
	}
	err = rp.samples(sess)
	rp.sum.Lost = sess.Stats().Lost
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

// samples writes the samples of the session, in time order.
func (rp *reporter) samples(sess *perfdata.Session) error {
	for {
		s, err := sess.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := rp.sample(s); err != nil {
			return err
		}
	}
}

// event returns the report's event of a session's event: made when first
// needed, a pipe-mode stream's late ones as wide in the name column as the
// others or their own.
func (rp *reporter) event(pe *perfdata.Event) *event {
	if pe == nil {
		return rp.unknown
	}
	if pe.Index < len(rp.events) && rp.events[pe.Index] != nil {
		return rp.events[pe.Index]
	}
	if pe.Index >= len(rp.events) {
		rp.events = append(rp.events, make([]*event, pe.Index+1-len(rp.events))...)
	}
	ev := newEvent(pe)
	ev.textName = append(appendPadLeft(nil, ev.full, rp.width), ':')
	rp.events[pe.Index] = ev
	return ev
}

// sample writes a sample, or counts it filtered out.
func (rp *reporter) sample(s *perfdata.Sample) error {
	if rp.filter != nil && !rp.filter.keep(int32(s.PID), s.Comm) {
		rp.sum.Filtered++
		return nil
	}
	ev := rp.event(s.Event)
	if ev.format == nil {
		rp.sum.Undecoded++
	}
	rp.sum.Samples++
	if rp.format == Perfetto {
		it := item{time: s.Time, cpu: s.CPU, pid: int32(s.PID), tid: int32(s.TID), ev: ev, data: s.Raw}
		return rp.instant(&it, s.Comm, s.ProcessComm)
	}
	// Made where it is queued: copies of it cost a good part of a line.
	it, err := rp.lines.next()
	if err != nil {
		return err
	}
	it.time, it.cpu, it.pid, it.tid = s.Time, s.CPU, int32(s.PID), int32(s.TID)
	it.ev, it.data = ev, s.Raw
	it.heads = rp.headsFor(it.pid, it.tid, s.Comm)
	return rp.lines.filled()
}

// headsFor returns the heads of a sample of task tid, named comm, of
// process pid: those of the task's latest sample when they are the same.
// Heads are never changed once made, so lines already handed to a
// formatter keep the name they had.
func (rp *reporter) headsFor(pid, tid int32, comm string) *heads {
	// Most samples come from a few busy threads: a small direct-mapped
	// cache saves making heads again.
	slot := &rp.heads[uint32(tid)%uint32(len(rp.heads))]
	if slot.h != nil && slot.tid == tid && slot.pid == pid && sameString(slot.comm, comm) {
		return slot.h
	}
	*slot = headSlot{pid: pid, tid: tid, comm: comm, h: newHeads(pid, tid, comm)}
	return slot.h
}

// sameString is a == b, without comparing the bytes when they are the
// same string: a task's name is, from one sample to the next.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// renamed is told when the session names a thread: a thread already
// given to Perfetto is described again.
func (rp *reporter) renamed(pid, tid uint32, comm string) error {
	if rp.described[int32(tid)] {
		return rp.pf.Thread(int32(pid), int32(tid), comm)
	}
	return nil
}

// instant writes a sample to Perfetto, its thread (named comm, of a
// process named process) described at its first.
func (rp *reporter) instant(it *item, comm, process string) error {
	if slot := &rp.descr[uint32(it.tid)%uint32(len(rp.descr))]; !slot.ok || slot.tid != it.tid {
		if !rp.described[it.tid] {
			rp.described[it.tid] = true
			if process != "" {
				if err := rp.pf.Process(it.pid, process); err != nil {
					return err
				}
			}
			if err := rp.pf.Thread(it.pid, it.tid, comm); err != nil {
				return err
			}
		}
		*slot = descrSlot{tid: it.tid, ok: true}
	}
	ev := it.ev
	if ev.eh {
		if e, ok := ev.pe.EventHeader(it.data); ok {
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
