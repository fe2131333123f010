package ehotel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/commonschema"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
)

// SpanEventName is the event name of every span: the Rust trace exporter's
// eb.reset("Span", 0).
const SpanEventName = commonschema.TypeSpan

// SpanLevel is the level of the span tracepoint "<provider>_L4K1": the Rust
// trace exporter registers one event set, Level::Informational with
// keyword 1.
const SpanLevel = eventheader.LevelInformation

// SpanExporter is an sdktrace.SpanExporter writing each span as the
// EventHeader event "Span" that OpenTelemetry's Rust user_events trace
// exporter writes (see the package doc's SPANS), to the tracepoint
// "<provider>_L4K1". Spans are skipped while nobody listens, but only once
// the SDK hands them over: use NewSpanProcessor to check first.
//
// Its methods are safe for concurrent use, ExportSpans with itself too.
type SpanExporter struct {
	sink
	tp   *ehprovider.Tracepoint // nil when the provider could not be set up
	res  resourceCache
	pool sync.Pool // of *writer
}

// NewSpanExporter returns a span exporter for the provider name, which
// must be 1 to 233 ASCII letters, digits and underscores. It registers the
// tracepoint "<name>_L4K1" at once, so that a listener can attach before
// the first span ends. As with NewExporter, that user_events cannot be
// opened is not its error: the exporter then writes nothing, and Err says
// why. Options.File applies; ResourceAttributes does not (the Rust trace
// exporter writes only service.name and service.instance.id of the
// resource, in PartA).
func NewSpanExporter(name string, opts *Options) (*SpanExporter, error) {
	c := opts.config()
	e := &SpanExporter{}
	e.pool.New = func() any { return new(writer) }
	if err := e.open(name, c); err != nil {
		return nil, err
	}
	if e.provider == nil {
		return e, nil
	}
	e.tp = e.provider.Tracepoint(SpanLevel, Keyword)
	if err := e.provider.Err(); err != nil {
		e.err = fmt.Errorf("ehotel: provider %s: %w", name, err)
	}
	return e, nil
}

// Tracepoint is the tracepoint spans are written to, or nil when the
// provider could not be set up.
func (e *SpanExporter) Tracepoint() *ehprovider.Tracepoint { return e.tp }

// enabled reports whether a span would be written now.
func (e *SpanExporter) enabled() bool {
	return e.tp != nil && e.tp.Enabled() && !e.stopped.Load()
}

