package export

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/tracefmt"
)

// Attribute keys uetrace adds to every record; the event's own fields are
// attributes by their names beside them.
const (
	AttrTracepoint = "linux.tracepoint" // "system:name" of the tracepoint
	AttrThreadID   = "thread.id"        // semantic conventions' thread id
	AttrCPU        = "linux.cpu"
	// AttrPerfTime is the sample's own time (perf's clock), given when
	// it could not be made a wall-clock time.
	AttrPerfTime = "linux.perf_time"
	// EventHeader metadata.
	AttrEHLevel     = "eventheader.level"
	AttrEHKeyword   = "eventheader.keyword"
	AttrEHOpcode    = "eventheader.opcode"
	AttrEHID        = "eventheader.id"
	AttrEHVersion   = "eventheader.version"
	AttrEHTag       = "eventheader.tag"
	AttrEHActivity  = "eventheader.activity_id"
	AttrEHRelated   = "eventheader.related_activity_id"
	AttrEHProvider  = "eventheader.provider"
	AttrUndecodable = "linux.raw" // the record's bytes, when it does not decode
)

// Event is a tracepoint as its format file describes it: what a Sample's
// record is decoded by.
type Event struct {
	System, Name string
	format       *tracefmt.Format
	// For an EventHeader tracepoint: where the event starts in the
	// record, and the tracepoint name to decode it by; ehOff -1 if not one.
	ehOff  int
	ehName string
	full   string // "system:name"
}

// NewEvent reads a tracepoint's format file. A format that does not parse
// is an error; nil format makes an event whose records are sent
// undecoded (linux.raw).
func NewEvent(system, name string, format []byte) (*Event, error) {
	ev := &Event{System: system, Name: name, ehOff: -1, full: system + ":" + name}
	if format == nil {
		return ev, nil
	}
	f, err := tracefmt.Parse(format)
	if err != nil {
		return nil, fmt.Errorf("format of %s: %w", ev.full, err)
	}
	ev.format = f
	ev.ehOff, ev.ehName = ehOffset(name, f)
	return ev, nil
}

// ehFieldNames are the fields of an EventHeader tracepoint's format:
// eventheader.CommandTypes as the kernel lays it out.
var ehFieldNames = [...]string{"eventheader_flags", "version", "id", "tag", "opcode", "level"}

// ehOffset is report's rule: an EventHeader tracepoint has exactly the
// header's fields and a name "<provider>_L<n>K<hex>…" (a multi-format
// registration's ".<hexid>" aside).
func ehOffset(name string, f *tracefmt.Format) (int, string) {
	if len(f.Fields) != len(ehFieldNames) {
		return -1, ""
	}
	for i, n := range ehFieldNames {
		if f.Fields[i].Name != n {
			return -1, ""
		}
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if _, err := strconv.ParseUint(name[i+1:], 16, 64); err == nil {
			name = name[:i]
		}
	}
	if _, err := eventheader.ParseTracepointName(name); err != nil {
		return -1, ""
	}
	return f.Fields[0].Offset, name
}

// Sample is one event record to export.
type Sample struct {
	Event *Event
	// Time is the wall-clock time of the sample in ns since 1970; 0 when
	// not known, and then PerfTime is sent as an attribute.
	Time, PerfTime uint64
	PID, TID, CPU  uint32
	// Comm is the process's name (its main thread's), for the resource's
	// process.executable.name; "" when not known.
	Comm string
	Raw  []byte // the tracepoint's record, from its common fields on
}

// severities are EventHeader's levels as OTLP severities: the inverse of
// OpenTelemetry's Rust user_events exporter (Fatal → 1 critical, Error →
// 2, Warn → 3, Info → 4, Debug and Trace → 5).
var severities = [...]struct {
	num  int32
	text string
}{
	{otlp.SeverityUnspecified, ""},
	{otlp.SeverityFatal, "CRITICAL"},
	{otlp.SeverityError, "ERROR"},
	{otlp.SeverityWarn, "WARNING"},
	{otlp.SeverityInfo, "INFO"},
	{otlp.SeverityDebug, "VERBOSE"},
}

