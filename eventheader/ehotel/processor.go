package ehotel

import (
	"context"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// Processor is an sdklog.Processor that writes each record synchronously,
// as the Rust crate's Processor does
// (opentelemetry-user-events-logs/src/logs/processor.rs): Enabled answers
// from the enable bit of the severity's tracepoint, and OnEmit checks that
// bit before anything is built, then builds and writes the event on the
// calling goroutine. Nothing is copied, queued or batched, so a record
// nobody listens to costs a load of its enable word, and nothing is lost
// if the program crashes. Use it instead of an sdklog.BatchProcessor (which
// copies every record before the exporter could tell that nobody listens)
// or a SimpleProcessor (which serializes every emit on one mutex).
//
// Its methods are safe for concurrent use.
type Processor struct {
	e *Exporter
}

// NewProcessor returns a processor writing through NewExporter(name,
// opts).
func NewProcessor(name string, opts *Options) (*Processor, error) {
	e, err := NewExporter(name, opts)
	if err != nil {
		return nil, err
	}
	return &Processor{e: e}, nil
}

// Exporter is the processor's exporter: its tracepoints and Err.
func (p *Processor) Exporter() *Exporter { return p.e }

// Enabled reports whether a record of param.Severity would be written:
// whether its tracepoint is enabled (the Rust processor's event_enabled).
// For SeverityUndefined — a bridge that cannot tell the severity — it
// reports whether any of the provider's tracepoints is enabled; for a
// severity outside 0..24, false. It never allocates.
func (p *Processor) Enabled(_ context.Context, param sdklog.EnabledParameters) bool {
	if param.Severity == log.SeverityUndefined {
		return p.e.anyEnabled()
	}
	return p.e.enabled(param.Severity)
}

// OnEmit writes the record if its tracepoint is enabled, on the calling
// goroutine, whatever the context (the SDK asks processors not to drop a
// record for a canceled context). It returns an error for a severity
// outside 1..24 — the record is not written, as in Rust — and for a record
// that could not be written; after Shutdown it writes nothing and returns
// nil.
func (p *Processor) OnEmit(_ context.Context, r *sdklog.Record) error {
	return p.e.write(r)
}

// ForceFlush returns the context's error, or nil: there is nothing to
// flush.
func (p *Processor) ForceFlush(ctx context.Context) error {
	return p.e.ForceFlush(ctx)
}

// Shutdown shuts the exporter down (Exporter.Shutdown); calls after the
// first do nothing.
func (p *Processor) Shutdown(ctx context.Context) error {
	return p.e.Shutdown(ctx)
}

var _ sdklog.Processor = (*Processor)(nil)
