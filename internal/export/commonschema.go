package export

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/commonschema"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// OpenTelemetry's user_events exporters (the Rust crates of
// opentelemetry-rust-contrib, the C++ ones, and package
// eventheader/ehotel) write a log record as an EventHeader event in
// Microsoft's Common Schema 4.0 layout:
//
//	__csver__  1024
//	PartA      {time, ext_dt_traceId, ext_dt_spanId, ext_cloud_role, ext_cloud_roleInstance}
//	PartC      {the record's attributes}
//	PartB      {_typeName "Log", body, severityNumber, severityText, eventId, name}
//
// Such an event is mapped back to the log record it was made from — the
// time, trace and span ids, body, severity, event name and attributes the
// SDK had — instead of an event whose parts are maps. What the layout
// does not carry is not sent: the trace flags, the instrumentation scope,
// the resource but for service.name and service.instance.id (which
// become the resource's), the order of an event_id attribute among the
// others (it is last). Values keep the types the layout gives them: a
// StringJSON value (a slice or map, which ehotel writes as JSON) comes
// back as an array or a map, its numbers ints when they have no fraction
// or exponent and doubles otherwise, bytes inside it as base64 strings.

// csFields is what a Common Schema record's PartA and PartB hold.
type csFields struct {
	time                 []byte // a log's time; a span's end
	traceID, spanID      []byte
	role, instance       []byte
	hasRole, hasInstance bool
	typeName             []byte
	// Log.
	severity           int64
	hasSeverity        bool
	severityText, name []byte
	eventID            int64
	hasEventID         bool
	// Span (name is the span's).
	startTime, parentID, links, statusMessage []byte
	success, hasSuccess                       bool
	kind                                      int64
}

// csResource is what a Common Schema record says of its resource.
type csResource struct {
	role, instance string
}

// csLog maps eh, a Common Schema record of type Log (scanned into cs),
// into e's open record — after the attributes the caller added — and
// returns what it says of the resource. ok is false, and nothing is
// written, when its time does not parse.
func csLog(e *encoder, eh *eventheader.Event, cs *csFields, observed uint64) (res csResource, ok bool) {
	t, err := time.Parse(time.RFC3339Nano, view(cs.time))
	if err != nil {
		return res, false
	}
	e.Time(uint64(t.UnixNano()), observed)
	if cs.hasSeverity {
		e.Severity(int32(cs.severity), e.kept(validText(cs.severityText)))
	}
	var tid [16]byte
	var sid [8]byte
	hexID(tid[:], cs.traceID)
	hexID(sid[:], cs.spanID)
	e.TraceContext(tid, sid, 0)
	e.StrConst(AttrEHProvider, eh.Tracepoint.Provider)

	// PartC's fields are the attributes, PartB's body the body.
	base := e.Depth()
	parts := partItems{fs: e.fields(eh)}
	for it := parts.next(); it != nil; it = parts.next() {
		switch part := parts.part; {
		case part == partC:
			csValue(e, it, base)
		case part == partB && it.Depth == 1 && string(it.FieldName()) == "body" && it.Kind == eventheader.ItemValue:
			e.Body()
			csValue(e, it, base)
		}
	}
	if cs.hasEventID {
		e.Int("event_id", cs.eventID)
	}
	if len(cs.name) > 0 {
		e.EventName(e.kept(validText(cs.name)))
	}
	return cs.resource(), true
}

// csPart is a Common Schema part: a top-level struct of the record.
type csPart uint8

const (
	partNone csPart = iota // not in a part, or in a struct of another name
	partA
	partB
	partC
)

// partOf is the part a top-level struct's name names.
func partOf(name []byte) csPart {
	switch string(name) {
	case commonschema.PartA:
		return partA
	case commonschema.PartB:
		return partB
	case commonschema.PartC:
		return partC
	}
	return partNone
}

// partItems iterates over the items inside an event's top-level structs
// — the parts — and says which part each is in.
type partItems struct {
	fs   eventheader.Fields
	part csPart
}

// next returns the next item in a part; nil at the end.
func (p *partItems) next() *eventheader.Item {
	for p.fs.Next() {
		it := p.fs.Item()
		if it.Depth > 0 {
			return it
		}
		p.part = partNone
		if it.Kind == eventheader.ItemStructBegin {
			p.part = partOf(it.FieldName())
		}
	}
	return nil
}

// hexID decodes a trace or span id's hex text into dst, when it has the
// length dst's id has; dst stays zero (no id) otherwise.
func hexID(dst, text []byte) {
	if len(text) == 2*len(dst) {
		if _, err := hex.Decode(dst, text); err != nil {
			clear(dst)
		}
	}
}

// resource is what the record says of its resource: PartA's cloud role
// and instance.
func (cs *csFields) resource() (res csResource) {
	if cs.hasRole {
		res.role = validText(cs.role)
	}
	if cs.hasInstance {
		res.instance = validText(cs.instance)
	}
	return res
}

