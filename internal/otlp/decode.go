package otlp

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
)

// maxDepth bounds the nesting of AnyValues that ParseRequest follows: a
// hostile message cannot recurse it off the stack.
const maxDepth = 64

// PartialSuccess is an ExportLogsServiceResponse's partial_success: how
// many records the server rejected, and why.
type PartialSuccess struct {
	RejectedLogRecords int64
	ErrorMessage       string
}

// ParseResponse decodes an ExportLogsServiceResponse. Unknown fields are
// skipped, as protobuf readers do.
func ParseResponse(b []byte) (PartialSuccess, error) {
	var ps PartialSuccess
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		if num != fResponsePartialSuccess || typ != protowire.BytesType {
			return nil
		}
		return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
			switch {
			case num == fPartialRejected && typ == protowire.VarintType:
				ps.RejectedLogRecords = int64(n)
			case num == fPartialErrorMessage && typ == protowire.BytesType:
				ps.ErrorMessage = string(v)
			}
			return nil
		})
	})
	if err != nil {
		return PartialSuccess{}, fmt.Errorf("ExportLogsServiceResponse: %w", err)
	}
	return ps, nil
}

// Status is a google.rpc.Status (google/rpc/status.proto: code 1, message
// 2, details 3), with the delay of a google.rpc.RetryInfo among its
// details (google/rpc/error_details.proto: retry_delay 1, a
// google.protobuf.Duration of seconds 1 and nanos 2).
type Status struct {
	Code       int32
	Message    string
	RetryDelay time.Duration // 0: no RetryInfo
}

const retryInfoType = "type.googleapis.com/google.rpc.RetryInfo"

// ParseStatus decodes a google.rpc.Status: a gRPC server's
// grpc-status-details-bin trailer, or an OTLP/HTTP error response's body.
func ParseStatus(b []byte) (Status, error) {
	var st Status
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			st.Code = int32(n)
		case num == 2 && typ == protowire.BytesType:
			st.Message = string(v)
		case num == 3 && typ == protowire.BytesType:
			// google.protobuf.Any: type_url 1, value 2.
			var url string
			var value []byte
			if err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if typ == protowire.BytesType && num == 1 {
					url = string(v)
				} else if typ == protowire.BytesType && num == 2 {
					value = v
				}
				return nil
			}); err != nil {
				return err
			}
			if url != retryInfoType {
				return nil
			}
			return fields(value, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 || typ != protowire.BytesType {
					return nil
				}
				var secs, nanos int64
				if err := fields(v, func(num protowire.Number, typ protowire.Type, _ []byte, n uint64) error {
					if typ == protowire.VarintType && num == 1 {
						secs = int64(n)
					} else if typ == protowire.VarintType && num == 2 {
						nanos = int64(int32(n))
					}
					return nil
				}); err != nil {
					return err
				}
				// A delay past a day is no delay a sender can honour:
				// it is capped where the caller caps its backoff.
				secs = min(max(secs, 0), 86400)
				st.RetryDelay = time.Duration(secs)*time.Second + time.Duration(max(nanos, 0))
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("google.rpc.Status: %w", err)
	}
	return st, nil
}

// AppendStatus encodes a google.rpc.Status, with a RetryInfo detail when
// st.RetryDelay is set: what test servers send.
func AppendStatus(b []byte, st Status) []byte {
	if st.Code != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(st.Code)))
	}
	b = appendString(b, 2, st.Message)
	if st.RetryDelay > 0 {
		b = appendMessage(b, 3, func(b []byte) []byte {
			b = appendString(b, 1, retryInfoType)
			return appendMessage(b, 2, func(b []byte) []byte {
				return appendMessage(b, 1, func(b []byte) []byte {
					b = protowire.AppendTag(b, 1, protowire.VarintType)
					b = protowire.AppendVarint(b, uint64(st.RetryDelay/time.Second))
					if ns := st.RetryDelay % time.Second; ns != 0 {
						b = protowire.AppendTag(b, 2, protowire.VarintType)
						b = protowire.AppendVarint(b, uint64(ns))
					}
					return b
				})
			})
		})
	}
	return b
}

// AppendResponse encodes an ExportLogsServiceResponse: what test servers
// send.
func AppendResponse(b []byte, ps PartialSuccess) []byte {
	if ps == (PartialSuccess{}) {
		return b
	}
	return appendMessage(b, fResponsePartialSuccess, func(b []byte) []byte {
		if ps.RejectedLogRecords != 0 {
			b = protowire.AppendTag(b, fPartialRejected, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(ps.RejectedLogRecords))
		}
		return appendString(b, fPartialErrorMessage, ps.ErrorMessage)
	})
}

// ParseRequest decodes an ExportLogsServiceRequest: the test servers'
// side. Strings are copied; unknown fields are skipped.
func ParseRequest(b []byte) ([]ResourceLogs, error) {
	var rls []ResourceLogs
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != fRequestResourceLogs || typ != protowire.BytesType {
			return nil
		}
		rl, err := parseResourceLogs(v)
		rls = append(rls, rl)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ExportLogsServiceRequest: %w", err)
	}
	return rls, nil
}

