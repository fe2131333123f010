package usereventsreceiver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.uber.org/zap"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/export/live"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
	"github.com/uetrace/uetrace/perfdata"
)

// format is the obsreport's name for what the receiver reads.
const format = "user_events"

// sourceLatency is the longest an event waits in a daemon session's
// streams before the receiver takes it, while they fill slowly (less when
// BatchDelay is): see record.Options.SinkLatency.
const sourceLatency = 10 * time.Millisecond

// errNoPipeline is the refusal of the items of a signal that no pipeline
// of the receiver takes.
var errNoPipeline = errors.New("no pipeline of this receiver takes this signal; add the receiver to one")

// eventsReceiver is the logs, traces and metrics receivers of one config:
// one source, one mapping, each signal to its consumer.
type eventsReceiver struct {
	set     receiver.Settings
	cfg     *Config
	forget  func() // removes it from the shared map
	logs    consumer.Logs
	traces  consumer.Traces
	metrics consumer.Metrics

	life    sync.Mutex // Start and Shutdown
	starts  int
	cancel  context.CancelFunc
	done    chan struct{} // closed when the source and the flusher stopped
	src     *live.Source
	obs     *receiverhelper.ObsReport
	ticker  *time.Ticker
	lost    uint64     // records lost that were logged
	mu      sync.Mutex // guards mapper
	mapper  *mapper
	flushMu sync.Mutex // one flush consumes at a time, in order
}

func newReceiver(set receiver.Settings, cfg *Config, forget func()) *eventsReceiver {
	return &eventsReceiver{set: set, cfg: cfg, forget: forget}
}

// Start opens the source (an error if it cannot be: no tracefs, no
// daemon, no permission) and takes its events until Shutdown. The
// receivers of one config share it: only the first Start opens it.
func (r *eventsReceiver) Start(_ context.Context, _ component.Host) error {
	r.life.Lock()
	defer r.life.Unlock()
	r.starts++
	if r.starts > 1 {
		return nil
	}
	err := r.start()
	if err != nil {
		r.starts = 0 // a later Start tries again
	}
	return err
}

// start opens the source and starts taking its events.
func (r *eventsReceiver) start() error {
	b, err := r.cfg.backend()
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("host name for host.name: %w", err)
	}
	r.mapper = newMapper(host, r.cfg.ServiceName, otlp.Scope{Name: metadata.ScopeName, Version: r.set.BuildInfo.Version}, r.cfg.BatchSize)
	log := r.set.Logger
	// The source may hold what it takes for up to sourceLatency: the
	// items are batched anyway, and taken in runs on a timer they cost
	// less than taken at each delivery (record.Options.SinkLatency).
	opts := record.Options{Events: r.cfg.Events, BufferKB: r.cfg.BufferKB, NoFollow: r.cfg.NoFollow,
		SinkLatency: min(r.cfg.BatchDelay, sourceLatency)}
	r.src, err = live.Open(live.Where{Source: b, Socket: r.cfg.Socket, Tracefs: r.cfg.Tracefs}, opts, r.add,
		func(msg string) { log.Warn(msg) })
	if err != nil {
		return fmt.Errorf("userevents receiver: %w", err)
	}
	if r.obs, err = newObs(r); err != nil {
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		r.src.Run(cancelled) // closes it
		return err
	}
	log.Info("taking user_events", zap.String("source", r.src.Name()), zap.Strings("events", r.cfg.Events))
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	r.ticker = time.NewTicker(r.cfg.BatchDelay)
	var wg sync.WaitGroup
	wg.Go(func() {
		err := r.src.Run(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			log.Error("the user_events source stopped", zap.Error(err))
		}
	})
	wg.Go(func() { r.flushEvery(ctx) })
	go func() { wg.Wait(); close(r.done) }()
	return nil
}

// newObs makes the receiver's ObsReport: its transport is the source's
// name.
func newObs(r *eventsReceiver) (*receiverhelper.ObsReport, error) {
	transport := "user_events"
	if r.src != nil {
		transport = r.src.Name()
	}
	return receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID: r.set.ID, Transport: transport, LongLivedCtx: true, ReceiverCreateSettings: r.set})
}

// add maps a sample; a full batch goes to the pipelines at once. It runs
// on the source's goroutine.
func (r *eventsReceiver) add(s *perfdata.Sample) {
	r.mu.Lock()
	r.mapper.add(s, uint64(time.Now().UnixNano()))
	full := r.mapper.b.n >= r.cfg.BatchSize
	r.mu.Unlock()
	if full {
		r.flush(context.Background())
	}
}

// flushEvery sends what waits every BatchDelay, and logs the records the
// source lost since the last time.
func (r *eventsReceiver) flushEvery(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.ticker.C:
			r.flush(ctx)
			r.logLost()
		}
	}
}

