// Package export sends trace event samples (perfdata.Sample) to an
// OpenTelemetry Collector as OTLP logs, over gRPC or OTLP/HTTP (package
// internal/otlp): what `uetrace export` does with the events it takes live
// from the kernel or a daemon (package export/live) or reads from a
// perf.data file (File, through a perfdata.Session: in time order). The
// mapping of a sample is one (Encoder), written into a Writer: into OTLP
// protobuf here (Mapper, which the Exporter sends), into the Collector's
// pdata by its userevents receiver (module otelcol/usereventsreceiver).
//
// Each sample is a log record: its event's name ("system:name", or
// "Provider:Event" for EventHeader) as the record's event_name, the
// tracepoint, thread and CPU as attributes, and the event's fields as
// attributes by their names — a plain user event's by its format's types,
// an EventHeader event's decoded from its own metadata (package
// eventheader), with nested structs as maps, arrays as arrays, its level as
// the severity and its keyword, opcode, id, version, tag and activity ids
// as attributes. Records are grouped by process: each process is a resource
// with host.name, process.pid, process.executable.name (its main thread's
// name, else the sample's thread's) and, if given, service.name. Times are
// wall-clock times (the sample's Wall: the source converts them; without
// one, its Time is sent as linux.perf_time); observed time is when the
// exporter took the sample.
//
// Samples are batched (Options.BatchSize records, or Options.BatchDelay
// after a batch's first), and batches wait in a bounded queue
// (Options.QueueSize) for the senders. A batch that fails with one of
// OTLP's retryable errors is retried with exponential backoff (and at
// least the delay the Collector asked for) for up to Options.RetryFor; then
// it is dropped. A batch that finds the queue full is dropped, unless
// Options.Block says to wait for room (for file sources, which can wait).
// Close sends what is queued within its context's time. Every sample ends
// in exactly one of Stats' counts — delivered, rejected by the Collector,
// or dropped for one reason — so that, once closed, Received equals their
// sum: nothing is lost without being counted.
//
// An EventHeader event in the Common Schema layout of OpenTelemetry's
// user_events log exporters (__csver__, PartA, PartC, PartB "Log": what the
// Rust and C++ exporters and package eventheader/ehotel write) is mapped
// back to the log record it was made from: time, severity, body, event
// name, trace and span ids, attributes, and service.name and
// service.instance.id in its resource (commonschema.go says what differs).
// The other signals OpenTelemetry's exporters write go to the
// Collector's services for them: a Common Schema span (PartB "Span", what
// the Rust trace exporter and ehotel write) as an OTLP span — ids, parent,
// name, kind, times, status, links, attributes — to the trace service; an
// otlp_metrics record's ExportMetricsServiceRequest (the Rust, C++ and
// ehotel metrics exporters') as it was written to the metrics service. A
// batch holds all three; each is sent as its own request.
package export

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// Options configure an Exporter.
type Options struct {
	Protocol otlp.Protocol
	Endpoint string            // the Collector: http://host:port or https://host:port; "": OTLP's default
	Headers  map[string]string // sent with every request
	Gzip     bool              // compress requests
	// ServiceName, when set, is every resource's service.name.
	ServiceName string
	// HostName is the resources' host.name; "": os.Hostname.
	HostName string
	// BatchSize is the most records a request carries; 0: 512.
	BatchSize int
	// BatchDelay is how long a batch waits to fill before it is sent;
	// 0: 200 ms.
	BatchDelay time.Duration
	// QueueSize is how many batches may wait to be sent; 0: 64.
	QueueSize int
	// Block makes Add wait for room in the queue rather than drop the
	// batch.
	Block bool
	// Senders is how many requests may be in flight at once; 0: 2.
	Senders int
	// Timeout bounds each request; 0: 10 s.
	Timeout time.Duration
	// InitialBackoff and MaxBackoff bound the waits between retries of a
	// batch (doubled each time, with jitter); 0: 100 ms and 5 s. RetryFor
	// is how long a batch is retried before it is dropped; 0: 60 s.
	InitialBackoff, MaxBackoff, RetryFor time.Duration
	// Notify, when set, is told what the user should know as it happens:
	// the first failure of a series, and when sending works again.
	Notify func(msg string)
}

