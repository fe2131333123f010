package report

import (
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/uetrace/uetrace/tracefmt"
)

// Sample is one decoded record, in time order.
type Sample struct {
	Time     uint64 // perf clock, ns
	CPU      uint32
	PID, TID int32
	Comm     string // the task's name, "" when the file does not have it
	Event    *Event // nil when no attribute matches the sample's id
	Raw      []byte // the tracepoint's raw record: common fields, then its own
}

// Event is one recorded event of a file.
type Event struct {
	System, Name string
	// Format decodes the event's records; nil when the file's tracing data
	// lacks it (the fields are then not shown).
	Format *tracefmt.Format
	full   string // "system:name"
	// jsonKeys are the fields' names as JSON object keys with their colon,
	// encoded once: `"name":`.
	jsonKeys [][]byte
	// jsonHead is `,"system":…,"name":…,"fields":{`, encoded once.
	jsonHead []byte
}

// FullName is "system:name", as perf names tracepoints.
func (e *Event) FullName() string { return e.full }

// appendText appends the sample as perf script prints a tracepoint sample
// with -F comm,pid,tid,cpu,time,event,trace (tools/perf/builtin-script.c:
// "%16s %7d/%-7d [%03d] %12s: %*s: "), then the fields as name=value —
// what the print fmt of a user event shows; for other tracepoints perf
// evaluates their print fmt, uetrace prints every field by its type.
func appendText(b []byte, s *Sample, nameWidth int, vals []tracefmt.Value) []byte {
	comm := s.Comm
	if comm == "" {
		comm = ":" + strconv.Itoa(int(s.TID))
	}
	b = appendPadLeft(b, comm, 16)
	b = append(b, ' ')
	b = appendPadLeft(b, strconv.Itoa(int(s.PID)), 7)
	b = append(b, '/')
	n := len(b)
	b = strconv.AppendInt(b, int64(s.TID), 10)
	for len(b)-n < 7 {
		b = append(b, ' ')
	}
	b = append(b, " ["...)
	if s.CPU < 100 {
		b = append(b, '0')
		if s.CPU < 10 {
			b = append(b, '0')
		}
	}
	b = strconv.AppendUint(b, uint64(s.CPU), 10)
	b = append(b, "] "...)
	var t [32]byte
	ts := strconv.AppendUint(t[:0], s.Time/1e9, 10)
	ts = append(ts, '.')
	us := s.Time % 1e9 / 1e3
	for d := uint64(100000); d > 1 && us < d; d /= 10 {
		ts = append(ts, '0')
	}
	ts = strconv.AppendUint(ts, us, 10)
	b = appendPadLeft(b, string(ts), 12)
	b = append(b, ": "...)
	name := "[unknown]"
	if s.Event != nil {
		name = s.Event.full
	}
	b = appendPadLeft(b, name, nameWidth)
	b = append(b, ':')
	for i := range vals {
		v := &vals[i]
		b = append(b, ' ')
		b = append(b, v.Field.Name...)
		b = append(b, '=')
		switch {
		case v.Overflow:
			b = append(b, "<OVERFLOW>"...)
		case v.Field.Kind == tracefmt.Int && v.Field.Signed:
			b = strconv.AppendInt(b, v.Int(), 10)
		case v.Field.Kind == tracefmt.Int:
			b = strconv.AppendUint(b, v.Uint(), 10)
		case v.Field.Kind == tracefmt.String:
			b = append(b, v.Text()...)
		default:
			b = appendHex(b, v.Data)
		}
	}
	return append(b, '\n')
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
// time is the perf clock in ns. Integer fields are JSON numbers (exact:
// 64-bit values are not rounded through floats), text fields strings, and
// everything else — byte arrays, structs, non-text loc data — lowercase
// hex strings. A field whose data lies outside the record is null.
func appendJSON(b []byte, s *Sample, vals []tracefmt.Value) []byte {
	b = append(b, `{"time":`...)
	b = strconv.AppendUint(b, s.Time, 10)
	b = append(b, `,"cpu":`...)
	b = strconv.AppendUint(b, uint64(s.CPU), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(s.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(s.TID), 10)
	b = append(b, `,"comm":`...)
	b = appendJSONString(b, s.Comm)
	if s.Event != nil {
		b = append(b, s.Event.jsonHead...)
	} else {
		b = append(b, `,"system":"","name":"","fields":{`...)
	}
	for i := range vals {
		v := &vals[i]
		if i > 0 {
			b = append(b, ',')
		}
		if s.Event != nil && i < len(s.Event.jsonKeys) {
			b = append(b, s.Event.jsonKeys[i]...)
		} else {
			b = appendJSONString(b, v.Field.Name)
			b = append(b, ':')
		}
		switch {
		case v.Overflow:
			b = append(b, "null"...)
		case v.Field.Kind == tracefmt.Int && v.Field.Signed:
			b = strconv.AppendInt(b, v.Int(), 10)
		case v.Field.Kind == tracefmt.Int:
			b = strconv.AppendUint(b, v.Uint(), 10)
		case v.Field.Kind == tracefmt.String:
			b = appendJSONBytes(b, v.Text())
		default:
			b = append(b, '"')
			b = appendHex(b, v.Data)
			b = append(b, '"')
		}
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	// Read-only view of s: appendJSONBytes does not keep or change it.
	return appendJSONBytes(b, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// appendJSONBytes appends text from a record as a JSON string: invalid
// UTF-8 becomes U+FFFD, as encoding/json does.
func appendJSONBytes(b, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		// Copy the run of bytes that need no escaping in one append.
		j := i
		for j < len(s) && jsonPlain[s[j]] {
			j++
		}
		if j > i {
			b = append(b, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
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
