package export

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
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

// view is b as a string without a copy: for values the Builder copies at
// once.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// encodeSample appends a sample to e as the signal it is and returns that
// signal: a span for a Common Schema span (csSpan), an
// ExportMetricsServiceRequest — returned, not appended: it goes on as it is
// — for an otlp_metrics record (metricsRequest), a log record for anything
// else; and what a Common Schema record says of its resource.
func encodeSample(e *otlp.Builder, s *perfdata.Sample, observed uint64) (sig otlp.Signal, cs csResource, metrics []byte) {
	ev := s.Event
	if req, ok := metricsRequest(ev, s.Raw); ok {
		return otlp.Metrics, csResource{}, req
	}
	var eh *eventheader.Event
	if ev.IsEventHeader() {
		if d, ok := ev.EventHeader(s.Raw); ok {
			eh = &d
			if res, ok := csSpan(e, eh, func(e *otlp.Builder) { sampleAttrs(e, s) }); ok {
				return otlp.Traces, res, nil
			}
		}
	}
	return otlp.Logs, encodeRecord(e, s, observed, eh), nil
}

// sampleAttrs adds the attributes uetrace gives every record: the
// tracepoint, the thread and the CPU, and perf's time where there is no
// wall-clock time.
func sampleAttrs(e *otlp.Builder, s *perfdata.Sample) {
	e.Str(AttrTracepoint, s.Event.String())
	e.Int(AttrThreadID, int64(s.TID))
	e.Int(AttrCPU, int64(s.CPU))
	if s.Wall == 0 {
		e.Int(AttrPerfTime, int64(s.Time))
	}
}

// encodeRecord appends a sample as a log record to e — eh is its
// EventHeader event, decoded, or nil — and returns what a Common Schema
// record says of its resource (csLog).
func encodeRecord(e *otlp.Builder, s *perfdata.Sample, observed uint64, eh *eventheader.Event) csResource {
	ev := s.Event
	e.Record()
	sampleAttrs(e, s)
	switch {
	case ev.Format == nil:
		e.Time(s.Wall, observed)
		e.BytesValue(AttrUndecodable, s.Raw)
	case eh != nil:
		if res, ok := csLog(e, eh, observed); ok {
			e.End()
			return res
		}
		e.Time(s.Wall, observed)
		ehFields(e, eh)
		e.End()
		return csResource{}
	default:
		e.Time(s.Wall, observed)
		plainFields(e, ev.Format, s.Raw)
	}
	e.EventName(ev.String())
	e.End()
	return csResource{}
}

// plainFields adds a record's fields by their format's types: integers
// as ints (an unsigned 64-bit value past int64 as its decimal text),
// strings as strings (invalid UTF-8 replaced: OTLP strings are UTF-8),
// anything else as bytes. A field outside the record is left out.
func plainFields(e *otlp.Builder, f *tracefmt.Format, raw []byte) {
	var num [20]byte
	for i := range f.Fields {
		fd := &f.Fields[i]
		v := fd.Value(raw)
		if v.Overflow {
			continue
		}
		key := validUTF8String(fd.Name)
		switch fd.Kind {
		case tracefmt.Int:
			if fd.Signed {
				e.Int(key, v.Int())
			} else if u := v.Uint(); u > math.MaxInt64 {
				e.Str(key, view(strconv.AppendUint(num[:0], u, 10)))
			} else {
				e.Int(key, int64(u))
			}
		case tracefmt.String:
			e.Str(key, validText(v.Text()))
		default:
			e.BytesValue(key, v.Data)
		}
	}
}