// Stats are the exporter's counts. Once Close returns, Received =
// Delivered + Rejected + DroppedQueueFull + DroppedFailed +
// DroppedShutdown.
type Stats struct {
	Received  uint64 // samples given to Add
	Delivered uint64 // records the Collector accepted
	// Rejected are records the Collector refused in a partial success.
	Rejected uint64
	// DroppedQueueFull are records of batches that found the queue full.
	DroppedQueueFull uint64
	// DroppedFailed are records of batches that failed with an error
	// that is not retryable, or for longer than RetryFor.
	DroppedFailed uint64
	// DroppedShutdown are records still queued or being retried when
	// Close's time ran out.
	DroppedShutdown uint64
	Requests        uint64 // requests sent, retries included
	Retries         uint64 // of them, retries
	Bytes           uint64 // encoded request bytes sent
	Queued          int    // batches waiting now
	LastError       string // the latest failure, "" if none
}

// Dropped is every dropped record, whatever the reason.
func (s Stats) Dropped() uint64 { return s.DroppedQueueFull + s.DroppedFailed + s.DroppedShutdown }

// batch is one request's records, grouped by process, encoded.
type batch struct {
	// Per signal: logs and spans grouped by resource; metrics requests,
	// as they came, one after the other (a request's resource_metrics
	// are a repeated field: requests joined are one request).
	res     [2][]otlp.EncodedResourceLogs
	byRes   [2]map[Resource]int
	metrics []byte
	count   [3]int // samples, per signal
	n       int
}

// Exporter batches samples and sends them. Add is for one goroutine at a
// time; Stats may be called from any.
type Exporter struct {
	opts   Options
	client *otlp.Client

	mu      sync.Mutex // guards m and closed
	flushMu sync.Mutex // held by flushTimer while it enqueues
	m       *Mapper    // its batch is the one being filled
	timer   *time.Timer
	closed  bool
	queue   chan *batch
	// free holds batches sent, their memory kept for the next ones: a
	// batch grows to hundreds of KiB, and one made anew each time would
	// grow again by copying, and be garbage to collect.
	free chan *batch
	wg   sync.WaitGroup
	// sendCtx is cancelled when Close's time runs out: the senders stop
	// retrying and count what they hold as dropped.
	sendCtx    context.Context
	cancelSend context.CancelFunc

	received, delivered, rejected       atomic.Uint64
	dropQueue, dropFailed, dropShutdown atomic.Uint64
	requests, retries, bytes            atomic.Uint64
	lastErr                             atomic.Value // string
	failing                             atomic.Bool
}

// Version is the scope's version.
const Version = "1"