func parseResourceLogs(b []byte) (ResourceLogs, error) {
	var rl ResourceLogs
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fResourceLogsResource:
			var err error
			rl.Resource, err = parseResource(v)
			return err
		case fResourceLogsScopeLogs:
			return parseScopeLogs(v, &rl)
		}
		return nil
	})
	return rl, err
}

// parseScopeLogs reads a ScopeLogs into rl: its scope, and its records
// added to rl's.
func parseScopeLogs(b []byte, rl *ResourceLogs) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fScopeLogsScope:
			var err error
			rl.Scope, err = parseScope(v)
			return err
		case fScopeLogsLogRecords:
			r, err := parseRecord(v)
			rl.Records = append(rl.Records, r)
			return err
		}
		return nil
	})
}

// parseResource reads a Resource's attributes.
func parseResource(b []byte) ([]KeyValue, error) {
	var kvs []KeyValue
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == fResourceAttributes && typ == protowire.BytesType {
			kv, err := parseKeyValue(v, 0)
			kvs = append(kvs, kv)
			return err
		}
		return nil
	})
	return kvs, err
}

// parseScope reads an InstrumentationScope.
func parseScope(b []byte) (Scope, error) {
	var sc Scope
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fScopeName:
			sc.Name = string(v)
		case fScopeVersion:
			sc.Version = string(v)
		case fScopeAttributes:
			kv, err := parseKeyValue(v, 0)
			sc.Attributes = append(sc.Attributes, kv)
			return err
		}
		return nil
	})
	return sc, err
}

func parseRecord(b []byte) (Record, error) {
	var r Record
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == fLogTime && typ == protowire.Fixed64Type:
			r.Time = n
		case num == fLogObservedTime && typ == protowire.Fixed64Type:
			r.ObservedTime = n
		case num == fLogSeverityNumber && typ == protowire.VarintType:
			r.SeverityNumber = int32(n)
		case num == fLogSeverityText && typ == protowire.BytesType:
			r.SeverityText = string(v)
		case num == fLogEventName && typ == protowire.BytesType:
			r.EventName = string(v)
		case num == fLogBody && typ == protowire.BytesType:
			var err error
			r.Body, err = parseAny(v, 0)
			return err
		case num == fLogAttributes && typ == protowire.BytesType:
			kv, err := parseKeyValue(v, 0)
			r.Attributes = append(r.Attributes, kv)
			return err
		case num == fLogFlags && typ == protowire.Fixed32Type:
			r.Flags = uint32(n)
		case num == fLogTraceID && typ == protowire.BytesType:
			r.TraceID = append([]byte(nil), v...)
		case num == fLogSpanID && typ == protowire.BytesType:
			r.SpanID = append([]byte(nil), v...)
		}
		return nil
	})
	return r, err
}

func parseKeyValue(b []byte, depth int) (KeyValue, error) {
	var kv KeyValue
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fKVKey:
			kv.Key = string(v)
		case fKVValue:
			var err error
			kv.Value, err = parseAny(v, depth+1)
			return err
		}
		return nil
	})
	return kv, err
}

func parseAny(b []byte, depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, fmt.Errorf("values nested deeper than %d: %w", maxDepth, unix.EINVAL)
	}
	var val Value
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch {
		case num == fAnyString && typ == protowire.BytesType:
			val = StringValue(string(v))
		case num == fAnyBool && typ == protowire.VarintType:
			val = BoolValue(n != 0)
		case num == fAnyInt && typ == protowire.VarintType:
			val = Value{Kind: Int, Num: n}
		case num == fAnyDouble && typ == protowire.Fixed64Type:
			val = Value{Kind: Double, Num: n}
		case num == fAnyBytes && typ == protowire.BytesType:
			val = BytesValue(append([]byte{}, v...))
		case num == fAnyArray && typ == protowire.BytesType:
			val = Value{Kind: Array, Array: []Value{}}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != fValues || typ != protowire.BytesType {
					return nil
				}
				e, err := parseAny(v, depth+1)
				val.Array = append(val.Array, e)
				return err
			})
		case num == fAnyKVList && typ == protowire.BytesType:
			val = Value{Kind: Map, Map: []KeyValue{}}
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != fValues || typ != protowire.BytesType {
					return nil
				}
				kv, err := parseKeyValue(v, depth+1)
				val.Map = append(val.Map, kv)
				return err
			})
		}
		return nil
	})
	return val, err
}

// fields calls f for each field of message b: its number, wire type, and
// its bytes (BytesType) or number (varint, fixed32, fixed64). Groups are
// skipped.
func fields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return fmt.Errorf("bad tag at %d bytes from the end: %w: %w", len(b), protowire.ParseError(tn), unix.EBADMSG)
		}
		b = b[tn:]
		var (
			v []byte
			n uint64
			m int
		)
		switch typ {
		case protowire.VarintType:
			n, m = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, m = protowire.ConsumeFixed32(b)
			n = uint64(x)
		case protowire.Fixed64Type:
			n, m = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, m = protowire.ConsumeBytes(b)
		default:
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return fmt.Errorf("field %d: %w: %w", num, protowire.ParseError(m), unix.EBADMSG)
		}
		b = b[m:]
		if typ == protowire.StartGroupType {
			continue
		}
		if err := f(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}
