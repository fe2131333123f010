package export

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/commonschema"
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

// encoder is what a sample is written with: a Writer, the scratch in
// which the values shown as text are made, and what is derived once from
// the events' layouts. Kept by the caller, its memory serves every sample.
type encoder struct {
	Writer
	js []byte
	// keep says that the Writer keeps the keys and names it is given
	// (NewEncoder's), which then must not view the record: those not of a
	// layout are interned in strs.
	keep    bool
	strs    interner
	layouts layouts
	lay     *ehLayout // the layout of the EventHeader event being written; nil: none
	// acts are the texts of the last activity id and related activity id
	// written, for a Writer that keeps what it is given: the events of one
	// activity come in runs, and each is given the same string, not a
	// copy made anew.
	acts [2]uuidText
}

// uuidText is a UUID and its text.
type uuidText struct {
	id   [16]byte
	text string
}

// uuid adds an activity id as its text (AppendUUID's). A Writer that keeps
// strings is given last's text, made again only when the id is not last's.
func (e *encoder) uuid(key string, id []byte, last *uuidText) {
	if !e.keep {
		e.js = eventheader.AppendUUID(e.js[:0], id)
		e.StrBytes(key, e.js)
		return
	}
	if last.text == "" || string(last.id[:]) != string(id) {
		copy(last.id[:], id)
		last.text = string(eventheader.AppendUUID(e.js[:0], id))
	}
	e.StrConst(key, last.text)
}

// kept is s, which may view the record, as a key or name given to the
// Writer: s itself when the Writer does not keep it, else a copy that
// does not change.
func (e *encoder) kept(s string) string {
	if !e.keep {
		return s
	}
	if e.strs == nil {
		e.strs = interner{}
	}
	return e.strs.get(s)
}

// fields iterates over eh's fields: with its layout's definitions, read
// once for the layout's events, when it has one.
func (e *encoder) fields(eh *eventheader.Event) eventheader.Fields {
	if e.lay != nil {
		return eh.FieldsDefs(&e.lay.defs)
	}
	return eh.Fields()
}

// key is the attribute key of an EventHeader item: its field's name,
// valid UTF-8 and without attributes — its layout's, or kept.
func (e *encoder) key(it *eventheader.Item) string {
	if e.lay != nil {
		return e.lay.key(it)
	}
	return e.kept(validText(it.FieldName()))
}

// encodeSample appends a sample to e as the signal it is and returns that
// signal: a span for a Common Schema span (csSpan), an
// ExportMetricsServiceRequest — returned, not appended: it goes on as it is
// — for an otlp_metrics record (metricsRequest), a log record for anything
// else; and the resource it is of: its process, and the service a Common
// Schema record names.
func encodeSample(e *encoder, s *perfdata.Sample, observed uint64) (sig otlp.Signal, res Resource, metrics []byte) {
	ev := s.Event
	res.PID = s.PID
	if req, ok := metricsRequest(ev, s.Raw); ok {
		return otlp.Metrics, res, req
	}
	// The header and metadata only: the fields are read once, as they are
	// written (encodeEH).
	if eh, ok := ev.EventHeaderHead(s.Raw); ok {
		if sig, cs, ok := encodeEH(e, s, &eh, observed); ok {
			res.Role, res.Instance = cs.role, cs.instance
			return sig, res, nil
		}
	}
	// A plain event, or an EventHeader one whose fields do not all
	// decode: the fields its format has.
	n := 3 + 1 // sampleAttrs', and linux.raw or the fields
	if s.Wall == 0 {
		n++
	}
	if ev.Format != nil {
		n += len(ev.Format.Fields) - 1
	}
	e.Record(n)
	sampleAttrs(e, s)
	e.Time(s.Wall, observed)
	if ev.Format == nil {
		e.BytesValue(AttrUndecodable, s.Raw)
	} else {
		plainFields(e, ev.Format, s.Raw)
	}
	e.EventName(ev.String())
	e.End()
	return otlp.Logs, res, nil
}