// New makes an exporter and starts its senders. It does not connect
// until the first batch.
func New(o Options) (*Exporter, error) {
	if o.BatchSize <= 0 {
		o.BatchSize = 512
	}
	if o.BatchDelay <= 0 {
		o.BatchDelay = 200 * time.Millisecond
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 64
	}
	if o.Senders <= 0 {
		o.Senders = 2
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.MaxBackoff < o.InitialBackoff {
		o.MaxBackoff = o.InitialBackoff
	}
	if o.RetryFor <= 0 {
		o.RetryFor = time.Minute
	}
	c, err := otlp.New(otlp.Options{Protocol: o.Protocol, Endpoint: o.Endpoint, Headers: o.Headers, Timeout: o.Timeout, Gzip: o.Gzip})
	if err != nil {
		return nil, err
	}
	m, err := NewMapper(MapperOptions{ServiceName: o.ServiceName, HostName: o.HostName})
	if err != nil {
		return nil, fmt.Errorf("host name for host.name: %w", err)
	}
	e := &Exporter{
		opts: o, client: c, m: m,
		queue: make(chan *batch, o.QueueSize),
		free:  make(chan *batch, o.Senders+1),
	}
	e.lastErr.Store("")
	e.sendCtx, e.cancelSend = context.WithCancel(context.Background())
	e.timer = time.AfterFunc(time.Hour, e.flushTimer)
	e.timer.Stop()
	for range o.Senders {
		e.wg.Add(1)
		go e.sender()
	}
	return e, nil
}

// URL is where the exporter sends.
func (e *Exporter) URL() string { return e.client.URL() }

// ErrClosed is Add's error after Close.
var ErrClosed = errors.New("export: the exporter is closed")

// Add maps a sample to a log record and batches it. The sample's Raw need
// not outlive the call. A full batch goes to the queue: with Block, Add
// waits for room there (until ctx is done, when the batch is dropped and
// counted); otherwise a batch that finds the queue full is dropped and
// counted.
func (e *Exporter) Add(ctx context.Context, s *perfdata.Sample) error {
	observed := uint64(time.Now().UnixNano())
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrClosed, unix.EPIPE)
	}
	e.received.Add(1)
	if e.m.Len() == 0 {
		e.timer.Reset(e.opts.BatchDelay)
	}
	e.m.Add(s, observed)
	var full *batch
	if e.m.Len() >= e.opts.BatchSize {
		full = e.take()
		e.timer.Stop()
	}
	e.mu.Unlock()
	if full != nil {
		e.enqueue(ctx, full, e.opts.Block)
	}
	return nil
}

// take returns the batch being filled, and has the mapper fill another:
// one sent before, if there is one. mu is held.
func (e *Exporter) take() *batch {
	var next *batch
	select {
	case next = <-e.free:
	default:
		next = &batch{}
	}
	return e.m.take(next)
}

// flushTimer sends the current batch when it has waited BatchDelay. It
// runs on the timer's own goroutine, so with Block it may wait for room.
// flushMu keeps Close from closing the queue while it enqueues.
func (e *Exporter) flushTimer() {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.mu.Lock()
	if e.closed || e.m.Len() == 0 {
		e.mu.Unlock()
		return
	}
	b := e.take()
	e.mu.Unlock()
	e.enqueue(e.sendCtx, b, e.opts.Block)
}

// enqueue puts a batch in the queue, or counts it dropped. The queue is
// closed only by Close, once no enqueue can come: Add is not running and
// flushTimer is not (flushMu).
func (e *Exporter) enqueue(ctx context.Context, b *batch, block bool) {
	if !block {
		select {
		case e.queue <- b:
		default:
			e.dropQueue.Add(uint64(b.n))
		}
		return
	}
	select {
	case e.queue <- b:
	case <-ctx.Done():
		e.dropShutdown.Add(uint64(b.n))
	case <-e.sendCtx.Done():
		e.dropShutdown.Add(uint64(b.n))
	}
}

// sender sends the queue's batches until it is closed: a request for
// each signal the batch holds.
func (e *Exporter) sender() {
	defer e.wg.Done()
	var buf []byte
	for b := range e.queue {
		for sig := otlp.Logs; sig <= otlp.Metrics; sig++ {
			if b.count[sig] == 0 {
				continue
			}
			buf = b.appendRequest(append(buf[:0], make([]byte, otlp.Headroom)...), sig)
			e.send(sig, b.count[sig], buf)
		}
		b.reset()
		select {
		case e.free <- b:
		default:
		}
	}
}

