package export

import (
	"strings"

	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// A Writer is what samples are mapped into, a call for each field, as
// otlp.Builder takes them: OTLP's protobuf for uetrace export (an
// otlp.Builder), the Collector's pdata for its userevents receiver
// (package otelcol/usereventsreceiver), so that both have the one mapping
// without a conversion between them.
//
// Calls nest as the values do: Record(n) or Span(n) ... End, and inside
// them Str, Int, … with a key, MapStart(key, n) ... End, ArrayStart(key,
// n) ... End (n: how many attributes or entries follow, when known, else
// 0 — a hint, for the room to give them; an array's elements' keys are
// ignored); Body makes the next value the record's body.
//
// Values — the strings and bytes of Str, StrBytes and BytesValue, and a
// span's status message — may be views of the sample's record: a Writer
// that keeps them past the call copies them. What repeats from record to
// record does not view it when the Writer is an Encoder's (NewEncoder):
// keys, event names, span names and severity texts are the encoder's own
// strings, which do not change, and a Writer may keep them as they are.
type Writer interface {
	// Record starts a log record, Span a span; End ends them. Discard
	// forgets the record or span being written, what is open in it
	// included: a record found bad part way is written again another way.
	Record(n int)
	Span(n int)
	Discard()
	End()
	// Depth is how many records, spans, maps and arrays are open.
	Depth() int
	// Len is how many attributes the open record or span has (0 from a
	// Writer that does not count them): the encoder gives the next record
	// of the same layout that room.
	Len() int

	// A log record's fields; 0 and "" are left out.
	Time(t, observed uint64)
	Severity(num int32, text string)
	EventName(s string)
	TraceContext(traceID [16]byte, spanID [8]byte, flags uint32)
	Body()

	// A span's fields.
	SpanIDs(traceID [16]byte, spanID, parent [8]byte)
	SpanName(s string)
	SpanKind(k int32)
	SpanTimes(start, end uint64)
	SpanStatus(code int32, message string)
	SpanLink(traceID [16]byte, spanID [8]byte)

	// Values: an attribute of a record, span or map; an array's element;
	// the body.
	Str(key, s string)
	// StrConst is Str of a string that does not view the record and does
	// not change (uetrace's own: a tracepoint's and a provider's names),
	// which a Writer may keep as it is.
	StrConst(key, s string)
	StrBytes(key string, s []byte) // s is UTF-8
	Int(key string, i int64)
	Double(key string, f float64)
	Bool(key string, v bool)
	BytesValue(key string, p []byte)
	Empty(key string)
	MapStart(key string, n int)
	ArrayStart(key string, n int)
}

// otlpWriter is a Writer of OTLP protobuf: an otlp.Builder that takes back
// a discarded record.
type otlpWriter struct {
	otlp.Builder
	start otlp.Mark // where the record or span being written starts
}

func (w *otlpWriter) Record(int) {
	w.start = w.Mark()
	w.Builder.Record()
}

func (w *otlpWriter) Span(int) {
	w.start = w.Mark()
	w.Builder.Span()
}

// Len is 0: the Builder needs no room given.
func (w *otlpWriter) Len() int { return 0 }

func (w *otlpWriter) Discard() { w.Truncate(w.start) }

// MapStart and ArrayStart are the Builder's, which needs no count.
func (w *otlpWriter) MapStart(key string, _ int)   { w.Builder.MapStart(key) }
func (w *otlpWriter) ArrayStart(key string, _ int) { w.Builder.ArrayStart(key) }

// StrConst is Str: the Builder copies every string as it is given.
func (w *otlpWriter) StrConst(key, s string) { w.Str(key, s) }

// An Encoder maps samples into a Writer: what a sample becomes — a log
// record, a span or an otlp_metrics request — and the resource it is of.
// It is for one goroutine at a time; its memory serves every sample.
type Encoder struct {
	e encoder
}

// NewEncoder makes an Encoder writing into w. The keys and names it gives
// w do not view the samples' records: w may keep them (see Writer).
func NewEncoder(w Writer) *Encoder { return &Encoder{e: encoder{Writer: w, keep: true}} }

// Encode maps a sample, observed at observed (ns since 1970): a log record
// or a span written whole into the Writer, or an otlp_metrics record's
// ExportMetricsServiceRequest returned as it was written (nothing is
// written then; it views s.Raw). It returns the signal and the resource
// the sample is of, which views s.Raw too.
func (e *Encoder) Encode(s *perfdata.Sample, observed uint64) (sig otlp.Signal, res Resource, metrics []byte) {
	return encodeSample(&e.e, s, observed)
}

// Resource is what tells resources apart: the process a sample is of and,
// for a Common Schema record, the service it names (its ext_cloud_role
// and ext_cloud_roleInstance, the SDK's service.name and
// service.instance.id). A Resource from Encode views the sample's record:
// one kept past the sample is a Clone.
type Resource struct {
	PID            uint32
	Role, Instance string
}

// ProcessName is the name of a sample's process, its resource's
// process.executable.name: its main thread's, else the sample's thread's.
func ProcessName(s *perfdata.Sample) string {
	if s.ProcessComm != "" {
		return s.ProcessComm
	}
	return s.Comm
}

// Clone is r with its strings copied.
func (r Resource) Clone() Resource {
	return Resource{PID: r.PID, Role: strings.Clone(r.Role), Instance: strings.Clone(r.Instance)}
}

// AppendAttributes appends the resource's attributes to kv: host.name,
// process.pid, process.executable.name (comm, the process's name, unless
// ""), service.name (the role a Common Schema record names, else service
// unless "") and service.instance.id.
func (r Resource) AppendAttributes(kv []otlp.KeyValue, comm, host, service string) []otlp.KeyValue {
	kv = append(kv,
		otlp.KeyValue{Key: "host.name", Value: otlp.StringValue(host)},
		otlp.KeyValue{Key: "process.pid", Value: otlp.IntValue(int64(r.PID))},
	)
	if comm != "" {
		kv = append(kv, otlp.KeyValue{Key: "process.executable.name", Value: otlp.StringValue(comm)})
	}
	switch {
	case r.Role != "":
		kv = append(kv, otlp.KeyValue{Key: "service.name", Value: otlp.StringValue(r.Role)})
	case service != "":
		kv = append(kv, otlp.KeyValue{Key: "service.name", Value: otlp.StringValue(service)})
	}
	if r.Instance != "" {
		kv = append(kv, otlp.KeyValue{Key: "service.instance.id", Value: otlp.StringValue(r.Instance)})
	}
	return kv
}
