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
// is exactly what their print fmt prints.
package report

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/perfetto"
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
}

// item is a buffered sample or task name, waiting for its turn.
type item struct {
	time     uint64
	cpu      uint32
	pid, tid int32
	comm     bool   // a task's name, not a sample
	ev       *Event // nil for a COMM, and for a sample of no known event
	seq      uint64 // order in the file: ties in time keep it
	data     []byte // raw data (or the name)
}

// reporter is one report being written.
type reporter struct {
	format Format
	out    *bufio.Writer
	pf     *perfetto.Writer

	byID      map[uint64]*Event
	only      *Event // the event of a file with one attr and no ids
	nameWidth int

	mapped bool   // records alias the file's mapping until it is closed
	seq    uint64 // items pushed so far
	runs   []int  // where the ordered runs of a round end (order)
	tmp    []item // order's other buffer
	queue  []item
	arena  []byte
	limit  uint64 // end of the previous round: what may be written
	maxTS  uint64 // newest time seen so far
	comms  map[int32]string
	seen   map[int32]bool // threads described to Perfetto
	line   []byte
	vals   []tracefmt.Value
	args   []perfetto.Arg
	sum    Summary
}

// Write reads every record of r and writes its samples to w in format.
func Write(w io.Writer, r *perfdata.Reader, format Format) (Summary, error) {
	rp := &reporter{
		format: format,
		out:    bufio.NewWriterSize(w, 256<<10),
		byID:   make(map[uint64]*Event),
		comms:  make(map[int32]string),
		seen:   make(map[int32]bool),
		mapped: r.Mapped(),
	}
	if format == Perfetto {
		rp.pf = perfetto.NewWriter(rp.out)
	}
	if err := rp.events(r); err != nil {
		return rp.sum, err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rp.sum, err
		}
		if err := rp.record(&rec); err != nil {
			return rp.sum, err
		}
	}
	if err := rp.flush(^uint64(0)); err != nil {
		return rp.sum, err
	}
	if rp.pf != nil {
		if err := rp.pf.Flush(); err != nil {
			return rp.sum, err
		}
	}
	return rp.sum, rp.out.Flush()
}

// events makes an Event of every attr, with the format its config names.
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
	attrs := r.Attrs()
	for i := range attrs {
		a := &attrs[i]
		ev := &Event{full: a.Name}
		if a.Type == unix.PERF_TYPE_TRACEPOINT {
			ev.Format = formats[a.Config]
		}
		// The attr's name (HEADER_EVENT_DESC) is the event's true name:
		// uetrace record's tracing data writes a multi-format event's
		// "name.<hexid>" as "name_<hexid>", which perf can parse.
		if ev.full != "" {
			ev.System, ev.Name = splitName(ev.full)
		} else if ev.Format != nil {
			ev.System, ev.Name = ev.Format.System, ev.Format.Name
			ev.full = ev.System + ":" + ev.Name
		} else {
			ev.full = fmt.Sprintf("type%d:config%d", a.Type, a.Config)
		}
		if ev.System == "" {
			ev.System, ev.Name = splitName(ev.full)
		}
		ev.jsonHead = append(appendJSONString([]byte(`,"system":`), ev.System), `,"name":`...)
		ev.jsonHead = append(appendJSONString(ev.jsonHead, ev.Name), `,"fields":{`...)
		if ev.Format != nil {
			for i := range ev.Format.Fields {
				ev.jsonKeys = append(ev.jsonKeys, append(appendJSONString(nil, ev.Format.Fields[i].Name), ':'))
			}
		}
		rp.nameWidth = max(rp.nameWidth, len(ev.full))
		for _, id := range a.IDs {
			rp.byID[id] = ev
		}
		if len(attrs) == 1 {
			rp.only = ev
		}
	}
	return nil
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
		rp.push(item{time: s.Time, cpu: s.CPU, pid: int32(s.PID), tid: int32(s.TID), ev: ev}, s.Raw)
	case perfdata.RecordComm:
		rp.push(item{time: rec.Sample.Time, pid: int32(rec.PID), tid: int32(rec.TID), comm: true}, rec.Comm)
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
func (rp *reporter) flush(limit uint64) error {
	q := rp.queue
	rp.order(q)
	n := 0
	for n < len(q) && q[n].time <= limit {
		if err := rp.emit(&q[n]); err != nil {
			return err
		}
		n++
	}
	if n == len(q) {
		// Nothing points into the arena any more.
		rp.queue, rp.arena = q[:0], rp.arena[:0]
		return nil
	}
	// The rest keep their data; new items go to a new arena.
	rp.queue = append(q[:0], q[n:]...)
	clear(q[len(rp.queue):])
	if !rp.mapped {
		rp.arena = make([]byte, 0, cap(rp.arena))
	}
	return nil
}