// send sends one request of n samples, after otlp.Headroom bytes in req,
// retrying while the failures are retryable and RetryFor lasts.
func (e *Exporter) send(sig otlp.Signal, count int, req []byte) {
	n := uint64(count)
	if e.sendCtx.Err() != nil {
		e.dropShutdown.Add(n)
		return
	}
	start := time.Now()
	backoff := e.opts.InitialBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			e.retries.Add(1)
		}
		e.requests.Add(1)
		e.bytes.Add(uint64(len(req) - otlp.Headroom))
		ps, err := e.client.ExportFramed(e.sendCtx, sig, req)
		if err == nil {
			rej := uint64(max(min(ps.RejectedLogRecords, int64(n)), 0))
			e.rejected.Add(rej)
			e.delivered.Add(n - rej)
			if rej > 0 || ps.ErrorMessage != "" {
				e.lastErr.Store(fmt.Sprintf("the Collector rejected %d of %d records: %s", ps.RejectedLogRecords, n, ps.ErrorMessage))
			}
			if e.failing.CompareAndSwap(true, false) {
				e.notify("sending to %s again", e.client.URL())
			}
			return
		}
		e.lastErr.Store(err.Error())
		if e.sendCtx.Err() != nil {
			e.dropShutdown.Add(n)
			return
		}
		var oe *otlp.Error
		retryable := errors.As(err, &oe) && oe.Retryable
		if !retryable {
			e.notify("dropped %d records: %v", n, err)
			e.dropFailed.Add(n)
			return
		}
		if e.failing.CompareAndSwap(false, true) {
			e.notify("%v; retrying", err)
		}
		// Exponential backoff with jitter (half to all of the step), and
		// at least what the server asked for.
		wait := backoff/2 + rand.N(backoff/2+1)
		wait = max(wait, oe.RetryAfter)
		backoff = min(backoff*2, e.opts.MaxBackoff)
		if time.Since(start)+wait > e.opts.RetryFor {
			e.notify("dropped %d records: still failing after %v: %v", n, time.Since(start).Round(time.Millisecond), err)
			e.dropFailed.Add(n)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-e.sendCtx.Done():
			t.Stop()
			e.dropShutdown.Add(n)
			return
		}
	}
}

func (e *Exporter) notify(format string, args ...any) {
	if e.opts.Notify != nil {
		e.opts.Notify(fmt.Sprintf(format, args...))
	}
}

// Flush sends the batch being filled now, without waiting for BatchDelay.
func (e *Exporter) Flush(ctx context.Context) {
	e.mu.Lock()
	var b *batch
	if e.m.Len() > 0 {
		b = e.take()
	}
	e.timer.Stop()
	e.mu.Unlock()
	if b != nil {
		e.enqueue(ctx, b, true)
	}
}

// Close sends what is batched and queued, waiting for it until ctx is
// done; what is still queued or being retried then is dropped and
// counted (DroppedShutdown). Add must not be running.
func (e *Exporter) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	var b *batch
	if e.m.Len() > 0 {
		b = e.take()
	}
	e.timer.Stop()
	e.mu.Unlock()
	if b != nil {
		e.enqueue(ctx, b, true)
	}
	done := make(chan struct{})
	go func() {
		e.flushMu.Lock() // no flushTimer enqueueing; none will: closed is set
		close(e.queue)
		e.flushMu.Unlock()
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		e.cancelSend()
		<-done
	}
	e.cancelSend()
	e.client.CloseIdle()
	st := e.Stats()
	if d := st.Dropped(); d > 0 {
		return fmt.Errorf("%d of %d records dropped (%d for a full queue, %d failed, %d at shutdown): %s",
			d, st.Received, st.DroppedQueueFull, st.DroppedFailed, st.DroppedShutdown, st.LastError)
	}
	return nil
}

// Stats returns the counts so far.
func (e *Exporter) Stats() Stats {
	return Stats{
		Received:         e.received.Load(),
		Delivered:        e.delivered.Load(),
		Rejected:         e.rejected.Load(),
		DroppedQueueFull: e.dropQueue.Load(),
		DroppedFailed:    e.dropFailed.Load(),
		DroppedShutdown:  e.dropShutdown.Load(),
		Requests:         e.requests.Load(),
		Retries:          e.retries.Load(),
		Bytes:            e.bytes.Load(),
		Queued:           len(e.queue),
		LastError:        e.lastErr.Load().(string),
	}
}
