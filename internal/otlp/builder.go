package otlp

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Builder encodes log records straight into protobuf, field by field,
// without a Record or Values in between: what an exporter that maps
// thousands of events a second uses. Each record is a complete
// ScopeLogs.log_records field; AppendEncodedRequest puts them in a
// request. A Builder is reused across records and does not allocate once
// its buffer has grown.
//
// Calls nest as the values do: Record ... End, and inside a record or a
// map Str/Int/... with a key, MapStart(key) ... End, ArrayStart(key) ...
// End; inside an array the key is ignored.
type Builder struct {
	b      []byte
	lens   []int       // where each open message's length goes
	frames []frameKind // what each open Record, Map or Array is
}

type frameKind uint8

const (
	inRecord frameKind = iota
	inMap
	inArray
	inBody // the record's body: one value, then the frame is gone
	inSpan // a span: its attributes are field 9
)

// Reset starts over with an empty buffer (keeping its memory).
func (e *Builder) Reset() {
	e.b, e.lens, e.frames = e.b[:0], e.lens[:0], e.frames[:0]
}

// Bytes are the records built since Reset: log_records fields.
func (e *Builder) Bytes() []byte { return e.b }

// open starts field num holding a message whose length is filled in by
// close: 5 bytes are reserved, as appendMessage does.
func (e *Builder) open(num protowire.Number) {
	e.b = appendTag(e.b, num, protowire.BytesType)
	e.lens = append(e.lens, len(e.b))
	e.b = append(e.b, 0, 0, 0, 0, 0)
}

func (e *Builder) close() {
	at := e.lens[len(e.lens)-1]
	e.lens = e.lens[:len(e.lens)-1]
	n := len(e.b) - at - 5
	size := protowire.SizeVarint(uint64(n))
	appendVarint(e.b[at:at], uint64(n))
	if size < 5 {
		copy(e.b[at+size:], e.b[at+5:])
		e.b = e.b[:len(e.b)-(5-size)]
	}
}

// Record starts a log record; End ends it.
func (e *Builder) Record() {
	e.open(fScopeLogsLogRecords)
	e.frames = append(e.frames, inRecord)
}

// Time sets the record's time_unix_nano and observed_time_unix_nano
// (0: left out, unknown).
func (e *Builder) Time(t, observed uint64) {
	if t != 0 {
		e.b = appendTag(e.b, fLogTime, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, t)
	}
	if observed != 0 {
		e.b = appendTag(e.b, fLogObservedTime, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, observed)
	}
}

// Severity sets the record's severity number and text.
func (e *Builder) Severity(num int32, text string) {
	if num != 0 {
		e.b = appendTag(e.b, fLogSeverityNumber, protowire.VarintType)
		e.b = appendVarint(e.b, uint64(int64(num)))
	}
	e.b = appendString(e.b, fLogSeverityText, text)
}

// EventName sets the record's event_name.
func (e *Builder) EventName(s string) { e.b = appendString(e.b, fLogEventName, s) }

// EventNameBytes is EventName of bytes, which must be UTF-8.
func (e *Builder) EventNameBytes(s []byte) {
	if len(s) > 0 {
		e.b = appendTag(e.b, fLogEventName, protowire.BytesType)
		e.b = appendBytesValue(e.b, s)
	}
}

// valueStart opens what holds the next value: an attribute (a KeyValue
// and its AnyValue) in a record or map, an element (an AnyValue) in an
// array. It is for values whose size is not known before they are
// written (maps and arrays); scalar values go through scalar.
func (e *Builder) valueStart(key string) {
	switch e.frames[len(e.frames)-1] {
	case inArray:
		e.open(fValues)
		return
	case inBody:
		e.open(fLogBody)
		return
	case inRecord:
		e.open(fLogAttributes)
	case inSpan:
		e.open(fSpanAttributes)
	default:
		e.open(fValues)
	}
	e.b = appendString(e.b, fKVKey, key)
	e.open(fKVValue)
}

