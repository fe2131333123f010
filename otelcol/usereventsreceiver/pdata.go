package usereventsreceiver

import (
	"bytes"
	"strings"
	"unsafe"

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
// straight into its batch, at the end of the records of the resource the
// last one was of (dst): the mapping says which resource a record is of
// only once it is written, and it is nearly always the last one's — the
// record is moved to its place when it is not. A span is written into a
// scratch one, moved to its resource's place.
//
// What it keeps of the values is copied: the strings and bytes the
// mapping gives view the sample's record, in a ring written over at once.
// Strings are copied into chunks shared by many (strs), not allocated
// each: each allocation is work, and garbage collected. Keys, event and
// span names and severity texts, which repeat from record to record, are
// the encoder's, which does not change them: they are kept as they are
// (export.NewEncoder).
//
// Where it differs from OTLP's bytes: a key given twice in one record or
// map (an event's field named as one of uetrace's attributes, or two
// fields of one name) is one attribute, of the last value — pdata's maps
// hold one value a key, as OTLP says attributes have — where uetrace
// export sends both (TestPdataDuplicateKeys).
type pdataWriter struct {
	lr plog.LogRecord // the record being written
	// dst is where a record is written, the end of the records of a
	// resource, when hasDst; else it is written into scratch. inDst says
	// that lr is dst's last record; reuse, that it was discarded, and the
	// record written again goes in its place.
	dst          plog.LogRecordSlice
	hasDst       bool
	inDst, reuse bool
	scratch      plog.LogRecord
	sp           ptrace.Span
	span         bool // a span is being written, not a log record
	body         bool // the next value is the record's body
	frames       []frame
	strs         strChunks
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
	lr := plog.NewLogRecord()
	return &pdataWriter{lr: lr, scratch: lr, sp: ptrace.NewSpan(), last: 8}
}

// Record and Span give the attributes the room the mapping says they take
// at once: grown by doubling, their room would be copied and mostly
// unused.
func (w *pdataWriter) Record(n int) {
	w.span, w.body = false, false
	switch {
	case w.reuse: // in the place of the record discarded
		w.reuse = false
	case w.hasDst:
		w.lr, w.inDst = w.dst.AppendEmpty(), true
	default:
		w.lr, w.inDst = w.scratch, false
	}
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

// Discard empties the record or span; a record written again (the
// mapping writes a discarded record again another way, a log record) is
// written in its place.
func (w *pdataWriter) Discard() {
	w.frames, w.body = w.frames[:0], false
	if w.span {
		w.sp = ptrace.NewSpan()
	} else {
		plog.NewLogRecord().MoveTo(w.lr)
		w.reuse = true
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
		w.sp.Status().SetMessage(w.strs.clone(message))
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

// attrs is the map the next value is an attribute of, when it is one (not
// the body, not an array's element): it is Put there whole, its key and
// value at once, not put empty and then set.
func (w *pdataWriter) attrs() (pcommon.Map, bool) {
	f := &w.frames[len(w.frames)-1]
	return f.m, !w.body && !f.array
}

func (w *pdataWriter) Str(key, s string) { w.StrConst(key, w.strs.clone(s)) }

func (w *pdataWriter) StrConst(key, s string) {
	if m, ok := w.attrs(); ok {
		m.PutStr(key, s)
		return
	}
	w.value(key).SetStr(s)
}

func (w *pdataWriter) StrBytes(key string, s []byte) { w.StrConst(key, w.strs.clone(view(s))) }

func (w *pdataWriter) Int(key string, i int64) {
	if m, ok := w.attrs(); ok {
		m.PutInt(key, i)
		return
	}
	w.value(key).SetInt(i)
}

func (w *pdataWriter) Double(key string, f float64) {
	if m, ok := w.attrs(); ok {
		m.PutDouble(key, f)
		return
	}
	w.value(key).SetDouble(f)
}

func (w *pdataWriter) Bool(key string, v bool) {
	if m, ok := w.attrs(); ok {
		m.PutBool(key, v)
		return
	}
	w.value(key).SetBool(v)
}

func (w *pdataWriter) Empty(key string) { w.value(key) }

// BytesValue copies p alone, not into strs: pdata's bytes may be changed
// in place by whoever takes them, and a string beside them with them.
func (w *pdataWriter) BytesValue(key string, p []byte) {
	w.value(key).SetEmptyBytes().FromRaw(p) // a copy
}

// strChunks is where the receiver's strings are copied: chunks of
// strChunk bytes, each shared by the strings copied into it, written once
// — a string is never written over, and a chunk stays while any of its
// strings does (a string a pipeline keeps holds its chunk: 8 KiB at most
// for a string of at most strOwn bytes).
type strChunks struct{ b []byte }

const (
	strChunk = 8 << 10
	strOwn   = 512 // a longer string is copied into its own allocation
)

// clone is a copy of s.
func (c *strChunks) clone(s string) string {
	if len(s) == 0 || len(s) > strOwn {
		return strings.Clone(s)
	}
	if cap(c.b)-len(c.b) < len(s) {
		c.b = make([]byte, 0, strChunk)
	}
	n := len(c.b)
	c.b = append(c.b, s...)
	return unsafe.String(&c.b[n], len(s))
}

// view is b as a string, not copied: for a string copied at once.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// MapStart and ArrayStart give the map or array its n entries' room at
// once (n is the Writer's hint, 0 when not known).
func (w *pdataWriter) MapStart(key string, n int) {
	var m pcommon.Map
	if attrs, ok := w.attrs(); ok {
		m = attrs.PutEmptyMap(key)
	} else {
		m = w.value(key).SetEmptyMap()
	}
	m.EnsureCapacity(n)
	w.frames = append(w.frames, frame{m: m})
}

func (w *pdataWriter) ArrayStart(key string, n int) {
	var s pcommon.Slice
	if attrs, ok := w.attrs(); ok {
		s = attrs.PutEmptySlice(key)
	} else {
		s = w.value(key).SetEmptySlice()
	}
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
	// lastRes is the resource of the last record, whose records the next
	// is written at the end of (pdataWriter's dst), when hasLast.
	lastRes  export.Resource
	lastLogs plog.LogRecordSlice
	hasLast  bool
	// missed says that a record was not of the last one's resource: the
	// records of this batch are written into the scratch record then, not
	// at the end of a resource's and moved (several processes' records
	// interleaved, which the batch's records come in runs of no more).
	missed bool
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
	batch         int // how many items a batch holds at most (its room)
	b             *pdataBatch
}

func newMapper(host, service string, scope otlp.Scope, batch int) *mapper {
	w := newPdataWriter()
	return &mapper{w: w, enc: export.NewEncoder(w), host: host, service: service, scope: scope, batch: batch, b: newPdataBatch()}
}

// add maps a sample into the batch: a log record is written at the end
// of the last one's resource's records, and moved when it is of another
// resource.
func (m *mapper) add(s *perfdata.Sample, observed uint64) {
	b := m.b
	w := m.w
	w.hasDst, w.inDst, w.reuse = b.hasLast && !b.missed, false, false
	w.dst = b.lastLogs
	sig, res, metrics := m.enc.Encode(s, observed)
	switch sig {
	case otlp.Logs:
		if w.inDst && res == b.lastRes {
			break // in its place
		}
		dst, ok := b.logsBy[res]
		if !ok {
			rl := b.logs.ResourceLogs().AppendEmpty()
			m.putResource(rl.Resource().Attributes(), s, res)
			sl := rl.ScopeLogs().AppendEmpty()
			sl.Scope().SetName(m.scope.Name)
			sl.Scope().SetVersion(m.scope.Version)
			dst = sl.LogRecords()
			if len(b.logsBy) == 0 {
				// The batch's records are mostly of one resource: room
				// for them at once, not grown by copying.
				dst.EnsureCapacity(m.batch - b.n)
			}
			res = res.Clone() // res views the sample's record
			b.logsBy[res] = dst
		}
		if w.inDst {
			// Not of the last one's resource: moved from the end of its
			// records to the end of its own resource's.
			b.missed = true
			moved := dst.AppendEmpty()
			w.lr.MoveTo(moved)
			last := w.dst.Len() - 1
			i := 0
			w.dst.RemoveIf(func(plog.LogRecord) bool { i++; return i-1 == last })
		} else {
			w.lr.MoveTo(dst.AppendEmpty())
		}
		if !b.hasLast {
			// The batch's first record: res is the one kept in logsBy.
			b.lastRes, b.lastLogs, b.hasLast = res, dst, true
		}
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

// take returns the batch and starts a new one: the writer holds nothing
// of it (what the pipelines do with it is theirs).
func (m *mapper) take() *pdataBatch {
	b := m.b
	m.b = newPdataBatch()
	m.w.dst, m.w.lr = plog.LogRecordSlice{}, m.w.scratch
	return b
}
