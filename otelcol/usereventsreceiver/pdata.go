package usereventsreceiver

import (
	"bytes"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// pdataWriter is export's Writer into the Collector's pdata: the mapping
// writes a record or span straight into what the pipelines take, where
// OTLP's protobuf in between would be written, then read back by pdata,
// which allocates every key and value again. A record or span is written
// into a scratch one, which the batch moves to its resource's place once
// the mapping says which resource that is.
//
// What it keeps of the values is copied: the strings and bytes the
// mapping gives view the sample's record, in a ring written over at once.
// Keys, event and span names and severity texts, which repeat from record
// to record, are the encoder's, which does not change them: they are kept
// as they are (export.NewEncoder).
//
// Where it differs from OTLP's bytes: a key given twice in one record or
// map (an event's field named as one of uetrace's attributes, or two
// fields of one name) is one attribute, of the last value — pdata's maps
// hold one value a key, as OTLP says attributes have — where uetrace
// export sends both (TestPdataDuplicateKeys).
type pdataWriter struct {
	lr     plog.LogRecord
	sp     ptrace.Span
	span   bool // a span is being written, not a log record
	body   bool // the next value is the record's body
	frames []frame
	// last is how many attributes the last record or span had: the room
	// one is given when the mapping does not say (Record's n).
	last int
}

// frame is what holds the values being written: the record's or span's
// attributes or a map (m), or an array (s).
type frame struct {
	m     pcommon.Map
	s     pcommon.Slice
	array bool
}

func newPdataWriter() *pdataWriter {
	return &pdataWriter{lr: plog.NewLogRecord(), sp: ptrace.NewSpan(), last: 8}
}

// Record and Span give the attributes the room the mapping says they take
// at once: grown by doubling, their room would be copied and mostly
// unused.
func (w *pdataWriter) Record(n int) {
	w.span, w.body = false, false
	w.start(w.lr.Attributes(), n)
}

func (w *pdataWriter) Span(n int) {
	w.span, w.body = true, false
	w.start(w.sp.Attributes(), n)
}

func (w *pdataWriter) start(attrs pcommon.Map, n int) {
	if n == 0 {
		n = w.last
	}
	attrs.EnsureCapacity(n)
	w.frames = append(w.frames[:0], frame{m: attrs})
}

func (w *pdataWriter) Discard() {
	w.frames, w.body = w.frames[:0], false
	if w.span {
		w.sp = ptrace.NewSpan()
	} else {
		w.lr = plog.NewLogRecord()
	}
}

func (w *pdataWriter) End() {
	w.frames = w.frames[:len(w.frames)-1]
	if len(w.frames) == 0 {
		w.last = max(w.Len(), 1)
	}
}

func (w *pdataWriter) Depth() int { return len(w.frames) }

func (w *pdataWriter) Len() int {
	if w.span {
		return w.sp.Attributes().Len()
	}
	return w.lr.Attributes().Len()
}

func (w *pdataWriter) Time(t, observed uint64) {
	if t != 0 {
		w.lr.SetTimestamp(pcommon.Timestamp(t))
	}
	if observed != 0 {
		w.lr.SetObservedTimestamp(pcommon.Timestamp(observed))
	}
}

func (w *pdataWriter) Severity(num int32, text string) {
	if num != 0 {
		w.lr.SetSeverityNumber(plog.SeverityNumber(num))
	}
	if text != "" {
		w.lr.SetSeverityText(text)
	}
}

func (w *pdataWriter) EventName(s string) {
	if s != "" {
		w.lr.SetEventName(s)
	}
}

func (w *pdataWriter) TraceContext(traceID [16]byte, spanID [8]byte, flags uint32) {
	if flags != 0 {
		w.lr.SetFlags(plog.LogRecordFlags(flags))
	}
	if traceID != ([16]byte{}) {
		w.lr.SetTraceID(traceID)
	}
	if spanID != ([8]byte{}) {
		w.lr.SetSpanID(spanID)
	}
}

func (w *pdataWriter) Body() { w.body = true }

func (w *pdataWriter) SpanIDs(traceID [16]byte, spanID, parent [8]byte) {
	if traceID != ([16]byte{}) {
		w.sp.SetTraceID(traceID)
	}
	if spanID != ([8]byte{}) {
		w.sp.SetSpanID(spanID)
	}
	if parent != ([8]byte{}) {
		w.sp.SetParentSpanID(parent)
	}
}

func (w *pdataWriter) SpanName(s string) {
	if s != "" {
		w.sp.SetName(s)
	}
}

func (w *pdataWriter) SpanKind(k int32) { w.sp.SetKind(ptrace.SpanKind(k)) }

func (w *pdataWriter) SpanTimes(start, end uint64) {
	if start != 0 {
		w.sp.SetStartTimestamp(pcommon.Timestamp(start))
	}
	if end != 0 {
		w.sp.SetEndTimestamp(pcommon.Timestamp(end))
	}
}

func (w *pdataWriter) SpanStatus(code int32, message string) {
	w.sp.Status().SetCode(ptrace.StatusCode(code))
	if message != "" {
		w.sp.Status().SetMessage(strings.Clone(message))
	}
}

func (w *pdataWriter) SpanLink(traceID [16]byte, spanID [8]byte) {
	l := w.sp.Links().AppendEmpty()
	l.SetTraceID(traceID)
	l.SetSpanID(spanID)
}

// value is where the next value goes: the body, an array's new element,
// or the attribute key of the record, span or map being written.
func (w *pdataWriter) value(key string) pcommon.Value {
	if w.body {
		w.body = false
		return w.lr.Body()
	}
	f := &w.frames[len(w.frames)-1]
	if f.array {
		return f.s.AppendEmpty()
	}
	return f.m.PutEmpty(key)
}

func (w *pdataWriter) Str(key, s string)             { w.value(key).SetStr(strings.Clone(s)) }
func (w *pdataWriter) StrConst(key, s string)        { w.value(key).SetStr(s) }
func (w *pdataWriter) StrBytes(key string, s []byte) { w.value(key).SetStr(string(s)) }
func (w *pdataWriter) Int(key string, i int64)       { w.value(key).SetInt(i) }
func (w *pdataWriter) Double(key string, f float64)  { w.value(key).SetDouble(f) }
func (w *pdataWriter) Bool(key string, v bool)       { w.value(key).SetBool(v) }
func (w *pdataWriter) Empty(key string)              { w.value(key) }

func (w *pdataWriter) BytesValue(key string, p []byte) {
	w.value(key).SetEmptyBytes().FromRaw(p) // a copy
}

// MapStart and ArrayStart give the map or array its n entries' room at
// once (n is the Writer's hint, 0 when not known).
func (w *pdataWriter) MapStart(key string, n int) {
	m := w.value(key).SetEmptyMap()
	m.EnsureCapacity(n)
	w.frames = append(w.frames, frame{m: m})
}

func (w *pdataWriter) ArrayStart(key string, n int) {
	s := w.value(key).SetEmptySlice()
	s.EnsureCapacity(n)
	w.frames = append(w.frames, frame{s: s, array: true})
}

// pdataBatch is what the receiver has mapped and not yet given to its
// pipelines: logs and spans grouped by resource, in pdata, and the
// otlp_metrics records' requests, copied, to be read by pdata one by one.
type pdataBatch struct {
	logs    plog.Logs
	traces  ptrace.Traces
	logsBy  map[export.Resource]plog.LogRecordSlice
	spansBy map[export.Resource]ptrace.SpanSlice
	metrics [][]byte
	count   [3]int
	n       int
	kv      []otlp.KeyValue // scratch for a resource's attributes
}

func newPdataBatch() *pdataBatch {
	return &pdataBatch{logs: plog.NewLogs(), traces: ptrace.NewTraces(),
		logsBy: map[export.Resource]plog.LogRecordSlice{}, spansBy: map[export.Resource]ptrace.SpanSlice{}}
}

// mapper maps samples into a pdataBatch, with export's Encoder.
type mapper struct {
	w             *pdataWriter
	enc           *export.Encoder
	host, service string
	scope         otlp.Scope
	b             *pdataBatch
}

func newMapper(host, service string, scope otlp.Scope) *mapper {
	w := newPdataWriter()
	return &mapper{w: w, enc: export.NewEncoder(w), host: host, service: service, scope: scope, b: newPdataBatch()}
}

// add maps a sample into the batch.
func (m *mapper) add(s *perfdata.Sample, observed uint64) {
	b := m.b
	sig, res, metrics := m.enc.Encode(s, observed)
	switch sig {
	case otlp.Logs:
		dst, ok := b.logsBy[res]
		if !ok {
			rl := b.logs.ResourceLogs().AppendEmpty()
			m.putResource(rl.Resource().Attributes(), s, res)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(m.scope.Name)
			sl.Scope().SetVersion(m.scope.Version)
			dst = sl.LogRecords()
			b.logsBy[res.Clone()] = dst // res views the sample's record
		}
		m.w.lr.MoveTo(dst.AppendEmpty())
	case otlp.Traces:
		dst, ok := b.spansBy[res]
		if !ok {
			rs := b.traces.ResourceSpans().AppendEmpty()
			m.putResource(rs.Resource().Attributes(), s, res)
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(m.scope.Name)
			ss.Scope().SetVersion(m.scope.Version)
			dst = ss.Spans()
			b.spansBy[res.Clone()] = dst
		}
		m.w.sp.MoveTo(dst.AppendEmpty())
	case otlp.Metrics:
		b.metrics = append(b.metrics, bytes.Clone(metrics))
	}
	b.count[sig]++
	b.n++
}

// putResource writes the resource's attributes, as export gives them.
func (m *mapper) putResource(attrs pcommon.Map, s *perfdata.Sample, res export.Resource) {
	m.b.kv = res.AppendAttributes(m.b.kv[:0], export.ProcessName(s), m.host, m.service)
	attrs.EnsureCapacity(len(m.b.kv))
	for _, kv := range m.b.kv {
		switch kv.Value.Kind {
		case otlp.Int:
			attrs.PutInt(kv.Key, kv.Value.AsInt())
		default:
			attrs.PutStr(kv.Key, strings.Clone(kv.Value.Str))
		}
	}
}

// take returns the batch and starts a new one.
func (m *mapper) take() *pdataBatch {
	b := m.b
	m.b = newPdataBatch()
	return b
}