// ExportSpans writes each span while the tracepoint is enabled. It returns
// an error after Shutdown, writing nothing; the context's error, writing
// nothing more, once it is done; and the errors of the spans that could not
// be written (over 64 KiB, the backend's), joined, the others written.
func (e *SpanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() {
		return errSpanShutdown
	}
	var errs []error
	for _, s := range spans {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := e.write(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var errSpanShutdown = errors.New("ehotel: span exporter is shut down")

// Shutdown stops the exporter: ExportSpans returns an error from now on,
// the tracepoint is unregistered, and user_events closed if the exporter
// opened it. It never waits; it returns nil, and does nothing the second
// time.
func (e *SpanExporter) Shutdown(context.Context) error {
	e.shutdown()
	return nil
}

// write writes s if the tracepoint is enabled.
func (e *SpanExporter) write(s sdktrace.ReadOnlySpan) error {
	if !e.enabled() {
		return nil
	}
	w := e.pool.Get().(*writer)
	err := w.buildSpan(e, s)
	if err == nil {
		err = e.tp.Write(&w.b)
		// A listener detaching while the event is written: the Rust
		// exporter's no-listener result (9), not worth reporting.
		if errors.Is(err, unix.EBADF) {
			err = nil
		}
	}
	e.pool.Put(w)
	if err != nil {
		return fmt.Errorf("ehotel: write span %q to %s: %w", s.Name(), e.tp.Name(), err)
	}
	return nil
}

// buildSpan builds s's event in w.b as export_span does: __csver__, PartA,
// PartB, then PartC.
func (w *writer) buildSpan(e *SpanExporter, s sdktrace.ReadOnlySpan) error {
	b := &w.b
	b.Reset(e.tp, SpanEventName)
	b.AddUint32("__csver__", CSVersion, eventheader.FormatUnsignedInt, 0)

	// PartA: the span's end, its ids, the service from the resource.
	var rf *resourceFields
	if res := s.Resource(); res != nil {
		rf = e.res.fields(res)
	}
	nA := 3
	if rf != nil && rf.hasRole {
		nA++
	}
	if rf != nil && rf.hasInstance {
		nA++
	}
	b.StructField("PartA", nA, 0)
	w.buf = appendTime(w.buf[:0], s.EndTime())
	w.addStringBytes("time", w.buf)
	sc := s.SpanContext()
	traceID, spanID := sc.TraceID(), sc.SpanID()
	w.buf = hex.AppendEncode(w.buf[:0], traceID[:])
	w.addStringBytes("ext_dt_traceId", w.buf)
	w.buf = hex.AppendEncode(w.buf[:0], spanID[:])
	w.addStringBytes("ext_dt_spanId", w.buf)
	if rf != nil && rf.hasRole {
		b.AddString("ext_cloud_role", rf.role, eventheader.FormatDefault, 0)
	}
	if rf != nil && rf.hasInstance {
		b.AddString("ext_cloud_roleInstance", rf.instance, eventheader.FormatDefault, 0)
	}

	// PartB: five fields always, then parentId, links, the well-known
	// attributes in the span's order, statusMessage.
	attrs := s.Attributes()
	nWellKnown, nC, hasHTTPStatus := 0, 0, false
	for _, kv := range attrs {
		if cs, ok := commonschema.SpanAttributes[string(kv.Key)]; ok {
			nWellKnown++
			hasHTTPStatus = hasHTTPStatus || cs == "httpStatusCode"
		} else {
			nC++
		}
	}
	parent := s.Parent().SpanID()
	hasParent := parent.IsValid()
	links := s.Links()
	status := s.Status()
	// Common Schema: "If you report httpStatusCode, statusMessage should
	// not be reported."
	hasStatusMessage := status.Code == codes.Error && status.Description != "" && !hasHTTPStatus
	nB := 5 + nWellKnown
	for _, has := range [...]bool{hasParent, len(links) > 0, hasStatusMessage} {
		if has {
			nB++
		}
	}
	b.StructField("PartB", nB, 0)
	b.AddString("_typeName", SpanEventName, eventheader.FormatDefault, 0)
	b.AddString("name", s.Name(), eventheader.FormatDefault, 0)
	w.buf = appendTime(w.buf[:0], s.StartTime())
	w.addStringBytes("startTime", w.buf)
	b.AddBool("success", status.Code != codes.Error, 0)
	b.AddUint32("kind", spanKind(s.SpanKind()), eventheader.FormatUnsignedInt, 0)
	if hasParent {
		w.buf = hex.AppendEncode(w.buf[:0], parent[:])
		w.addStringBytes("parentId", w.buf)
	}
	if len(links) > 0 {
		w.buf = appendLinks(w.buf[:0], links)
		w.addStringBytes("links", w.buf)
	}
	for _, kv := range attrs {
		if cs, ok := commonschema.SpanAttributes[string(kv.Key)]; ok {
			w.addValue(cs, kv.Value)
		}
	}
	if hasStatusMessage {
		b.AddString("statusMessage", status.Description, eventheader.FormatDefault, 0)
	}

	// PartC: the other attributes, when there are any; at most 127 (the
	// struct's count is 7 bits).
	if nC > 0 {
		nC = min(nC, maxStructFields)
		b.StructField("PartC", nC, 0)
		left := nC
		for _, kv := range attrs {
			if left == 0 {
				break
			}
			if _, ok := commonschema.SpanAttributes[string(kv.Key)]; !ok {
				w.addValue(string(kv.Key), kv.Value)
				left--
			}
		}
	}
	return w.check()
}

// spanKind is the Rust exporter's kind number: Internal 0, Server 1,
// Client 2, Producer 3, Consumer 4. Go's SpanKindUnspecified, which the
// SDK turns into Internal when a span starts, is Internal too.
func spanKind(k trace.SpanKind) uint32 {
	switch k {
	case trace.SpanKindServer:
		return 1
	case trace.SpanKindClient:
		return 2
	case trace.SpanKindProducer:
		return 3
	case trace.SpanKindConsumer:
		return 4
	}
	return 0
}

// appendLinks appends the links as the Rust exporter's links_to_json
// writes them: [{"toTraceId":"<32 hex>","toSpanId":"<16 hex>"},...].
func appendLinks(dst []byte, links []sdktrace.Link) []byte {
	dst = append(dst, '[')
	for i, l := range links {
		if i > 0 {
			dst = append(dst, ',')
		}
		tid, sid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		dst = append(dst, `{"toTraceId":"`...)
		dst = hex.AppendEncode(dst, tid[:])
		dst = append(dst, `","toSpanId":"`...)
		dst = hex.AppendEncode(dst, sid[:])
		dst = append(dst, `"}`...)
	}
	return append(dst, ']')
}

// SpanProcessor is an sdktrace.SpanProcessor that writes each sampled span
// synchronously when it ends, as the Rust crate's ReentrantSpanProcessor
// does: OnEnd checks the tracepoint's enable bit before anything is built,
// then builds and writes the event on the goroutine that ended the span.
// Nothing is copied, queued or batched, so a span nobody listens to costs a
// load of its enable word at its end. Use it instead of an
// sdktrace.BatchSpanProcessor, which queues every span before an exporter
// could tell that nobody listens.
//
// Its methods are safe for concurrent use.
type SpanProcessor struct {
	e *SpanExporter
}

// NewSpanProcessor returns a processor writing through
// NewSpanExporter(name, opts).
func NewSpanProcessor(name string, opts *Options) (*SpanProcessor, error) {
	e, err := NewSpanExporter(name, opts)
	if err != nil {
		return nil, err
	}
	return &SpanProcessor{e: e}, nil
}

// Exporter is the processor's exporter: its tracepoint and Err.
func (p *SpanProcessor) Exporter() *SpanExporter { return p.e }

// OnStart does nothing: a span is written when it ends.
func (p *SpanProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd writes s if it is sampled and the tracepoint is enabled — the
// SDK's own processors export sampled spans only. A span that cannot be
// written is reported to OpenTelemetry's error handler (otel.Handle), as
// the SDK's processors report theirs.
func (p *SpanProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !p.e.enabled() || !s.SpanContext().IsSampled() {
		return
	}
	if err := p.e.write(s); err != nil {
		otel.Handle(err)
	}
}

// ForceFlush returns the context's error, or nil: there is nothing to
// flush.
func (p *SpanProcessor) ForceFlush(ctx context.Context) error { return ctx.Err() }

// Shutdown shuts the exporter down (SpanExporter.Shutdown).
func (p *SpanProcessor) Shutdown(ctx context.Context) error { return p.e.Shutdown(ctx) }

var (
	_ sdktrace.SpanExporter  = (*SpanExporter)(nil)
	_ sdktrace.SpanProcessor = (*SpanProcessor)(nil)
)