// csKind is what scanCS found an event to be.
type csKind uint8

const (
	// csOther: not a Common Schema record; its fields may not all have
	// been read.
	csOther csKind = iota
	// csNot: not a Common Schema record by its layout — it has no fields,
	// or its first is not __csver__ — nor is any event of its layout; its
	// first field's value was not read.
	csNot
	// csInvalid: a field does not decode.
	csInvalid
	// csRecord: a Common Schema record of a type, every field read.
	csRecord
)

// scanCS reads an event's PartA and PartB from f, the iteration over its
// fields, and says whether it is a Common Schema record of a type:
// __csver__ first, a PartA with a time, a PartB with a _typeName. It
// stops at the first field of an event that is not one.
func scanCS(f eventheader.Fields) (cs csFields, kind csKind) {
	part, first := partNone, true
	for f.Next() {
		it := f.Item()
		name := it.FieldName()
		if it.Depth == 0 {
			if first && (it.Kind != eventheader.ItemValue || string(name) != commonschema.VersionField) {
				return cs, csNot
			}
			first = false
			part = partNone
			if it.Kind == eventheader.ItemStructBegin {
				part = partOf(name)
			}
			continue
		}
		if it.Depth != 1 || it.Kind != eventheader.ItemValue {
			continue
		}
		switch part {
		case partA:
			switch string(name) {
			case "time":
				cs.time = it.Value
			case "ext_dt_traceId":
				cs.traceID = it.Value
			case "ext_dt_spanId":
				cs.spanID = it.Value
			case "ext_cloud_role":
				cs.role, cs.hasRole = it.Value, true
			case "ext_cloud_roleInstance":
				cs.instance, cs.hasInstance = it.Value, true
			}
		case partB:
			switch string(name) {
			case "_typeName":
				cs.typeName = it.Value
			case "severityNumber":
				cs.severity, cs.hasSeverity = it.Int()
			case "severityText":
				cs.severityText = it.Value
			case "eventId":
				cs.eventID, cs.hasEventID = it.Int()
			case "name":
				cs.name = it.Value
			case "startTime":
				cs.startTime = it.Value
			case "success":
				cs.success, cs.hasSuccess = len(it.Value) > 0 && it.Value[0] != 0, true
			case "kind":
				cs.kind, _ = it.Int()
			case "parentId":
				cs.parentID = it.Value
			case "links":
				cs.links = it.Value
			case "statusMessage":
				cs.statusMessage = it.Value
			}
		}
	}
	switch {
	case f.Err() != nil:
		return cs, csInvalid
	case first:
		return cs, csNot
	case cs.time == nil || cs.typeName == nil:
		return cs, csOther
	}
	return cs, csRecord
}

// csValue adds one item of a part — a value, or the begin or end of a
// struct or array inside it — as ehFields adds an event's; a StringJSON
// string as the value its JSON is.
func csValue(e *encoder, it *eventheader.Item, base int) {
	key := e.key(it)
	switch it.Kind {
	case eventheader.ItemStructBegin:
		e.MapStart(key, int(it.Format))
	case eventheader.ItemArrayBegin:
		e.ArrayStart(key, int(it.ArrayCount))
	case eventheader.ItemStructEnd, eventheader.ItemArrayEnd:
		if e.Depth() > base {
			e.End()
		}
	case eventheader.ItemValue:
		if it.Format == eventheader.FormatStringJSON && jsonValue(e, key, it.Value) {
			return
		}
		ehValue(e, key, it)
	}
}

// jsonValue adds the value JSON text js is — objects as maps in their
// keys' order, arrays as arrays, strings, numbers as ints (or doubles, or
// their text when they are neither), booleans, null as an empty value —
// and says whether js was JSON; nothing is added when not. It reads the
// text as encoding/json's Decoder did (TestJSONValue compares them), without
// a token allocated at a time and an error made to find each number's end.
func jsonValue(e *encoder, key string, js []byte) bool {
	if !json.Valid(js) {
		return false
	}
	p := jsonText{e: e, b: js}
	p.value(key)
	return true
}

// jsonText reads valid JSON into an encoder's Writer.
type jsonText struct {
	e *encoder
	b []byte
	i int
}

func (p *jsonText) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// value adds the value at p.i.
func (p *jsonText) value(key string) {
	p.space()
	switch c := p.b[p.i]; c {
	case '{', '[':
		p.i++
		if c == '{' {
			p.e.MapStart(key, 0)
		} else {
			p.e.ArrayStart(key, 0)
		}
		for {
			p.space()
			if p.b[p.i] == '}' || p.b[p.i] == ']' {
				p.i++
				break
			}
			if p.b[p.i] == ',' {
				p.i++
				p.space()
			}
			k := ""
			if c == '{' {
				k = p.e.kept(p.str())
				p.space()
				p.i++ // ':'
			}
			p.value(k)
		}
		p.e.End()
	case '"':
		p.e.Str(key, p.str())
	case 't':
		p.i += len("true")
		p.e.Bool(key, true)
	case 'f':
		p.i += len("false")
		p.e.Bool(key, false)
	case 'n':
		p.i += len("null")
		p.e.Empty(key)
	default:
		start := p.i
		for p.i < len(p.b) && strings.IndexByte("+-.0123456789eE", p.b[p.i]) >= 0 {
			p.i++
		}
		num := view(p.b[start:p.i])
		if i, err := strconv.ParseInt(num, 10, 64); err == nil {
			p.e.Int(key, i)
		} else if f, err := strconv.ParseFloat(num, 64); err == nil {
			p.e.Double(key, f)
		} else {
			p.e.Str(key, num)
		}
	}
}

