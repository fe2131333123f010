package ehotel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/userevents"
)

// Keyword is the keyword of every tracepoint: the Rust exporter registers
// its five event sets with keyword 1 (register_events in
// opentelemetry-user-events-logs/src/logs/exporter.rs).
const Keyword = 1

// maxProviderName is the Rust builder's bound: a name of 234 characters or
// more is refused (ProcessorBuilder::build in
// opentelemetry-user-events-logs/src/logs/processor.rs).
const maxProviderName = 234

// maxPayload is the most metadata and data an event may hold: the Rust
// builder refuses more with ERANGE (EventBuilder::write in
// LinuxTracepoints-Rust eventheader_dynamic/src/builder.rs: 65535 - (52 + 16)),
// so that the record fits perf's 16-bit sample size with its headers.
const maxPayload = 65535 - (52 + 16)

// Options configures an Exporter, a Processor and the span and metric
// exporters, as slog.HandlerOptions does a handler: nil is the zero
// Options, the defaults.
type Options struct {
	// File is what the exporter writes through: the caller keeps it and
	// closes it after Shutdown. Without it the exporter opens user_events
	// with userevents.Open(nil) — the kernel, else the uetrace daemon —
	// and closes it on Shutdown.
	File *userevents.File
	// ResourceAttributes names the resource attributes written with every
	// log record, at the end of PartC, as the Rust builder's
	// with_resource_attributes does. service.name and service.instance.id
	// are always written, in PartA (ext_cloud_role,
	// ext_cloud_roleInstance), and never in PartC. Logs only: the span
	// exporter writes no other resource attribute (as the Rust trace
	// exporter), the metric exporter the whole resource.
	ResourceAttributes []string
}

type config struct {
	file     *userevents.File
	resource map[string]bool
}

// config is what the exporters keep of o (nil: the defaults).
func (o *Options) config() config {
	var c config
	if o == nil {
		return c
	}
	c.file = o.File
	for _, k := range o.ResourceAttributes {
		if c.resource == nil {
			c.resource = map[string]bool{}
		}
		c.resource[k] = true
	}
	return c
}

// Exporter is an sdklog.Exporter writing each record as an EventHeader
// event (see the package doc's FORMAT) to the tracepoint of its severity.
// Records whose tracepoint nobody listens to are skipped, but only once the
// SDK hands them over: with a BatchProcessor they have been copied and
// queued by then. Use NewProcessor to check first.
//
// Its methods are safe for concurrent use, Export with itself too.
type Exporter struct {
	sink
	// tps holds the tracepoint of each level, indexed by the level (1..5);
	// nil when the provider could not be set up.
	tps  [eventheader.LevelVerbose + 1]*ehprovider.Tracepoint
	res  resourceCache
	pool sync.Pool // of *writer
}

// NewExporter returns an exporter for the provider name. The name must be
// 1 to 233 ASCII letters, digits and underscores (as the Rust builder
// requires); anything else is an error. It registers the provider's five
// tracepoints "<name>_L1K1" ... "<name>_L5K1" at once, as the Rust exporter
// does, so that a listener can attach before the first record is logged.
//
// That user_events cannot be opened, or a tracepoint registered, is not an
// error of NewExporter: as in Rust, logging must not fail for want of a
// listener. The exporter then writes nothing to the tracepoints concerned,
// and Err says why.
func NewExporter(name string, opts *Options) (*Exporter, error) {
	c := opts.config()
	e := &Exporter{res: resourceCache{keys: c.resource}}
	e.pool.New = func() any { return new(writer) }
	if err := e.open(name, c); err != nil {
		return nil, err
	}
	if e.provider == nil {
		return e, nil // Err says why
	}
	for l := eventheader.LevelCriticalError; l <= eventheader.LevelVerbose; l++ {
		e.tps[l] = e.provider.Tracepoint(l, Keyword)
	}
	if err := e.provider.Err(); err != nil {
		e.err = fmt.Errorf("ehotel: provider %s: %w", name, err)
	}
	return e, nil
}

