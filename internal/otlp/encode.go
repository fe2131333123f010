// Package otlp encodes OpenTelemetry logs as OTLP protobuf and sends them
// to a Collector: over gRPC (a unary call of
// opentelemetry.proto.collector.logs.v1.LogsService/Export, carried by
// net/http's HTTP/2: h2c for http:// endpoints, TLS otherwise) or over
// OTLP/HTTP (a protobuf POST to /v1/logs).
//
// The messages are encoded by hand with protowire, from the field numbers of
// opentelemetry-proto (v1.11.0: opentelemetry/proto/collector/logs/v1/
// logs_service.proto, logs/v1/logs.proto, common/v1/common.proto,
// resource/v1/resource.proto), so that uetrace does not depend on the
// generated Go types nor on grpc-go. Builder writes log records field by
// field as an exporter maps its events, without allocating; AppendRequest
// encodes Record values (tests and small callers). ParseRequest reads
// requests back (for tests and for servers in tests); the responses a Collector sends —
// ExportLogsServiceResponse with its partial success, google.rpc.Status
// with RetryInfo — are decoded too.
//
// It is not a batching exporter: it encodes one request and sends it once.
// Retries, backoff, batching and queueing are package export's.
package otlp

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers, from opentelemetry-proto v1.11.0.
const (
	// ExportLogsServiceRequest (collector/logs/v1/logs_service.proto).
	fRequestResourceLogs = 1
	// ResourceLogs (logs/v1/logs.proto).
	fResourceLogsResource  = 1
	fResourceLogsScopeLogs = 2
	fResourceLogsSchemaURL = 3
	// ScopeLogs.
	fScopeLogsScope      = 1
	fScopeLogsLogRecords = 2
	fScopeLogsSchemaURL  = 3
	// LogRecord.
	fLogTime           = 1  // fixed64 time_unix_nano
	fLogSeverityNumber = 2  // SeverityNumber (enum: varint)
	fLogSeverityText   = 3  // string
	fLogBody           = 5  // AnyValue
	fLogAttributes     = 6  // repeated KeyValue
	fLogDroppedAttrs   = 7  // uint32
	fLogFlags          = 8  // fixed32
	fLogTraceID        = 9  // bytes, 16
	fLogSpanID         = 10 // bytes, 8
	fLogObservedTime   = 11 // fixed64 observed_time_unix_nano
	fLogEventName      = 12 // string
	// Resource (resource/v1/resource.proto).
	fResourceAttributes = 1
	// InstrumentationScope (common/v1/common.proto).
	fScopeName       = 1
	fScopeVersion    = 2
	fScopeAttributes = 3
	// KeyValue.
	fKVKey   = 1
	fKVValue = 2
	// AnyValue: a oneof.
	fAnyString = 1
	fAnyBool   = 2
	fAnyInt    = 3
	fAnyDouble = 4
	fAnyArray  = 5
	fAnyKVList = 6
	fAnyBytes  = 7
	// ArrayValue and KeyValueList.
	fValues = 1
	// ExportLogsServiceResponse and ExportLogsPartialSuccess.
	fResponsePartialSuccess = 1
	fPartialRejected        = 1
	fPartialErrorMessage    = 2
)

// Severity numbers (logs.proto SeverityNumber): the first of each range.
const (
	SeverityUnspecified = 0
	SeverityTrace       = 1
	SeverityDebug       = 5
	SeverityInfo        = 9
	SeverityWarn        = 13
	SeverityError       = 17
	SeverityFatal       = 21
)

// Kind is the type of a Value: which of AnyValue's oneof it is.
type Kind uint8

const (
	Empty Kind = iota // no value: an AnyValue with nothing set
	String
	Bool
	Int
	Double
	Array
	Map
	Bytes
)

// Value is an AnyValue.
type Value struct {
	Kind  Kind
	Str   string // String
	Num   uint64 // Bool (0/1), Int (the int64's bits), Double (the float64's bits)
	Bytes []byte
	Array []Value    // Array
	Map   []KeyValue // Map: a KeyValueList
}