func validUTF8String(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// validText is b as UTF-8 — b itself, viewed, when it is, else a copy
// with the invalid bytes replaced: OTLP's strings are UTF-8, and a
// Collector may refuse a request that has others.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return view(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// ehFields adds an EventHeader event: its name, level as severity, its
// metadata and its fields (structs as maps, arrays as arrays).
func ehFields(e *otlp.Builder, eh *eventheader.Event) {
	lvl := int(eh.Header.Level)
	if lvl < len(severities) {
		e.Severity(severities[lvl].num, severities[lvl].text)
	} else {
		e.Severity(otlp.SeverityTrace, "VERBOSE")
	}
	e.Str(AttrEHProvider, eh.Tracepoint.Provider)
	e.Int(AttrEHLevel, int64(lvl))
	e.Int(AttrEHKeyword, int64(eh.Tracepoint.Keyword))
	if eh.Header.Opcode != 0 {
		e.Int(AttrEHOpcode, int64(eh.Header.Opcode))
	}
	if eh.Header.ID != 0 {
		e.Int(AttrEHID, int64(eh.Header.ID))
		e.Int(AttrEHVersion, int64(eh.Header.Version))
	}
	if eh.Header.Tag != 0 {
		e.Int(AttrEHTag, int64(eh.Header.Tag))
	}
	var scratch [64]byte
	if eh.ActivityID != nil {
		e.Str(AttrEHActivity, view(eventheader.AppendUUID(scratch[:0], eh.ActivityID)))
	}
	if eh.RelatedActivityID != nil {
		e.Str(AttrEHRelated, view(eventheader.AppendUUID(scratch[:0], eh.RelatedActivityID)))
	}
	base := e.Depth()
	js := scratch[:0]
	f := eh.Fields()
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case eventheader.ItemStructBegin:
			e.MapStart(validText(it.FieldName()))
		case eventheader.ItemArrayBegin:
			e.ArrayStart(validText(it.FieldName()))
		case eventheader.ItemStructEnd, eventheader.ItemArrayEnd:
			if e.Depth() > base {
				e.End()
			}
		case eventheader.ItemValue:
			js = it.AppendJSON(js[:0])
			ehValue(e, validText(it.FieldName()), it, js)
		}
	}
	for e.Depth() > base {
		e.End()
	}
	name := eh.EventName()
	if utf8.Valid(name) {
		e.EventNameBytes(eh.Tracepoint.Provider+":", name)
	} else {
		e.EventName(eh.Tracepoint.Provider + ":" + validText(name))
	}
}

// ehValue adds an EventHeader value: integers as ints, floats as
// doubles, booleans as bools, binary as bytes, and everything else as the
// text Microsoft's decoder shows for it (strings, UUIDs, IP addresses,
// errno names, times, hex), of which js is the JSON.
func ehValue(e *otlp.Builder, key string, it *eventheader.Item, js []byte) {
	enc := it.Encoding & eventheader.EncodingValueMask
	switch it.Format {
	case eventheader.FormatBoolean:
		switch string(js) {
		case "true":
			e.Bool(key, true)
			return
		case "false":
			e.Bool(key, false)
			return
		}
	case eventheader.FormatFloat:
		if x, err := strconv.ParseFloat(view(js), 64); err == nil {
			e.Double(key, x)
			return
		}
	case eventheader.FormatHexBytes:
		e.BytesValue(key, it.Value)
		return
	case eventheader.FormatDefault, eventheader.FormatUnsignedInt, eventheader.FormatSignedInt, eventheader.FormatPid, eventheader.FormatPort:
		if enc == eventheader.EncodingBinaryLength16Char8 || (enc == eventheader.EncodingValue128 && it.Format == eventheader.FormatDefault) {
			e.BytesValue(key, it.Value)
			return
		}
		if enc >= eventheader.EncodingValue8 && enc <= eventheader.EncodingValue64 {
			if n, err := strconv.ParseInt(view(js), 10, 64); err == nil {
				e.Int(key, n)
				return
			}
		}
	}
	if len(js) >= 2 && js[0] == '"' {
		if inner := js[1 : len(js)-1]; bytes.IndexByte(inner, '\\') < 0 {
			e.Str(key, validText(inner))
			return
		}
		var s string
		if json.Unmarshal(js, &s) == nil {
			e.Str(key, s)
			return
		}
	}
	e.Str(key, validText(js))
}
