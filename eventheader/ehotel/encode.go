package ehotel

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/commonschema"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
)

// The names and constants of the Rust exporter
// (opentelemetry-user-events-logs/src/logs/exporter.rs).
const (
	// EventName is the event name of every record: DefaultEventNameCallback
	// returns DEFAULT_LOG_TYPE_NAME.
	EventName = "Log"
	// CSVersion is __csver__, the Common Schema version: CS_VERSION, 0x400.
	CSVersion = commonschema.Version
	// eventIDKey is the attribute whose int64 value becomes PartB's
	// eventId instead of a PartC field: EVENT_ID.
	eventIDKey = "event_id"
	// maxStructFields is the most fields a struct can have: its count is
	// the format byte's 7 bits.
	maxStructFields = 127
)

// writer is one goroutine's event under construction: the builder and a
// scratch buffer for the text it formats (time, ids, JSON).
type writer struct {
	b   ehprovider.Builder
	buf []byte
}

// build builds r's event for tp in w.b, in the Rust exporter's order
// (export_log_data): __csver__, PartA, PartC, PartB.
func (w *writer) build(e *Exporter, tp *ehprovider.Tracepoint, r *sdklog.Record) error {
	b := &w.b
	b.Reset(tp, EventName)
	b.AddUint32("__csver__", CSVersion, eventheader.FormatUnsignedInt, 0)

	// PartA (build_part_a).
	var rf *resourceFields
	if res := r.Resource(); res != nil {
		rf = e.res.fields(res)
	}
	traceID, spanID := r.TraceID(), r.SpanID()
	hasTrace := traceID.IsValid() || spanID.IsValid()
	nA := 1
	if hasTrace {
		nA += 2
	}
	if rf != nil && rf.hasRole {
		nA++
	}
	if rf != nil && rf.hasInstance {
		nA++
	}
	b.StructField("PartA", nA, 0)
	t := r.Timestamp()
	if t.IsZero() {
		t = r.ObservedTimestamp()
	}
	if t.IsZero() {
		t = time.Now()
	}
	w.buf = appendTime(w.buf[:0], t)
	w.addStringBytes("time", w.buf)
	if hasTrace {
		w.buf = hex.AppendEncode(w.buf[:0], traceID[:])
		w.addStringBytes("ext_dt_traceId", w.buf)
		w.buf = hex.AppendEncode(w.buf[:0], spanID[:])
		w.addStringBytes("ext_dt_spanId", w.buf)
	}
	if rf != nil && rf.hasRole {
		b.AddString("ext_cloud_role", rf.role, eventheader.FormatDefault, 0)
	}
	if rf != nil && rf.hasInstance {
		b.AddString("ext_cloud_roleInstance", rf.instance, eventheader.FormatDefault, 0)
	}

	// PartC: the attributes but an int64 event_id, then the opted-in
	// resource attributes; no PartC when there are none.
	nC := 0
	var eventID int64
	hasEventID := false
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		if kv.Key == eventIDKey && kv.Value.Type() == attribute.INT64 {
			eventID, hasEventID = kv.Value.AsInt64(), true
		} else {
			nC++
		}
		return true
	})
	if rf != nil {
		nC += len(rf.attrs)
	}
	if nC > 0 {
		// Rust counts PartC's fields in a u8 and masks it with 0x7f, which
		// garbles events of more than 127; this writes the first 127.
		nC = min(nC, maxStructFields)
		b.StructField("PartC", nC, 0)
		left := nC
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if kv.Key == eventIDKey && kv.Value.Type() == attribute.INT64 {
				return true
			}
			w.addValue(string(kv.Key), kv.Value)
			left--
			return left > 0
		})
		if rf != nil {
			for _, kv := range rf.attrs {
				if left == 0 {
					break
				}
				w.addValue(string(kv.Key), kv.Value)
				left--
			}
		}
	}

	// PartB.
	body := r.Body()
	hasBody := body.Type() != attribute.EMPTY
	sevText := r.SeverityText()
	name := r.EventName()
	hasName := strings.TrimSpace(name) != ""
	nB := 2 // _typeName, severityNumber
	for _, has := range [...]bool{hasBody, sevText != "", hasEventID, hasName} {
		if has {
			nB++
		}
	}
	b.StructField("PartB", nB, 0)
	b.AddString("_typeName", EventName, eventheader.FormatDefault, 0)
	if hasBody {
		w.addValue("body", body)
	}
	b.AddUint16("severityNumber", uint16(int16(r.Severity())), eventheader.FormatSignedInt, 0)
	if sevText != "" {
		b.AddString("severityText", sevText, eventheader.FormatDefault, 0)
	}
	if hasEventID {
		b.AddInt64("eventId", eventID, 0)
	}
	if hasName {
		b.AddString("name", name, eventheader.FormatDefault, 0)
	}

	return w.check()
}