// KeyValue is an attribute.
type KeyValue struct {
	Key   string
	Value Value
}

// StringValue, IntValue, ... make Values.
func StringValue(s string) Value  { return Value{Kind: String, Str: s} }
func IntValue(i int64) Value      { return Value{Kind: Int, Num: uint64(i)} }
func DoubleValue(f float64) Value { return Value{Kind: Double, Num: math.Float64bits(f)} }
func BytesValue(b []byte) Value   { return Value{Kind: Bytes, Bytes: b} }
func ArrayValue(v []Value) Value  { return Value{Kind: Array, Array: v} }
func MapValue(kv []KeyValue) Value {
	return Value{Kind: Map, Map: kv}
}
func BoolValue(b bool) Value {
	v := Value{Kind: Bool}
	if b {
		v.Num = 1
	}
	return v
}

// AsInt, AsDouble and AsBool read a Value's number.
func (v Value) AsInt() int64      { return int64(v.Num) }
func (v Value) AsDouble() float64 { return math.Float64frombits(v.Num) }
func (v Value) AsBool() bool      { return v.Num != 0 }

// Record is a LogRecord.
type Record struct {
	Time, ObservedTime uint64 // ns since 1970; 0: unknown
	SeverityNumber     int32
	SeverityText       string
	EventName          string
	Body               Value
	Attributes         []KeyValue
	Flags              uint32
	TraceID, SpanID    []byte // 16 and 8 bytes, or nil
}

// Scope is an InstrumentationScope.
type Scope struct {
	Name, Version string
	Attributes    []KeyValue
}

// ResourceLogs are the records of one resource (here: one process), all of
// one scope.
type ResourceLogs struct {
	Resource []KeyValue
	Scope    Scope
	Records  []Record
}

// AppendRequest appends the ExportLogsServiceRequest of rls to b.
func AppendRequest(b []byte, rls []ResourceLogs) []byte {
	for i := range rls {
		b = appendMessage(b, fRequestResourceLogs, func(b []byte) []byte { return appendResourceLogs(b, &rls[i]) })
	}
	return b
}

// appendMessage appends field num holding the message that body appends.
// The length is not known before the message is encoded: a 5-byte varint
// is reserved (enough for 2^35) and the message is moved down if its
// length takes fewer bytes — at most 4 bytes copied back per byte of
// length saved, once per message.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = appendTag(b, num, protowire.BytesType)
	at := len(b)
	b = append(b, 0, 0, 0, 0, 0)
	b = body(b)
	n := len(b) - at - 5
	size := protowire.SizeVarint(uint64(n))
	appendVarint(b[at:at], uint64(n))
	if size < 5 {
		copy(b[at+size:], b[at+5:])
		b = b[:len(b)-(5-size)]
	}
	return b
}

func appendResourceLogs(b []byte, rl *ResourceLogs) []byte {
	b = appendMessage(b, fResourceLogsResource, func(b []byte) []byte {
		return appendKeyValues(b, fResourceAttributes, rl.Resource)
	})
	return appendMessage(b, fResourceLogsScopeLogs, func(b []byte) []byte {
		b = appendMessage(b, fScopeLogsScope, func(b []byte) []byte {
			b = appendString(b, fScopeName, rl.Scope.Name)
			b = appendString(b, fScopeVersion, rl.Scope.Version)
			return appendKeyValues(b, fScopeAttributes, rl.Scope.Attributes)
		})
		for i := range rl.Records {
			b = appendMessage(b, fScopeLogsLogRecords, func(b []byte) []byte { return appendRecord(b, &rl.Records[i]) })
		}
		return b
	})
}

// AppendRecord appends one LogRecord message's fields (not its tag):
// what export measures a record's size with.
func AppendRecord(b []byte, r *Record) []byte { return appendRecord(b, r) }