// logLost logs the records the source lost since it last did: they are
// counted, and shown.
func (r *eventsReceiver) logLost() {
	st := r.src.Stats()
	r.mu.Lock()
	n := st.Lost - r.lost
	r.lost = st.Lost
	r.mu.Unlock()
	if n > 0 {
		r.set.Logger.Warn("user_events records lost before the receiver took them; a larger buffer_kb may help",
			zap.Uint64("lost", n), zap.Uint64("lost_total", st.Lost))
	}
}

// flush gives what is batched to the pipelines: the logs and spans as
// the mapping wrote them in pdata, the otlp_metrics requests read by
// pdata.
func (r *eventsReceiver) flush(ctx context.Context) {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	if r.mapper.b.n == 0 {
		r.mu.Unlock()
		return
	}
	b := r.mapper.take()
	r.mu.Unlock()
	if b.count[otlp.Logs] > 0 {
		r.deliverLogs(ctx, b.logs)
	}
	if b.count[otlp.Traces] > 0 {
		r.deliverTraces(ctx, b.traces)
	}
	if b.count[otlp.Metrics] > 0 {
		r.consumeMetrics(ctx, b.metrics)
	}
}

func (r *eventsReceiver) deliverLogs(ctx context.Context, ld plog.Logs) {
	n := ld.LogRecordCount()
	ctx = r.obs.StartLogsOp(ctx)
	err := errNoPipeline
	if r.logs != nil {
		err = r.logs.ConsumeLogs(ctx, ld)
	}
	r.obs.EndLogsOp(ctx, format, n, err)
	if err != nil {
		r.set.Logger.Warn("log records refused", zap.Int("records", n), zap.Error(err))
	}
}

func (r *eventsReceiver) deliverTraces(ctx context.Context, td ptrace.Traces) {
	n := td.SpanCount()
	ctx = r.obs.StartTracesOp(ctx)
	err := errNoPipeline
	if r.traces != nil {
		err = r.traces.ConsumeTraces(ctx, td)
	}
	r.obs.EndTracesOp(ctx, format, n, err)
	if err != nil {
		r.set.Logger.Warn("spans refused", zap.Int("spans", n), zap.Error(err))
	}
}

// consumeMetrics gives the otlp_metrics records' requests to the metrics
// pipeline, as one. The requests are what programs wrote: each is parsed
// alone — joined, one that ends short would take the next one's bytes as
// its own — and each that does not parse is kept as a log record with its
// bytes (linux.raw) and the error.
func (r *eventsReceiver) consumeMetrics(ctx context.Context, each [][]byte) {
	var u pmetric.ProtoUnmarshaler
	md := pmetric.NewMetrics()
	bad := plog.NewLogs()
	for _, req := range each {
		one, err := u.UnmarshalMetrics(req)
		if err != nil {
			badRecord(bad, req, err)
			continue
		}
		one.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	if bad.LogRecordCount() > 0 {
		r.set.Logger.Warn("otlp_metrics records that do not parse are sent as log records with their bytes",
			zap.Int("records", bad.LogRecordCount()))
		r.deliverLogs(ctx, bad)
	}
	if md.ResourceMetrics().Len() == 0 {
		return
	}
	n := md.DataPointCount()
	ctx = r.obs.StartMetricsOp(ctx)
	err := errNoPipeline
	if r.metrics != nil {
		err = r.metrics.ConsumeMetrics(ctx, md)
	}
	r.obs.EndMetricsOp(ctx, format, n, err)
	if err != nil {
		r.set.Logger.Warn("metric points refused", zap.Int("points", n), zap.Error(err))
	}
}

// badRecord adds to ld a log record of an otlp_metrics record whose
// request does not parse: its bytes as linux.raw, and why.
func badRecord(ld plog.Logs, req []byte, err error) {
	var sl plog.ScopeLogs
	if ld.ResourceLogs().Len() == 0 {
		sl = ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
		sl.Scope().SetName(metadata.ScopeName)
	} else {
		sl = ld.ResourceLogs().At(0).ScopeLogs().At(0)
	}
	lr := sl.LogRecords().AppendEmpty()
	lr.SetEventName(export.MetricsEvent)
	lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	lr.Attributes().PutEmptyBytes(export.AttrUndecodable).FromRaw(req)
	lr.Attributes().PutStr("error.message", "the ExportMetricsServiceRequest does not parse: "+err.Error())
}

// Shutdown stops the source when the last of the config's receivers
// stops, and gives the pipelines what was batched.
func (r *eventsReceiver) Shutdown(ctx context.Context) error {
	r.life.Lock()
	defer r.life.Unlock()
	if r.starts > 1 {
		r.starts--
		return nil
	}
	defer r.forget()
	if r.starts == 0 || r.cancel == nil {
		return nil
	}
	r.starts = 0
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("userevents receiver: the source did not stop: %w", ctx.Err())
	}
	r.ticker.Stop()
	r.flush(ctx)
	r.logLost()
	r.cancel = nil
	return nil
}
