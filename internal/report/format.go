package report

import (
	"encoding/binary"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefmt"
)

// event is one recorded event of a file, with what printing its samples
// needs encoded once.
type event struct {
	pe           *perfdata.Event // nil for samples of no known event
	system, name string
	full         string // "system:name"
	// format decodes the event's records; nil when the file's tracing data
	// lacks it (the fields are then not shown).
	format *tracefmt.Format
	fields []fieldPlan
	// jsonHead is `,"system":…,"name":…,"fields":{`.
	jsonHead []byte
	// textName is the name right-aligned in the file's name column and a
	// colon, as perf script's "%*s:".
	textName []byte
	eh       bool // an EventHeader tracepoint: pe decodes its records
}

// fieldPlan is how one field of an event is printed.
type fieldPlan struct {
	f *tracefmt.Field
	// jsonKey is `"name":`, after a comma for all but the first field.
	jsonKey []byte
	// textKey is ` name=`.
	textKey []byte
	op      fieldOp
	json    jsonField // how JSON shows it (planJSON)
	inline  bool      // data at [off, end) of the record
	off     int
	end     int
}

// data is the field's data in raw (tracefmt.Field.Data), inline fields
// taken here: the call costs more than the slicing.
func (p *fieldPlan) data(raw []byte) ([]byte, bool) {
	if p.inline && p.end <= len(raw) {
		return raw[p.off:p.end], true
	}
	return p.f.Data(raw)
}

// fieldOp is a field's decoding, chosen once per event rather than per
// record.
type fieldOp uint8

const (
	opUint  fieldOp = iota // unsigned integer of 1, 2, 4 or 8 bytes
	opInt                  // signed integer of 1, 2, 4 or 8 bytes
	opText                 // text up to its first NUL
	opBytes                // anything else, printed as hex
)

// newEvent makes the report's event of a session's.
func newEvent(pe *perfdata.Event) *event {
	system, name, format := pe.System, pe.Name, pe.Format
	ev := &event{pe: pe, system: system, name: name, full: pe.String(), format: format, eh: pe.IsEventHeader()}
	ev.jsonHead = append(appendJSONString([]byte(`,"system":`), system), `,"name":`...)
	ev.jsonHead = append(appendJSONString(ev.jsonHead, name), `,"fields":{`...)
	if format == nil {
		return ev
	}
	for i := range format.Fields {
		f := &format.Fields[i]
		p := fieldPlan{f: f, textKey: []byte(" " + f.Name + "="),
			inline: f.Loc == tracefmt.Inline, off: f.Offset, end: f.Offset + f.Size}
		if i > 0 {
			p.jsonKey = []byte{','}
		}
		p.jsonKey = append(appendJSONString(p.jsonKey, f.Name), ':')
		switch {
		case f.Kind == tracefmt.Int && f.Signed:
			p.op = opInt
		case f.Kind == tracefmt.Int:
			p.op = opUint
		case f.Kind == tracefmt.String:
			p.op = opText
		default:
			p.op = opBytes
		}
		p.json = planJSON(f)
		ev.fields = append(ev.fields, p)
	}
	return ev
}

var ne = binary.NativeEndian

// newUnknownEvent returns the event of samples whose id matches no attr:
// perf script names them "[unknown]"; in JSON their system and name are
// empty.
func newUnknownEvent() *event {
	return &event{name: "[unknown]", full: "[unknown]", jsonHead: []byte(`,"system":"","name":"","fields":{`)}
}

// headSlot holds the heads of a task's latest sample.
type headSlot struct {
	pid, tid int32
	comm     string
	h        *heads
}

// descrSlot says that thread tid was given to Perfetto.
type descrSlot struct {
	tid int32
	ok  bool
}

// heads are a task's parts of a line, encoded once: they change only when
// its name does.
type heads struct {
	json []byte // `,"pid":P,"tid":T,"comm":"…"`
	text []byte // perf script's "%16s %7d/%-7d [" of comm, pid and tid
}

