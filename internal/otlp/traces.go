package otlp

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Spans: an ExportTraceServiceRequest has the shape of a logs request —
// resource_spans 1 {resource 1, scope_spans 2 {scope 1, spans 2}} — so a
// Builder's spans go into AppendEncodedRequest as its log records do
// (collector/trace/v1/trace_service.proto, trace/v1/trace.proto).
const (
	fSpanTraceID      = 1  // bytes, 16
	fSpanSpanID       = 2  // bytes, 8
	fSpanParentSpanID = 4  // bytes, 8
	fSpanName         = 5  // string
	fSpanKind         = 6  // SpanKind (enum)
	fSpanStart        = 7  // fixed64 start_time_unix_nano
	fSpanEnd          = 8  // fixed64 end_time_unix_nano
	fSpanAttributes   = 9  // repeated KeyValue
	fSpanLinks        = 13 // repeated Link
	fSpanStatus       = 15 // Status
	fSpanFlags        = 16 // fixed32
	fLinkTraceID      = 1
	fLinkSpanID       = 2
	fStatusMessage    = 2
	fStatusCode       = 3
)

// Span kinds and status codes (trace.proto).
const (
	SpanKindUnspecified = 0
	SpanKindInternal    = 1
	SpanKindServer      = 2
	SpanKindClient      = 3
	SpanKindProducer    = 4
	SpanKindConsumer    = 5

	StatusUnset = 0
	StatusOK    = 1
	StatusError = 2
)

// Span starts a span in the Builder, as Record starts a log record: its
// fields by the Span* methods, its attributes by Str, Int, … End ends it.
func (e *Builder) Span() {
	e.open(fScopeLogsLogRecords) // ScopeSpans.spans is field 2 too
	e.frames = append(e.frames, inSpan)
}

// SpanIDs adds the span's trace id, span id and parent span id, each
// unless zero.
func (e *Builder) SpanIDs(traceID [16]byte, spanID, parent [8]byte) {
	if traceID != ([16]byte{}) {
		e.b = appendTag(e.b, fSpanTraceID, protowire.BytesType)
		e.b = appendBytesValue(e.b, traceID[:])
	}
	if spanID != ([8]byte{}) {
		e.b = appendTag(e.b, fSpanSpanID, protowire.BytesType)
		e.b = appendBytesValue(e.b, spanID[:])
	}
	if parent != ([8]byte{}) {
		e.b = appendTag(e.b, fSpanParentSpanID, protowire.BytesType)
		e.b = appendBytesValue(e.b, parent[:])
	}
}

// SpanName adds the span's name (which must be UTF-8).
func (e *Builder) SpanName(s string) { e.b = appendString(e.b, fSpanName, s) }

// SpanKind adds the span's kind, unless unspecified.
func (e *Builder) SpanKind(k int32) {
	if k != 0 {
		e.b = appendTag(e.b, fSpanKind, protowire.VarintType)
		e.b = appendVarint(e.b, uint64(k))
	}
}

// SpanTimes adds the span's start and end, in ns since 1970.
func (e *Builder) SpanTimes(start, end uint64) {
	if start != 0 {
		e.b = appendTag(e.b, fSpanStart, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, start)
	}
	if end != 0 {
		e.b = appendTag(e.b, fSpanEnd, protowire.Fixed64Type)
		e.b = protowire.AppendFixed64(e.b, end)
	}
}

// SpanStatus adds the span's status, unless it is Unset without a message.
func (e *Builder) SpanStatus(code int32, message string) {
	if code == StatusUnset && message == "" {
		return
	}
	e.open(fSpanStatus)
	e.b = appendString(e.b, fStatusMessage, message)
	if code != 0 {
		e.b = appendTag(e.b, fStatusCode, protowire.VarintType)
		e.b = appendVarint(e.b, uint64(code))
	}
	e.close()
}

// SpanLink adds a link to the span of traceID and spanID.
func (e *Builder) SpanLink(traceID [16]byte, spanID [8]byte) {
	e.open(fSpanLinks)
	e.b = appendTag(e.b, fLinkTraceID, protowire.BytesType)
	e.b = appendBytesValue(e.b, traceID[:])
	e.b = appendTag(e.b, fLinkSpanID, protowire.BytesType)
	e.b = appendBytesValue(e.b, spanID[:])
	e.close()
}

// Span is a decoded span: what ParseTraceRequest gives.
type Span struct {
	TraceID, SpanID, ParentSpanID []byte
	Name                          string
	Kind                          int32
	Start, End                    uint64
	Attributes                    []KeyValue
	Links                         []Link
	StatusCode                    int32
	StatusMessage                 string
}

// Link is a decoded span link.
type Link struct{ TraceID, SpanID []byte }

// ResourceSpans are a resource's spans, decoded.
type ResourceSpans struct {
	Resource []KeyValue
	Scope    Scope
	Spans    []Span
}

// ParseTraceRequest decodes an ExportTraceServiceRequest: the test
// servers' side. Unknown fields are skipped.
func ParseTraceRequest(b []byte) ([]ResourceSpans, error) {
	var out []ResourceSpans
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fRequestResourceLogs || typ != protowire.BytesType {
			return nil
		}
		var rs ResourceSpans
		err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if typ != protowire.BytesType {
				return nil
			}
			switch num {
			case fResourceLogsResource:
				var err error
				rs.Resource, err = parseResource(v)
				return err
			case fResourceLogsScopeLogs:
				return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
					if typ != protowire.BytesType {
						return nil
					}
					switch num {
					case fScopeLogsScope:
						var err error
						rs.Scope, err = parseScope(v)
						return err
					case fScopeLogsLogRecords:
						sp, err := parseSpan(v)
						rs.Spans = append(rs.Spans, sp)
						return err
					}
					return nil
				})
			}
			return nil
		})
		out = append(out, rs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ExportTraceServiceRequest: %w", err)
	}
	return out, nil
}

func parseSpan(b []byte) (Span, error) {
	var s Span
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == fSpanTraceID && typ == protowire.BytesType:
			s.TraceID = append([]byte(nil), v...)
		case num == fSpanSpanID && typ == protowire.BytesType:
			s.SpanID = append([]byte(nil), v...)
		case num == fSpanParentSpanID && typ == protowire.BytesType:
			s.ParentSpanID = append([]byte(nil), v...)
		case num == fSpanName && typ == protowire.BytesType:
			s.Name = string(v)
		case num == fSpanKind && typ == protowire.VarintType:
			s.Kind = int32(n)
		case num == fSpanStart && typ == protowire.Fixed64Type:
			s.Start = n
		case num == fSpanEnd && typ == protowire.Fixed64Type:
			s.End = n
		case num == fSpanAttributes && typ == protowire.BytesType:
			kv, err := parseKeyValue(v, 0)
			s.Attributes = append(s.Attributes, kv)
			return err
		case num == fSpanLinks && typ == protowire.BytesType:
			var l Link
			err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch {
				case num == fLinkTraceID && typ == protowire.BytesType:
					l.TraceID = append([]byte(nil), v...)
				case num == fLinkSpanID && typ == protowire.BytesType:
					l.SpanID = append([]byte(nil), v...)
				}
				return nil
			})
			s.Links = append(s.Links, l)
			return err
		case num == fSpanStatus && typ == protowire.BytesType:
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
				switch {
				case num == fStatusMessage && typ == protowire.BytesType:
					s.StatusMessage = string(v)
				case num == fStatusCode && typ == protowire.VarintType:
					s.StatusCode = int32(n)
				}
				return nil
			})
		}
		return nil
	})
	return s, err
}