func (e *Builder) valueEnd() {
	e.close()
	switch e.frames[len(e.frames)-1] {
	case inArray:
	case inBody:
		e.frames = e.frames[:len(e.frames)-1]
	default:
		e.close()
	}
}

// scalar writes what holds a value whose AnyValue is n bytes long — the
// KeyValue's tag, length and key and the AnyValue's tag and length, or an
// array element's or the body's tag and length — so that the caller
// appends the AnyValue's fields and nothing is left to close. Its size
// known, a scalar needs no room reserved for its lengths and no move when
// they are shorter: most of a record's bytes are scalars.
func (e *Builder) scalar(key string, n int) {
	var num protowire.Number
	switch e.frames[len(e.frames)-1] {
	case inArray:
		e.b = appendTag(e.b, fValues, protowire.BytesType)
		e.b = appendVarint(e.b, uint64(n))
		return
	case inBody:
		e.frames = e.frames[:len(e.frames)-1]
		e.b = appendTag(e.b, fLogBody, protowire.BytesType)
		e.b = appendVarint(e.b, uint64(n))
		return
	case inRecord:
		num = fLogAttributes
	case inSpan:
		num = fSpanAttributes
	default:
		num = fValues
	}
	kv := 1 + protowire.SizeVarint(uint64(n)) + n // the value field
	if key != "" {                                // proto3 leaves an empty key out
		kv += 1 + protowire.SizeBytes(len(key))
	}
	e.b = appendTag(e.b, num, protowire.BytesType)
	e.b = appendVarint(e.b, uint64(kv))
	e.b = appendString(e.b, fKVKey, key)
	e.b = appendTag(e.b, fKVValue, protowire.BytesType)
	e.b = appendVarint(e.b, uint64(n))
}

// Body makes the next value — Str, Int, …, MapStart, ArrayStart, whose key
// is then ignored — the record's body instead of an attribute.
func (e *Builder) Body() { e.frames = append(e.frames, inBody) }

// TraceContext adds the record's trace id, span id and trace flags, each
// unless zero.
func (e *Builder) TraceContext(traceID [16]byte, spanID [8]byte, flags uint32) {
	if flags != 0 {
		e.b = appendTag(e.b, fLogFlags, protowire.Fixed32Type)
		e.b = protowire.AppendFixed32(e.b, flags)
	}
	if traceID != ([16]byte{}) {
		e.b = appendTag(e.b, fLogTraceID, protowire.BytesType)
		e.b = appendBytesValue(e.b, traceID[:])
	}
	if spanID != ([8]byte{}) {
		e.b = appendTag(e.b, fLogSpanID, protowire.BytesType)
		e.b = appendBytesValue(e.b, spanID[:])
	}
}

// Str adds a string value (which must be UTF-8).
func (e *Builder) Str(key, s string) {
	e.scalar(key, 1+protowire.SizeBytes(len(s)))
	e.b = appendTag(e.b, fAnyString, protowire.BytesType)
	e.b = appendStringValue(e.b, s)
}

// StrBytes is Str of bytes, which must be UTF-8.
func (e *Builder) StrBytes(key string, s []byte) {
	e.scalar(key, 1+protowire.SizeBytes(len(s)))
	e.b = appendTag(e.b, fAnyString, protowire.BytesType)
	e.b = appendBytesValue(e.b, s)
}

// Int adds an integer value.
func (e *Builder) Int(key string, i int64) {
	e.scalar(key, 1+protowire.SizeVarint(uint64(i)))
	e.b = appendTag(e.b, fAnyInt, protowire.VarintType)
	e.b = appendVarint(e.b, uint64(i))
}

// Double adds a floating-point value.
func (e *Builder) Double(key string, f float64) {
	e.scalar(key, 1+8)
	e.b = appendTag(e.b, fAnyDouble, protowire.Fixed64Type)
	e.b = protowire.AppendFixed64(e.b, math.Float64bits(f))
}