func appendRecord(b []byte, r *Record) []byte {
	if r.Time != 0 {
		b = appendTag(b, fLogTime, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, r.Time)
	}
	if r.SeverityNumber != 0 {
		b = appendTag(b, fLogSeverityNumber, protowire.VarintType)
		b = appendVarint(b, uint64(int64(r.SeverityNumber)))
	}
	b = appendString(b, fLogSeverityText, r.SeverityText)
	if r.Body.Kind != Empty {
		b = appendMessage(b, fLogBody, func(b []byte) []byte { return appendAny(b, &r.Body) })
	}
	b = appendKeyValues(b, fLogAttributes, r.Attributes)
	if r.Flags != 0 {
		b = appendTag(b, fLogFlags, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, r.Flags)
	}
	if len(r.TraceID) > 0 {
		b = appendTag(b, fLogTraceID, protowire.BytesType)
		b = appendBytesValue(b, r.TraceID)
	}
	if len(r.SpanID) > 0 {
		b = appendTag(b, fLogSpanID, protowire.BytesType)
		b = appendBytesValue(b, r.SpanID)
	}
	if r.ObservedTime != 0 {
		b = appendTag(b, fLogObservedTime, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, r.ObservedTime)
	}
	return appendString(b, fLogEventName, r.EventName)
}

// appendString appends a string field; proto3 leaves empty ones out.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = appendTag(b, num, protowire.BytesType)
	return appendStringValue(b, s)
}

func appendKeyValues(b []byte, num protowire.Number, kvs []KeyValue) []byte {
	for i := range kvs {
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, fKVKey, kvs[i].Key)
			return appendMessage(b, fKVValue, func(b []byte) []byte { return appendAny(b, &kvs[i].Value) })
		})
	}
	return b
}

// appendAny appends an AnyValue's fields. A oneof member is written even
// when it is its type's zero value: that is how the oneof says which.
func appendAny(b []byte, v *Value) []byte {
	switch v.Kind {
	case String:
		b = appendTag(b, fAnyString, protowire.BytesType)
		b = appendStringValue(b, v.Str)
	case Bool:
		b = appendTag(b, fAnyBool, protowire.VarintType)
		b = appendVarint(b, v.Num&1)
	case Int:
		b = appendTag(b, fAnyInt, protowire.VarintType)
		b = appendVarint(b, v.Num)
	case Double:
		b = appendTag(b, fAnyDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, v.Num)
	case Bytes:
		b = appendTag(b, fAnyBytes, protowire.BytesType)
		b = appendBytesValue(b, v.Bytes)
	case Array:
		b = appendMessage(b, fAnyArray, func(b []byte) []byte {
			for i := range v.Array {
				b = appendMessage(b, fValues, func(b []byte) []byte { return appendAny(b, &v.Array[i]) })
			}
			return b
		})
	case Map:
		b = appendMessage(b, fAnyKVList, func(b []byte) []byte { return appendKeyValues(b, fValues, v.Map) })
	}
	return b
}

// appendTag appends a field's tag: one byte, for every field these
// encoders write has a number under 16 (the decoders of the tests read
// each back by its number).
func appendTag(b []byte, num protowire.Number, typ protowire.Type) []byte {
	return append(b, byte(num)<<3|byte(typ))
}

// appendVarint appends v as a varint; the lengths of most of a record's
// fields, under 128, without protowire's call.
func appendVarint(b []byte, v uint64) []byte {
	if v < 0x80 {
		return append(b, byte(v))
	}
	return protowire.AppendVarint(b, v)
}

// appendStringValue and appendBytesValue append a length-delimited value:
// its length, then its bytes.
func appendStringValue(b []byte, s string) []byte {
	return append(appendVarint(b, uint64(len(s))), s...)
}

func appendBytesValue(b []byte, p []byte) []byte {
	return append(appendVarint(b, uint64(len(p))), p...)
}
