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
// What it keeps is copied: the strings and bytes the mapping gives view
// the sample's record, in a ring written over at once. Keys, event and
// span names and severity texts, which repeat from record to record, are
// copied once (interner).
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
	strs   interner
	// keys are the keys of the last record or span, in the order they
	// were written, and nkeys how many of this one's were: a record of the
	// same event as the one before has the same, and its keys are found
	// here without a lookup in strs.
	keys  []string
	nkeys int
	// attrs is the room a record's or span's attributes are given at
	// once: the most the records of this window of 64 and of the last
	// had, so that neither a stream of one event nor one of several in
	// turn grows them by copying (each growth doubles the room, which
	// costs more than a few attributes too many).
	attrs, winMax, records int
}

// frame is what holds the values being written: the record's or span's
// attributes or a map (m), or an array (s).
type frame struct {
	m     pcommon.Map
	s     pcommon.Slice
	array bool
}

func newPdataWriter() *pdataWriter {
	return &pdataWriter{lr: plog.NewLogRecord(), sp: ptrace.NewSpan(), strs: interner{}, attrs: 8}
}

func (w *pdataWriter) Record() {
	w.span, w.body, w.nkeys = false, false, 0
	attrs := w.lr.Attributes()
	attrs.EnsureCapacity(w.attrs)
	w.frames = append(w.frames[:0], frame{m: attrs})
}

func (w *pdataWriter) Span() {
	w.span, w.body, w.nkeys = true, false, 0
	attrs := w.sp.Attributes()
	attrs.EnsureCapacity(w.attrs)
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
	if len(w.frames) > 0 {
		return
	}
	n := w.lr.Attributes().Len()
	if w.span {
		n = w.sp.Attributes().Len()
	}
	w.attrs, w.winMax = max(w.attrs, n), max(w.winMax, n)
	if w.records++; w.records%64 == 0 {
		w.attrs, w.winMax = max(w.winMax, 4), 0
	}
}

func (w *pdataWriter) Depth() int { return len(w.frames) }

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
		w.lr.SetSeverityText(w.strs.get(text))
	}
}

func (w *pdataWriter) EventName(s string) {
	if s != "" {
		w.lr.SetEventName(w.strs.get(s))
	}
}

func (w *pdataWriter) EventNameBytes(s []byte) {
	if len(s) > 0 {
		w.lr.SetEventName(w.strs.getBytes(s))
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
		w.sp.SetName(w.strs.get(s))
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
	return f.m.PutEmpty(w.key(key))
}

// key is a copy of key to keep: the last record's at this place, or the
// interner's.
func (w *pdataWriter) key(key string) string {
	i := w.nkeys
	w.nkeys++
	if i < len(w.keys) && w.keys[i] == key {
		return w.keys[i]
	}
	k := w.strs.get(key)
	if i < len(w.keys) {
		w.keys[i] = k
	} else if i < maxInterned {
		w.keys = append(w.keys, k)
	}
	return k
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

// maxInterned bounds an interner: the strings that repeat are few, and a
// program that names its fields anew each time must not grow the
// receiver.
const maxInterned = 4096

// interner keeps one copy of each string it is given, up to maxInterned;
// past them, a string it does not hold is copied each time.
type interner map[string]string

func (in interner) get(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if len(in) < maxInterned {
		in[v] = v
	}
	return v
}

func (in interner) getBytes(b []byte) string {
	if v, ok := in[string(b)]; ok { // the lookup does not copy b
		return v
	}
	v := string(b)
	if len(in) < maxInterned {
		in[v] = v
	}
	return v
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