// record maps a sample to a log record.
func record(s *Sample, observed uint64) otlp.Record {
	ev := s.Event
	r := otlp.Record{Time: s.Time, ObservedTime: observed, EventName: ev.full}
	attrs := make([]otlp.KeyValue, 0, 8)
	attrs = append(attrs,
		otlp.KeyValue{Key: AttrTracepoint, Value: otlp.StringValue(ev.full)},
		otlp.KeyValue{Key: AttrThreadID, Value: otlp.IntValue(int64(s.TID))},
		otlp.KeyValue{Key: AttrCPU, Value: otlp.IntValue(int64(s.CPU))})
	if s.Time == 0 {
		attrs = append(attrs, otlp.KeyValue{Key: AttrPerfTime, Value: otlp.IntValue(int64(s.PerfTime))})
	}
	switch {
	case ev.format == nil:
		attrs = append(attrs, otlp.KeyValue{Key: AttrUndecodable, Value: otlp.BytesValue(clone(s.Raw))})
	case ev.ehOff >= 0:
		if e, ok := decodeEH(ev, s.Raw); ok {
			attrs = ehAttrs(&r, &e, attrs)
			break
		}
		attrs = plainAttrs(ev.format, s.Raw, attrs)
	default:
		attrs = plainAttrs(ev.format, s.Raw, attrs)
	}
	r.Attributes = attrs
	return r
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// plainAttrs appends a record's fields by their format's types: integers
// as ints (an unsigned 64-bit value past int64 as its decimal text),
// strings as strings (invalid UTF-8 replaced: OTLP strings are UTF-8),
// anything else as bytes. A field outside the record is left out.
func plainAttrs(f *tracefmt.Format, raw []byte, attrs []otlp.KeyValue) []otlp.KeyValue {
	for i := range f.Fields {
		fd := &f.Fields[i]
		v := fd.Value(raw)
		if v.Overflow {
			continue
		}
		var val otlp.Value
		switch fd.Kind {
		case tracefmt.Int:
			if fd.Signed {
				val = otlp.IntValue(v.Int())
			} else if u := v.Uint(); u > math.MaxInt64 {
				val = otlp.StringValue(strconv.FormatUint(u, 10))
			} else {
				val = otlp.IntValue(int64(u))
			}
		case tracefmt.String:
			val = otlp.StringValue(validUTF8(v.Text()))
		default:
			val = otlp.BytesValue(clone(v.Data))
		}
		attrs = append(attrs, otlp.KeyValue{Key: validUTF8String(fd.Name), Value: val})
	}
	return attrs
}

func validUTF8String(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validUTF8 is b as a string of UTF-8, invalid bytes replaced: OTLP's
// strings are UTF-8, and a Collector may refuse a request that has others.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// decodeEH decodes an EventHeader record whose fields all decode.
func decodeEH(ev *Event, raw []byte) (eventheader.Event, bool) {
	if ev.ehOff > len(raw) {
		return eventheader.Event{}, false
	}
	e, err := eventheader.Decode(ev.ehName, raw[ev.ehOff:])
	if err != nil {
		return e, false
	}
	f := e.Fields()
	for f.Next() {
	}
	return e, f.Err() == nil
}

// ehAttrs maps an EventHeader event: its name, level as severity, its
// metadata and its fields (structs as maps, arrays as arrays).
func ehAttrs(r *otlp.Record, e *eventheader.Event, attrs []otlp.KeyValue) []otlp.KeyValue {
	r.EventName = e.Tracepoint.Provider + ":" + validUTF8(e.EventName())
	lvl := int(e.Header.Level)
	if lvl < len(severities) {
		r.SeverityNumber, r.SeverityText = severities[lvl].num, severities[lvl].text
	} else {
		r.SeverityNumber, r.SeverityText = otlp.SeverityTrace, "VERBOSE"
	}
	attrs = append(attrs,
		otlp.KeyValue{Key: AttrEHProvider, Value: otlp.StringValue(e.Tracepoint.Provider)},
		otlp.KeyValue{Key: AttrEHLevel, Value: otlp.IntValue(int64(lvl))},
		otlp.KeyValue{Key: AttrEHKeyword, Value: otlp.IntValue(int64(e.Tracepoint.Keyword))})
	if e.Header.Opcode != 0 {
		attrs = append(attrs, otlp.KeyValue{Key: AttrEHOpcode, Value: otlp.IntValue(int64(e.Header.Opcode))})
	}
	if e.Header.ID != 0 {
		attrs = append(attrs, otlp.KeyValue{Key: AttrEHID, Value: otlp.IntValue(int64(e.Header.ID))},
			otlp.KeyValue{Key: AttrEHVersion, Value: otlp.IntValue(int64(e.Header.Version))})
	}
	if e.Header.Tag != 0 {
		attrs = append(attrs, otlp.KeyValue{Key: AttrEHTag, Value: otlp.IntValue(int64(e.Header.Tag))})
	}
	if e.ActivityID != nil {
		attrs = append(attrs, otlp.KeyValue{Key: AttrEHActivity, Value: otlp.StringValue(string(eventheader.AppendUUID(nil, e.ActivityID)))})
	}
	if e.RelatedActivityID != nil {
		attrs = append(attrs, otlp.KeyValue{Key: AttrEHRelated, Value: otlp.StringValue(string(eventheader.AppendUUID(nil, e.RelatedActivityID)))})
	}
	// A stack of the open structs and arrays: each a map or an array
	// being filled, and its name in its parent.
	type frame struct {
		name  string
		array bool
		kvs   []otlp.KeyValue
		vals  []otlp.Value
	}
	stack := []frame{{kvs: attrs}}
	add := func(name string, v otlp.Value) {
		top := &stack[len(stack)-1]
		if top.array {
			top.vals = append(top.vals, v)
		} else {
			top.kvs = append(top.kvs, otlp.KeyValue{Key: name, Value: v})
		}
	}
	var scratch []byte
	f := e.Fields()
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case eventheader.ItemStructBegin:
			stack = append(stack, frame{name: validUTF8(it.FieldName()), kvs: []otlp.KeyValue{}})
		case eventheader.ItemArrayBegin:
			stack = append(stack, frame{name: validUTF8(it.FieldName()), array: true, vals: []otlp.Value{}})
		case eventheader.ItemStructEnd, eventheader.ItemArrayEnd:
			if len(stack) == 1 {
				break
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.array {
				add(top.name, otlp.ArrayValue(top.vals))
			} else {
				add(top.name, otlp.MapValue(top.kvs))
			}
		case eventheader.ItemValue:
			scratch = it.AppendJSON(scratch[:0])
			add(validUTF8(it.FieldName()), ehValue(it, scratch))
		}
	}
	return stack[0].kvs
}

// ehValue is an EventHeader value as an AnyValue: integers as ints,
// floats as doubles, booleans as bools, binary as bytes, and everything
// else as the text Microsoft's decoder shows for it (strings, UUIDs, IP
// addresses, errno names, times, hex), which js is the JSON of.
func ehValue(it *eventheader.Item, js []byte) otlp.Value {
	enc := it.Encoding & eventheader.EncodingValueMask
	switch it.Format {
	case eventheader.FormatBoolean:
		switch string(js) {
		case "true":
			return otlp.BoolValue(true)
		case "false":
			return otlp.BoolValue(false)
		}
	case eventheader.FormatFloat:
		if x, err := strconv.ParseFloat(string(js), 64); err == nil {
			return otlp.DoubleValue(x)
		}
	case eventheader.FormatHexBytes:
		return otlp.BytesValue(clone(it.Value))
	case eventheader.FormatDefault, eventheader.FormatUnsignedInt, eventheader.FormatSignedInt, eventheader.FormatPid, eventheader.FormatPort:
		if enc == eventheader.EncodingBinaryLength16Char8 || (enc == eventheader.EncodingValue128 && it.Format == eventheader.FormatDefault) {
			return otlp.BytesValue(clone(it.Value))
		}
		if enc >= eventheader.EncodingValue8 && enc <= eventheader.EncodingValue64 {
			if n, err := strconv.ParseInt(string(js), 10, 64); err == nil {
				return otlp.IntValue(n)
			}
		}
	}
	if len(js) > 0 && js[0] == '"' {
		var s string
		if json.Unmarshal(js, &s) == nil {
			return otlp.StringValue(s)
		}
	}
	return otlp.StringValue(validUTF8(js))
}