// encodeEH appends an EventHeader event: a Common Schema span or log
// record as what it was made from (csSpan, csLog), any other as a log
// record of its fields (ehFields). ok is false, and nothing is written,
// when its fields do not all decode. The fields are read once to be
// written, and before that once more only for a Common Schema record,
// whose PartA and PartB say what to write first.
func encodeEH(e *encoder, s *perfdata.Sample, eh *eventheader.Event, observed uint64) (otlp.Signal, csResource, bool) {
	e.lay = e.layouts.get(eh)
	defer func() { e.lay = nil }()
	// A layout that is not Common Schema's is not scanned again: that its
	// first field is not __csver__ is in its metadata. (A record whose
	// first field's value is cut short is then found by ehFields and
	// written by its format, as when scanCS finds it.)
	var cs csFields
	kind := csNot
	if e.lay == nil || !e.lay.notCS {
		cs, kind = scanCS(e.fields(eh))
		if kind == csInvalid {
			return 0, csResource{}, false
		}
		if kind == csNot && e.lay != nil {
			e.lay.notCS = true
		}
	}
	attrs := 0 // the room the record is given
	if e.lay != nil {
		attrs = e.lay.attrs
	}
	if kind == csRecord && string(cs.typeName) == commonschema.TypeSpan {
		if res, ok := csSpan(e, eh, &cs, s, attrs); ok {
			return otlp.Traces, res, true
		}
	}
	e.Record(attrs)
	sampleAttrs(e, s)
	if kind == csRecord && string(cs.typeName) == commonschema.TypeLog {
		if res, ok := csLog(e, eh, &cs, observed); ok {
			e.endEH()
			return otlp.Logs, res, true
		}
	}
	e.Time(s.Wall, observed)
	if !ehFields(e, eh) {
		// Found part way: what was written goes, and the caller writes
		// the record by its format.
		e.Discard()
		return 0, csResource{}, false
	}
	e.endEH()
	return otlp.Logs, csResource{}, true
}

// endEH ends an EventHeader event's record or span, and has its layout
// give the next ones the room the most of its records took: the events of
// a layout differ only by what their headers say (an opcode, an activity
// id: a few attributes), and too little room is grown by doubling.
func (e *encoder) endEH() {
	if e.lay != nil {
		e.lay.attrs = max(e.lay.attrs, e.Len())
	}
	e.End()
}

// sampleAttrs adds the attributes uetrace gives every record: the
// tracepoint, the thread and the CPU, and perf's time where there is no
// wall-clock time.
func sampleAttrs(e *encoder, s *perfdata.Sample) {
	e.StrConst(AttrTracepoint, s.Event.String())
	e.Int(AttrThreadID, int64(s.TID))
	e.Int(AttrCPU, int64(s.CPU))
	if s.Wall == 0 {
		e.Int(AttrPerfTime, int64(s.Time))
	}
}