// newHeads makes the heads of task tid, named comm ("" if not known), of
// process pid.
func newHeads(pid, tid int32, comm string) *heads {
	h := new(heads)
	b := append(appendInt([]byte(`,"pid":`), int64(pid)), `,"tid":`...)
	b = append(appendInt(b, int64(tid)), `,"comm":`...)
	h.json = appendJSONString(b, comm)

	if comm == "" {
		comm = ":" + string(appendInt(nil, int64(tid))) // perf's name of an unnamed task
	}
	b = appendPadLeft(nil, comm, 16)
	b = appendPadLeft(append(b, ' '), string(appendInt(nil, int64(pid))), 7)
	b = append(b, '/')
	n := len(b)
	b = appendInt(b, int64(tid))
	for len(b)-n < 7 {
		b = append(b, ' ')
	}
	h.text = append(b, " ["...)
	return h
}

// appendText appends the sample as perf script prints a tracepoint sample
// with -F comm,pid,tid,cpu,time,event,trace (tools/perf/builtin-script.c:
// "%16s %7d/%-7d [%03d] %12s: %*s: "), then the fields as name=value —
// what the print fmt of a user event shows; for other tracepoints perf
// evaluates their print fmt, uetrace prints every field by its type.
func appendText(b []byte, it *item) []byte { return appendTextWall(b, it, nil) }

// appendTextWall is appendText with, when wc is not nil, the wall-clock
// time before the time column, as perf script's tod field.
func appendTextWall(b []byte, it *item, wc *wallClock) []byte {
	ev := it.ev
	b = append(b, it.heads.text...)
	if it.cpu < 1000 {
		b = appendZeroPad(b, uint64(it.cpu), 3)
	} else {
		b = appendUint(b, uint64(it.cpu))
	}
	b = append(b, "] "...)
	if wc != nil {
		b = append(wc.appendTOD(b, it.time), ' ')
	}
	// The time is seconds.microseconds in a 12-byte column.
	var ts [32]byte
	tb := appendUint(ts[:0], it.time/1e9)
	tb = appendZeroPad(append(tb, '.'), it.time%1e9/1e3, 6)
	for i := len(tb); i < 12; i++ {
		b = append(b, ' ')
	}
	b = append(b, tb...)
	b = append(b, ": "...)
	b = append(b, ev.textName...)
	if ev.eh {
		if e, ok := ev.pe.EventHeader(it.data); ok {
			return append(appendEHText(b, &e), '\n')
		}
	}
	for i := range ev.fields {
		p := &ev.fields[i]
		b = append(b, p.textKey...)
		data, ok := p.data(it.data)
		switch {
		case !ok:
			b = append(b, "<OVERFLOW>"...)
		case p.op == opInt && len(data) >= 4:
			b = appendInt(b, tracefmt.Value{Field: p.f, Data: data}.Int())
		case p.op == opInt || p.op == opUint:
			// 1- and 2-byte integers print zero-extended whatever
			// their sign, as perf script (libtraceevent reads them
			// unsigned), perf-decode and the kernel's own trace text
			// (print_fields) show them: s16 0xfffe is 65534.
			b = appendUint(b, tracefmt.Value{Field: p.f, Data: data}.Uint())
		case p.op == opText:
			b = append(b, tracefmt.Value{Field: p.f, Data: data}.Text()...)
		default:
			b = appendHex(b, data)
		}
	}
	return append(b, '\n')
}

// wallClock turns sample times into wall-clock times by the file's clock
// data.
type wallClock struct {
	clock perfdata.ClockData
	loc   *time.Location
}

// appendTOD appends the wall-clock time of sample time t as perf script's
// tod field prints it: "2006-01-02 15:04:05.000000" in the local time zone
// (tod_scnprintf), truncated to µs.
func (wc *wallClock) appendTOD(b []byte, t uint64) []byte {
	return time.Unix(0, wc.clock.Wall(t)).In(wc.loc).AppendFormat(b, "2006-01-02 15:04:05.000000")
}