// order sorts q by byTime. A round is a few runs already in order, one
// per CPU ring read: those are merged, in O(n log runs).
func (rp *reporter) order(q []item) {
	rp.runs = rp.runs[:0]
	for i := 1; i < len(q); i++ {
		if byTime(q[i-1], q[i]) > 0 {
			rp.runs = append(rp.runs, i)
		}
	}
	if len(rp.runs) == 0 {
		return
	}
	if len(rp.runs) > 16 {
		slices.SortFunc(q, byTime)
		return
	}
	rp.runs = append(rp.runs, len(q))
	src, dst := q, slices.Grow(rp.tmp[:0], len(q))[:len(q)]
	for len(rp.runs) > 1 {
		start, next := 0, rp.runs[:0]
		for i := 0; i < len(rp.runs); i += 2 {
			if i+1 == len(rp.runs) {
				copy(dst[start:], src[start:rp.runs[i]])
				next = append(next, rp.runs[i])
				break
			}
			mid, end := rp.runs[i], rp.runs[i+1]
			merge(dst[start:end], src[start:mid], src[mid:end])
			next = append(next, end)
			start = end
		}
		rp.runs = next
		src, dst = dst, src
	}
	if &src[0] != &q[0] {
		copy(q, src)
		rp.tmp = src[:0]
	} else {
		rp.tmp = dst[:0]
	}
	clear(rp.tmp[:cap(rp.tmp)]) // no stale data references
}

// merge merges the ordered a and b into dst.
func merge(dst, a, b []item) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if byTime(b[j], a[i]) < 0 {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
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
	data := it.data
	if it.comm {
		rp.comms[it.tid] = string(data)
		if rp.pf != nil && rp.seen[it.tid] {
			return rp.pf.Thread(it.pid, it.tid, string(data))
		}
		return nil
	}
	s := Sample{Time: it.time, CPU: it.cpu, PID: it.pid, TID: it.tid, Comm: rp.comms[it.tid], Event: it.ev, Raw: data}
	rp.vals = rp.vals[:0]
	if it.ev != nil && it.ev.Format != nil {
		rp.vals = it.ev.Format.Decode(rp.vals, data)
	} else {
		rp.sum.Undecoded++
	}
	rp.sum.Samples++
	if rp.format == Perfetto {
		return rp.instant(&s)
	}
	// Build the line in the output buffer itself when it has room: one
	// copy less (bufio.Writer.AvailableBuffer).
	line := rp.out.AvailableBuffer()
	scratch := cap(line) < 4096
	if scratch {
		line = rp.line[:0]
	}
	if rp.format == Text {
		line = appendText(line, &s, rp.nameWidth, rp.vals)
	} else {
		line = appendJSON(line, &s, rp.vals)
	}
	if scratch {
		rp.line = line[:0]
	}
	_, err := rp.out.Write(line)
	return err
}

func (rp *reporter) instant(s *Sample) error {
	if !rp.seen[s.TID] {
		rp.seen[s.TID] = true
		if name, ok := rp.comms[s.PID]; ok {
			if err := rp.pf.Process(s.PID, name); err != nil {
				return err
			}
		}
		if err := rp.pf.Thread(s.PID, s.TID, s.Comm); err != nil {
			return err
		}
	}
	rp.args = rp.args[:0]
	for i := range rp.vals {
		v := &rp.vals[i]
		name := v.Field.Name
		switch {
		case v.Overflow:
			rp.args = append(rp.args, perfetto.String(name, "<OVERFLOW>"))
		case v.Field.Kind == tracefmt.Int && v.Field.Signed:
			rp.args = append(rp.args, perfetto.Int(name, v.Int()))
		case v.Field.Kind == tracefmt.Int:
			rp.args = append(rp.args, perfetto.Uint(name, v.Uint()))
		case v.Field.Kind == tracefmt.String:
			rp.args = append(rp.args, perfetto.String(name, view(v.Text())))
		default:
			rp.args = append(rp.args, perfetto.Bytes(name, v.Data))
		}
	}
	sys, name := "", "[unknown]" // as the text names it
	if s.Event != nil {
		sys, name = s.Event.System, s.Event.Name
	}
	return rp.pf.Instant(s.Time, s.PID, s.TID, sys, name, rp.args)
}

// view is b as a string without a copy; the perfetto Writer does not keep
// the strings it is given.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