// plainFields adds a record's fields by their format's types: integers
// as ints (an unsigned 64-bit value past int64 as its decimal text),
// strings as strings (invalid UTF-8 replaced: OTLP strings are UTF-8),
// anything else as bytes. A field outside the record is left out.
func plainFields(e *encoder, f *tracefmt.Format, raw []byte) {
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
				e.js = strconv.AppendUint(e.js[:0], u, 10)
				e.StrBytes(key, e.js)
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
// metadata and its fields (structs as maps, arrays as arrays). It says
// whether every field decoded; when one did not, what it wrote is for the
// caller to take back.
func ehFields(e *encoder, eh *eventheader.Event) bool {
	lvl := int(eh.Header.Level)
	if lvl < len(severities) {
		e.Severity(severities[lvl].num, severities[lvl].text)
	} else {
		e.Severity(otlp.SeverityTrace, "VERBOSE")
	}
	e.StrConst(AttrEHProvider, eh.Tracepoint.Provider)
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
	if eh.ActivityID != nil {
		e.uuid(AttrEHActivity, eh.ActivityID, &e.acts[0])
	}
	if eh.RelatedActivityID != nil {
		e.uuid(AttrEHRelated, eh.RelatedActivityID, &e.acts[1])
	}
	base := e.Depth()
	f := e.fields(eh)
	for f.Next() {
		it := f.Item()
		switch it.Kind {
		case eventheader.ItemStructBegin:
			e.MapStart(e.key(it), int(it.Format)) // a struct's field count
		case eventheader.ItemArrayBegin:
			e.ArrayStart(e.key(it), int(it.ArrayCount))
		case eventheader.ItemStructEnd, eventheader.ItemArrayEnd:
			if e.Depth() > base {
				e.End()
			}
		case eventheader.ItemValue:
			ehValue(e, e.key(it), it)
		}
	}
	if f.Err() != nil {
		return false
	}
	for e.Depth() > base {
		e.End()
	}
	// "Provider:Event": the layout's, else made in the scratch.
	if e.lay != nil {
		e.EventName(e.lay.eventName)
		return true
	}
	e.js = append(append(e.js[:0], eh.Tracepoint.Provider...), ':')
	e.js = append(e.js, validText(eh.EventName())...)
	e.EventName(e.kept(view(e.js)))
	return true
}

// ehValue adds an EventHeader value: integers as ints, floats as
// doubles, booleans as bools, binary as bytes, and everything else as the
// text Microsoft's decoder shows for it (strings, UUIDs, IP addresses,
// errno names, times, hex). The values most events hold are taken from
// their bytes (ehScalar); the others from their JSON (ehValueJSON), made
// in e.js.
func ehValue(e *encoder, key string, it *eventheader.Item) {
	if ehScalar(e, key, it) {
		return
	}
	e.js = it.AppendJSON(e.js[:0])
	ehValueJSON(e, key, it, e.js)
}

// ehScalar adds, straight from its bytes, a value of the encodings and
// formats most events use — integers, finite floats, booleans 0 and 1,
// UTF-8 strings, errnos Linux names — as ehValueJSON would from its JSON,
// and says whether it did; it adds nothing when the value is another
// (TestEHScalar compares the two for every encoding and format).
func ehScalar(e *encoder, key string, it *eventheader.Item) bool {
	v := it.Value
	switch enc := it.Encoding; enc {
	case eventheader.EncodingValue8, eventheader.EncodingValue16, eventheader.EncodingValue32, eventheader.EncodingValue64:
		u, _ := it.Uint()
		switch it.Format {
		case eventheader.FormatDefault, eventheader.FormatUnsignedInt, eventheader.FormatPid, eventheader.FormatPort:
			// Unsigned, but for a 32-bit pid (signed) and a 16-bit port
			// (network byte order); a 64-bit value past int64 is text.
			switch {
			case enc == eventheader.EncodingValue32 && it.Format == eventheader.FormatPid:
				e.Int(key, int64(int32(u)))
			case enc == eventheader.EncodingValue16 && it.Format == eventheader.FormatPort:
				e.Int(key, int64(binary.BigEndian.Uint16(v)))
			case u > math.MaxInt64:
				return false
			default:
				e.Int(key, int64(u))
			}
			return true
		case eventheader.FormatSignedInt:
			n, _ := it.Int()
			e.Int(key, n)
			return true
		case eventheader.FormatFloat:
			var x float64
			switch enc {
			case eventheader.EncodingValue64:
				x = math.Float64frombits(u)
			case eventheader.EncodingValue32:
				// The decimal a float32 is shown as, read as a float64:
				// 0.1f is 0.1, not 0.100000001490116.
				var buf [32]byte
				f := math.Float32frombits(uint32(u))
				if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
					return false
				}
				x, _ = strconv.ParseFloat(view(strconv.AppendFloat(buf[:0], float64(f), 'e', -1, 32)), 64)
			default:
				return false
			}
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return false // shown as text: "nan", "inf"
			}
			e.Double(key, x)
			return true
		case eventheader.FormatBoolean:
			if enc != eventheader.EncodingValue64 && u <= 1 {
				e.Bool(key, u == 1)
				return true
			}
		case eventheader.FormatErrno:
			// An errno Linux names: its text, made once.
			if enc == eventheader.EncodingValue32 {
				if t := eventheader.ErrnoText(uint32(u)); t != "" {
					e.StrConst(key, t)
					return true
				}
			}
		}
	case eventheader.EncodingZStringChar8, eventheader.EncodingStringLength16Char8:
		if (it.Format == eventheader.FormatDefault || it.Format == eventheader.FormatStringUTF) && utf8.Valid(v) {
			e.StrBytes(key, v)
			return true
		}
	}
	return false
}

// number says whether JSON text starts as a number does.
func number(js []byte) bool { return len(js) > 0 && (js[0] == '-' || js[0] >= '0' && js[0] <= '9') }

// fitsInt64 says whether JSON text, as AppendJSON writes an integer value
// of at most 64 bits, is an int64: a negative one (of a signed value), or
// one of fewer digits than, or as many as and not more than,
// math.MaxInt64. It keeps ParseInt from the values past int64 (a u64
// over 2^63), whose error would be allocated to be dropped.
func fitsInt64(js []byte) bool {
	const maxInt64 = "9223372036854775807"
	if !number(js) {
		return false
	}
	return js[0] == '-' || len(js) < len(maxInt64) || len(js) == len(maxInt64) && string(js) <= maxInt64
}

// ehValueJSON adds an EventHeader value by its JSON, js: what ehValue
// says, for any encoding and format.
func ehValueJSON(e *encoder, key string, it *eventheader.Item, js []byte) {
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
		// Only a number is: "nan" and "inf" are shown quoted, and a
		// failed parse would be an error allocated to be dropped.
		if number(js) {
			if x, err := strconv.ParseFloat(view(js), 64); err == nil {
				e.Double(key, x)
				return
			}
		}
	case eventheader.FormatHexBytes:
		e.BytesValue(key, it.Value)
		return
	case eventheader.FormatDefault, eventheader.FormatUnsignedInt, eventheader.FormatSignedInt, eventheader.FormatPid, eventheader.FormatPort:
		if enc == eventheader.EncodingBinaryLength16Char8 || (enc == eventheader.EncodingValue128 && it.Format == eventheader.FormatDefault) {
			e.BytesValue(key, it.Value)
			return
		}
		if enc >= eventheader.EncodingValue8 && enc <= eventheader.EncodingValue64 && fitsInt64(js) {
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