// appendPadLeft appends s right-aligned in w bytes, as printf's %*s does
// (perf script's columns count bytes, not runes).
func appendPadLeft(b []byte, s string, w int) []byte {
	for i := len(s); i < w; i++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

const hexDigits = "0123456789abcdef"

func appendHex(b, data []byte) []byte {
	for _, c := range data {
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b
}

// appendJSON appends the sample as one JSON object and a newline:
//
//	{"time":N,"cpu":N,"pid":N,"tid":N,"comm":"…","system":"…","name":"…","fields":{…}}
//
// time is the perf clock in ns. Fields are shown as Microsoft's
// perf-decode shows them (planJSON, appendJSONField): integers as JSON
// numbers (exact: 64-bit values are not rounded through floats), signed by
// the format's signed: flag, those of 1 and 2 bytes zero-extended; arrays
// of integers — fixed, __data_loc, __rel_loc — as JSON arrays; char text
// as strings; structs as their bytes in hex, "01 02 …"; pointers and
// unknown types as "0x…". A field whose data lies outside the record is
// null.
func appendJSON(b []byte, it *item, times *timeDigits) []byte {
	return appendJSONWall(b, it, times, nil)
}

// appendJSONWall is appendJSON with, when wc is not nil, "wall_ns": the
// wall-clock time in ns since 1970, after "time".
func appendJSONWall(b []byte, it *item, times *timeDigits, wc *wallClock) []byte {
	ev := it.ev
	b = append(b, `{"time":`...)
	b = times.append(b, it.time)
	if wc != nil {
		b = append(b, `,"wall_ns":`...)
		b = appendInt(b, wc.clock.Wall(it.time))
	}
	b = append(b, `,"cpu":`...)
	b = appendUint(b, uint64(it.cpu))
	b = append(b, it.heads.json...)
	b = append(b, ev.jsonHead...)
	if ev.eh {
		if e, ok := ev.pe.EventHeader(it.data); ok {
			b = appendEHJSON(b, &e)
			return append(appendEHMeta(append(b, '}'), &e), "}\n"...)
		}
	}
	for i := range ev.fields {
		p := &ev.fields[i]
		b = append(b, p.jsonKey...)
		if data, ok := p.data(it.data); ok {
			b = appendJSONField(b, p.json, data)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	// Read-only view of s: appendJSONBytes does not keep or change it.
	return appendJSONBytes(b, unsafe.Slice(unsafe.StringData(s), len(s)), false)
}

// appendJSONBytes appends text from a record as a JSON string, up to its
// first NUL when toNUL: invalid UTF-8 becomes U+FFFD, as encoding/json
// does.
func appendJSONBytes(b, s []byte, toNUL bool) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		// Copy the run of bytes that need no escaping in one append.
		if j := i + plainPrefix(s[i:]); j > i {
			b = append(b, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0 && toNUL {
				break
			}
			b = appendJSONEscape(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// plainPrefix is the length of s's prefix that a JSON string holds as it
// is (jsonPlain), found eight bytes at a time while it can be.
func plainPrefix(s []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := ne.Uint64(s[i:])
		// A byte < 0x20, a '"', a '\\' or one with its high bit: the usual
		// "has a byte less than n" and "has a zero byte" tests.
		quote, slash := x^(ones*'"'), x^(ones*'\\')
		special := (x - ones*0x20) | (quote-ones)&^quote | (slash-ones)&^slash
		if (special&^x|x)&highs != 0 {
			break
		}
	}
	for i < len(s) && jsonPlain[s[i]] {
		i++
	}
	return i
}

// jsonPlain marks the bytes a JSON string holds as they are: printable
// ASCII other than '"' and '\\'.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func appendJSONEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
}