// check says whether the event built is one to write: no builder error,
// and within the Rust builder's size limit, so that it fits a perf sample.
func (w *writer) check() error {
	if err := w.b.Err(); err != nil {
		return err
	}
	_, meta, data, err := w.b.Parts(w.buf[:0])
	if err != nil {
		return err
	}
	if n := len(meta) + len(data); n > maxPayload {
		return fmt.Errorf("event of %d bytes of metadata and data, at most %d: %w", n, maxPayload, unix.ERANGE)
	}
	return nil
}

// fieldName is an attribute key as a field name: the format reserves ';'
// for the name's attributes ("name;tag=value") and ends the name at a NUL,
// so both are written as '_' (the Rust exporter writes the key as it is,
// which decoders then split or cut).
func fieldName(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == ';' || key[i] == 0 {
			b := []byte(key)
			for j := i; j < len(b); j++ {
				if b[j] == ';' || b[j] == 0 {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return key
}

// addStringBytes adds a counted UTF-8 string field from bytes.
func (w *writer) addStringBytes(name string, s []byte) {
	w.b.Field(name, eventheader.EncodingStringLength16Char8, eventheader.FormatDefault, 0)
	w.b.AppendCounted(eventheader.EncodingStringLength16Char8, s)
}

// addValue adds a field for an attribute value or a body. The Rust
// exporter's kinds keep its encodings (add_attribute_to_event, and the
// body in export_log_data): bool value8 boolean, int64 value64 signed,
// float64 value64 float, string a counted string. Where Rust writes an
// empty string — every other kind — this writes the value: bytes as
// counted binary (shown as hex), and slices, maps and the empty value as a
// counted string of format StringJSON holding the value's JSON (see the
// package doc).
func (w *writer) addValue(name string, v attribute.Value) {
	b := &w.b
	name = fieldName(name)
	switch v.Type() {
	case attribute.BOOL:
		b.AddBool(name, v.AsBool(), 0)
	case attribute.INT64:
		b.AddInt64(name, v.AsInt64(), 0)
	case attribute.FLOAT64:
		b.AddFloat64(name, v.AsFloat64(), 0)
	case attribute.STRING:
		b.AddString(name, v.AsString(), eventheader.FormatDefault, 0)
	case attribute.BYTESLICE:
		b.AddBinary(name, v.AsByteSlice(), eventheader.FormatDefault, 0)
	case attribute.EMPTY:
		// The JSON rule's null: OpenTelemetry's own representation of an
		// empty value is "", which a string attribute has too.
		b.AddString(name, "null", eventheader.FormatStringJSON, 0)
	default:
		// Slices and maps: OpenTelemetry's "AnyValue representation for
		// non-OTLP protocols", JSON, which attribute.Value.String gives.
		b.AddString(name, v.String(), eventheader.FormatStringJSON, 0)
	}
}

// appendTime appends t in UTC as chrono's to_rfc3339_opts(AutoSi, true)
// does (format_event_time in
// opentelemetry-user-events-logs/src/logs/exporter.rs; write_rfc3339 in
// chrono's src/format/formatting.rs): "2006-01-02T15:04:05" — a year
// outside 0..9999 signed and padded to 4 digits, "+10000", "-0001" — then
// as many fractional digits as keep every non-zero one, none, 3, 6 or 9,
// then "Z".
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	switch {
	case year < 0:
		dst = append(dst, '-')
		dst = appendDigits(dst, uint64(-year), 4)
	case year > 9999:
		dst = append(dst, '+')
		dst = appendDigits(dst, uint64(year), 4)
	default:
		dst = appendDigits(dst, uint64(year), 4)
	}
	dst = append(dst, '-')
	dst = appendDigits(dst, uint64(month), 2)
	dst = append(dst, '-')
	dst = appendDigits(dst, uint64(day), 2)
	dst = append(dst, 'T')
	dst = appendDigits(dst, uint64(hour), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, uint64(minute), 2)
	dst = append(dst, ':')
	dst = appendDigits(dst, uint64(sec), 2)
	ns := t.Nanosecond()
	switch {
	case ns == 0:
	case ns%1_000_000 == 0:
		dst = appendFrac(dst, ns/1_000_000, 3)
	case ns%1_000 == 0:
		dst = appendFrac(dst, ns/1_000, 6)
	default:
		dst = appendFrac(dst, ns, 9)
	}
	return append(dst, 'Z')
}

// appendDigits appends v in decimal, zero-padded to at least width digits.
func appendDigits(dst []byte, v uint64, width int) []byte {
	var d [20]byte
	i := len(d)
	for v > 0 || len(d)-i < width {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, d[i:]...)
}

func appendFrac(dst []byte, v, digits int) []byte {
	return appendDigits(append(dst, '.'), uint64(v), digits)
}