// Tracepoint returns the tracepoint records of severity s are written to,
// or nil for a severity outside 1..24 or when the provider could not be set
// up.
func (e *Exporter) Tracepoint(s log.Severity) *ehprovider.Tracepoint {
	return e.tps[Level(s)]
}

// Level maps an OpenTelemetry severity number to the EventHeader level, as
// get_severity_level in opentelemetry-user-events-logs/src/logs/exporter.rs:
// TRACE and DEBUG (1-8) Verbose (5), INFO (9-12) Information (4), WARN
// (13-16) Warning (3), ERROR (17-20) Error (2), FATAL (21-24) CriticalError
// (1). Other values — SeverityUndefined among them — are LevelInvalid: the
// Rust exporter refuses a record without a severity number.
func Level(s log.Severity) eventheader.Level {
	switch {
	case s < log.SeverityTrace1 || s > log.SeverityFatal4:
		return eventheader.LevelInvalid
	case s <= log.SeverityDebug4:
		return eventheader.LevelVerbose
	case s <= log.SeverityInfo4:
		return eventheader.LevelInformation
	case s <= log.SeverityWarn4:
		return eventheader.LevelWarning
	case s <= log.SeverityError4:
		return eventheader.LevelError
	}
	return eventheader.LevelCriticalError
}

// enabled reports whether records of severity s would be written now.
func (e *Exporter) enabled(s log.Severity) bool {
	tp := e.tps[Level(s)]
	return tp != nil && tp.Enabled() && !e.stopped.Load()
}

// anyEnabled reports whether any of the tracepoints is enabled.
func (e *Exporter) anyEnabled() bool {
	for _, tp := range e.tps {
		if tp != nil && tp.Enabled() {
			return !e.stopped.Load()
		}
	}
	return false
}

// Export writes each record whose tracepoint is enabled and skips the
// others. It returns sdklog.ErrExporterShutdown, writing nothing, after
// Shutdown; the context's error, writing nothing more, once it is done; and
// the errors of the records that could not be written (a severity outside
// 1..24, an event over 64 KiB, the backend's), joined, the others written.
func (e *Exporter) Export(ctx context.Context, records []sdklog.Record) error {
	if e.stopped.Load() {
		return sdklog.ErrExporterShutdown
	}
	var errs []error
	for i := range records {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := e.write(&records[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// write writes r if its tracepoint is enabled.
func (e *Exporter) write(r *sdklog.Record) error {
	if e.stopped.Load() {
		return nil
	}
	sev := r.Severity()
	lvl := Level(sev)
	if lvl == eventheader.LevelInvalid {
		if !e.anyEnabled() {
			return nil // nobody would have seen it
		}
		return fmt.Errorf("ehotel: record of severity number %d: the user_events exporter needs one in 1..24 (TRACE1..FATAL4): %w", int(sev), unix.EINVAL)
	}
	tp := e.tps[lvl]
	if tp == nil || !tp.Enabled() {
		return nil // nil: no provider, Err says why
	}
	w := e.pool.Get().(*writer)
	err := w.build(e, tp, r)
	if err == nil {
		err = tp.Write(&w.b)
		// A listener detaching while the event is written: the Rust
		// exporter's NO_LISTENER_ERROR (9), not worth reporting.
		if errors.Is(err, unix.EBADF) {
			err = nil
		}
	}
	e.pool.Put(w)
	if err != nil {
		return fmt.Errorf("ehotel: write to %s: %w", tp.Name(), err)
	}
	return nil
}

// ForceFlush returns at once: every record is written by Export itself.
// It returns the context's error if it is done.
func (e *Exporter) ForceFlush(ctx context.Context) error {
	if e.stopped.Load() {
		return nil
	}
	return ctx.Err()
}

// Shutdown stops the exporter: Export returns sdklog.ErrExporterShutdown
// from now on, and the provider's tracepoints are unregistered (as the
// Rust exporter's shutdown does), and user_events closed if the exporter
// opened it. It never waits for anything, so the context cannot cut it
// short; it returns nil, and does nothing the second time.
func (e *Exporter) Shutdown(context.Context) error {
	e.shutdown()
	return nil
}

var _ sdklog.Exporter = (*Exporter)(nil)