// Bool adds a boolean value.
func (e *Builder) Bool(key string, v bool) {
	e.scalar(key, 1+1)
	x := byte(0)
	if v {
		x = 1
	}
	e.b = append(e.b, byte(protowire.EncodeTag(fAnyBool, protowire.VarintType)), x)
}

// BytesValue adds a bytes value.
func (e *Builder) BytesValue(key string, p []byte) {
	e.scalar(key, 1+protowire.SizeBytes(len(p)))
	e.b = appendTag(e.b, fAnyBytes, protowire.BytesType)
	e.b = appendBytesValue(e.b, p)
}

// Empty adds an empty value: an AnyValue with nothing set (JSON's null).
func (e *Builder) Empty(key string) { e.scalar(key, 0) }

// MapStart starts a map value (a KeyValueList); End ends it.
func (e *Builder) MapStart(key string) {
	e.valueStart(key)
	e.open(fAnyKVList)
	e.frames = append(e.frames, inMap)
}

// ArrayStart starts an array value; End ends it.
func (e *Builder) ArrayStart(key string) {
	e.valueStart(key)
	e.open(fAnyArray)
	e.frames = append(e.frames, inArray)
}

// End ends the innermost open record, map or array.
func (e *Builder) End() {
	kind := e.frames[len(e.frames)-1]
	e.frames = e.frames[:len(e.frames)-1]
	e.close()
	if kind != inRecord && kind != inSpan {
		e.valueEnd()
	}
}

// Mark is a Builder's state, to go back to with Truncate.
type Mark struct{ b, lens, frames int }

// Mark returns where the Builder is now.
func (e *Builder) Mark() Mark { return Mark{len(e.b), len(e.lens), len(e.frames)} }

// Truncate forgets what was written since m, open values included: for a
// writer that finds, part way through a record, that it must write
// another.
func (e *Builder) Truncate(m Mark) {
	e.b, e.lens, e.frames = e.b[:m.b], e.lens[:m.lens], e.frames[:m.frames]
}

// Depth is how many records, maps and arrays are open.
func (e *Builder) Depth() int { return len(e.frames) }

// EncodedResourceLogs are a resource's records as a Builder made them.
type EncodedResourceLogs struct {
	Resource []KeyValue
	Scope    Scope
	Records  []byte // log_records fields
}

// AppendEncodedRequest appends the ExportLogsServiceRequest of rls (or
// the ExportTraceServiceRequest, of spans). The records are copied once:
// the lengths before them are counted, not reserved and moved down past
// them as appendMessage does with the small messages it writes.
func AppendEncodedRequest(b []byte, rls []EncodedResourceLogs) []byte {
	for i := range rls {
		rl := &rls[i]
		// The resource and the scope are written first, after room for
		// the two tags and lengths before them (12 bytes: 2 tags, 2
		// varints of up to 5), then moved down once their lengths are
		// known.
		start := len(b)
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		res := len(b)
		b = appendMessage(b, fResourceLogsResource, func(b []byte) []byte {
			return appendKeyValues(b, fResourceAttributes, rl.Resource)
		})
		scope := len(b)
		b = appendMessage(b, fScopeLogsScope, func(b []byte) []byte {
			b = appendString(b, fScopeName, rl.Scope.Name)
			b = appendString(b, fScopeVersion, rl.Scope.Version)
			return appendKeyValues(b, fScopeAttributes, rl.Scope.Attributes)
		})
		end := len(b)
		scopeLogs := end - scope + len(rl.Records)
		var head, mid [6]byte
		h := appendVarint(appendTag(head[:0], fRequestResourceLogs, protowire.BytesType),
			uint64(scope-res+1+protowire.SizeVarint(uint64(scopeLogs))+scopeLogs))
		m := appendVarint(appendTag(mid[:0], fResourceLogsScopeLogs, protowire.BytesType), uint64(scopeLogs))
		// Each piece moves down (or stays): copy is memmove.
		at := start + copy(b[start:], h)
		at += copy(b[at:], b[res:scope])
		at += copy(b[at:], m)
		at += copy(b[at:], b[scope:end])
		b = append(b[:at], rl.Records...)
	}
	return b
}