// str reads the string at p.i: a view of the text when it has no escapes
// and is UTF-8, else what encoding/json makes of it (escapes undone,
// invalid UTF-8 replaced).
func (p *jsonText) str() string {
	start := p.i
	p.i++
	plain := true
	for p.b[p.i] != '"' {
		if p.b[p.i] == '\\' {
			plain = false
			p.i++
		}
		p.i++
	}
	p.i++
	if text := p.b[start+1 : p.i-1]; plain && utf8.Valid(text) {
		return view(text)
	}
	var s string
	json.Unmarshal(p.b[start:p.i], &s)
	return s
}

// csSpan maps eh, a Common Schema record of type Span (scanned into cs)
// — what OpenTelemetry's Rust trace exporter and ehotel's span writer
// make of a span: PartA {time (the end), ext_dt_traceId, ext_dt_spanId,
// ext_cloud_role, ext_cloud_roleInstance}, PartB {_typeName "Span", name,
// startTime, success, kind, parentId, links (JSON), the well-known
// attributes under PartB names, statusMessage}, PartC {the other
// attributes} — into a span in e, with uetrace's own attributes of s
// first, and returns what it says of its resource; attrs is the room its
// attributes are given. ok is false, and nothing is written, when its
// times do not parse.
//
// What the layout does not keep does not come back: the trace state and
// flags, the span's events, the links' attributes, dropped counts, the
// scope; a status Ok (it is "success" as Unset is: both come back Unset);
// the order of the well-known attributes among the others (they come
// first).
func csSpan(e *encoder, eh *eventheader.Event, cs *csFields, s *perfdata.Sample, attrs int) (res csResource, ok bool) {
	end, err1 := time.Parse(time.RFC3339Nano, view(cs.time))
	start, err2 := time.Parse(time.RFC3339Nano, view(cs.startTime))
	if err1 != nil || err2 != nil {
		return res, false
	}
	var tid [16]byte
	var sid, parent [8]byte
	hexID(tid[:], cs.traceID)
	hexID(sid[:], cs.spanID)
	hexID(parent[:], cs.parentID)
	e.Span(attrs)
	e.SpanIDs(tid, sid, parent)
	e.SpanName(e.kept(validText(cs.name)))
	// Common Schema's kinds are OTLP's less one: Internal 0 … Consumer 4.
	if cs.kind >= 0 && cs.kind <= 4 {
		e.SpanKind(int32(cs.kind) + otlp.SpanKindInternal)
	}
	e.SpanTimes(uint64(start.UnixNano()), uint64(end.UnixNano()))
	if cs.hasSuccess && !cs.success {
		e.SpanStatus(otlp.StatusError, validText(cs.statusMessage))
	}
	for _, l := range csLinks(cs.links) {
		e.SpanLink(l.trace, l.span)
	}
	sampleAttrs(e, s)
	e.StrConst(AttrEHProvider, eh.Tracepoint.Provider)

	// PartB's well-known fields back under their attributes' names, then
	// PartC's.
	base := e.Depth()
	parts := partItems{fs: e.fields(eh)}
	for it := parts.next(); it != nil; it = parts.next() {
		switch parts.part {
		case partB:
			if it.Depth == 1 && it.Kind == eventheader.ItemValue {
				if attr := commonschema.SpanAttributeOf(string(it.FieldName())); attr != "" {
					ehValue(e, attr, it)
				}
			}
		case partC:
			csValue(e, it, base)
		}
	}
	e.endEH()
	return cs.resource(), true
}

type csLink struct {
	trace [16]byte
	span  [8]byte
}

// csLinks reads PartB's links, [{"toTraceId":"…","toSpanId":"…"},…];
// links it cannot read are left out.
func csLinks(js []byte) []csLink {
	if len(js) == 0 {
		return nil
	}
	var in []struct{ ToTraceID, ToSpanID string }
	if json.Unmarshal(js, &in) != nil {
		return nil
	}
	var out []csLink
	for _, l := range in {
		var c csLink
		hexID(c.trace[:], []byte(l.ToTraceID))
		hexID(c.span[:], []byte(l.ToSpanID))
		if c.trace == ([16]byte{}) || c.span == ([8]byte{}) {
			continue
		}
		out = append(out, c)
	}
	return out
}
