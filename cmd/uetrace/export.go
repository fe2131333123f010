package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/export/live"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
)

type exportArgs struct {
	input                         string
	events                        []string
	pids                          []int
	comms                         []string
	duration                      time.Duration
	bufferKB                      int
	noFollow                      bool
	quiet                         bool
	protocol, endpoint, service   string
	compression                   string
	headers                       []string
	batchSize, queue, senders     int
	batchDelay, timeout, retryFor time.Duration
	shutdown                      time.Duration
	initialBackoff, maxBackoff    time.Duration
}

func newExportCmd(g *globals) *cobra.Command {
	var a exportArgs
	cmd := &cobra.Command{
		Use:   "export [-i FILE] [-e EVENT]... [--endpoint URL] [--protocol grpc|http]",
		Short: "Send events to an OpenTelemetry Collector as OTLP logs, spans and metrics",
		Long: `export sends events as OpenTelemetry telemetry (OTLP) to a Collector, over gRPC
(default, port 4317) or OTLP/HTTP protobuf (--protocol http, port 4318);
--compression gzip compresses the requests, --header adds headers (e.g. an
authorization).

Without -i it takes every process's events live, as "uetrace record" does:
from the kernel's perf events when it has user_events, else from the uetrace
daemon; -e, --pid, --comm, --buffer-kb and --no-follow select as for record.
It runs until interrupted (Ctrl-C) or until --duration has passed. With -i it
sends the samples of a perf.data file ("-": a pipe-mode stream on standard
input) in time order, as report reads them, and exits when they are
delivered.

Each event is a log record: its name (system:name, or Provider:Event for
EventHeader events) as the event name, its fields as attributes — an
EventHeader event's nested structs as maps, arrays as arrays, its level as
the severity, its keyword, opcode and activity ids as attributes — and the
tracepoint, thread id and CPU. Each process is a resource with host.name,
process.pid, process.executable.name and --service-name. Times are wall-clock
times: live, from CLOCK_MONOTONIC; from a file, by its clock data (perf record
-k CLOCK_MONOTONIC), else the perf time is sent as linux.perf_time.

What OpenTelemetry's own user_events exporters (Rust, C++, Go's
eventheader/ehotel) wrote goes back as the SDK had it: a Common Schema log
record with its time, severity, body, event name, trace and span ids,
attributes and service; a Common Schema span to the Collector's trace
service; an otlp_metrics record's request, as written, to its metrics
service.

Records are sent in batches (--batch-size, or after --batch-delay). A batch
that fails with a retryable error (gRPC UNAVAILABLE and the like, HTTP 429,
502, 503, 504, or no answer) is retried with exponential backoff, honouring
the Collector's Retry-After or RetryInfo, for up to --retry-for. Batches wait
in a queue of --queue batches; live, a batch that finds it full is dropped
rather than stall the event buffers; a file waits. On Ctrl-C what is queued
is sent within --shutdown-timeout (a second Ctrl-C stops at once). Every
record dropped is counted: the summary shows delivered, rejected and dropped,
and the exit status is 1 if any record was not delivered.

On a terminal a status line shows events/s, delivered, queued and dropped.`,
		Example: `  uetrace export -e 'myapp_*' --endpoint http://collector:4317
  uetrace export -i perf.data --protocol http --endpoint http://localhost:4318
  perf record -k CLOCK_MONOTONIC -e 'user_events:*' -a -o - | uetrace export -i -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runExport(cmd, g, a) },
	}
	f := cmd.Flags()
	f.StringVarP(&a.input, "input", "i", "", `a perf.data file to send ("-": standard input); default: events live`)
	f.StringArrayVarP(&a.events, "event", "e", nil, "live: event to send: system:name or name, globs allowed (repeatable; default every user event)")
	f.IntSliceVar(&a.pids, "pid", nil, "live: only these processes")
	f.StringArrayVar(&a.comms, "comm", nil, "live: only tasks with this name (repeatable)")
	f.DurationVar(&a.duration, "duration", 0, "live: stop after this long (default: until interrupted)")
	f.IntVar(&a.bufferKB, "buffer-kb", 0, "live: buffer size in KiB, as for record")
	f.BoolVar(&a.noFollow, "no-follow", false, "live: only events that exist at the start")
	f.BoolVarP(&a.quiet, "quiet", "q", false, "no status line or notices; the summary is still printed")
	f.StringVar(&a.protocol, "protocol", "grpc", "grpc or http (OTLP/HTTP protobuf)")
	f.StringVar(&a.endpoint, "endpoint", "", "the Collector's URL, http://host:port (cleartext; h2c for gRPC) or https://host:port (default http://localhost:4317, or :4318 for http)")
	f.StringArrayVar(&a.headers, "header", nil, "a request header, KEY=VALUE (repeatable)")
	f.StringVar(&a.compression, "compression", "none", "gzip or none: compress requests")
	f.StringVar(&a.service, "service-name", "", "service.name of every resource")
	f.IntVar(&a.batchSize, "batch-size", 512, "most records per request")
	f.DurationVar(&a.batchDelay, "batch-delay", 200*time.Millisecond, "longest a record waits for its batch to fill")
	f.IntVar(&a.queue, "queue", 64, "batches that may wait to be sent")
	f.IntVar(&a.senders, "senders", 2, "requests in flight at once")
	f.DurationVar(&a.timeout, "timeout", 10*time.Second, "each request's time limit")
	f.DurationVar(&a.retryFor, "retry-for", time.Minute, "how long a batch is retried before it is dropped")
	f.DurationVar(&a.initialBackoff, "initial-backoff", 100*time.Millisecond, "first wait before a retry (doubled each time)")
	f.DurationVar(&a.maxBackoff, "max-backoff", 5*time.Second, "longest wait between retries")
	f.DurationVar(&a.shutdown, "shutdown-timeout", 10*time.Second, "at the end, how long to wait for what is queued to be sent")
	return cmd
}

func runExport(cmd *cobra.Command, g *globals, a exportArgs) error {
	stderr := &lineWriter{w: cmd.ErrOrStderr()}
	proto, err := otlp.ParseProtocol(a.protocol)
	if err != nil {
		return asOp(err, "--protocol", "", a.protocol)
	}
	if a.compression != "gzip" && a.compression != "none" {
		return fmt.Errorf("--compression %q: want gzip or none: %w", a.compression, unix.EINVAL)
	}
	headers := map[string]string{}
	for _, h := range a.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return fmt.Errorf("--header %q: want KEY=VALUE: %w", h, unix.EINVAL)
		}
		headers[k] = v
	}
	if a.input != "" && (len(a.events) > 0 || len(a.pids) > 0 || len(a.comms) > 0 || a.duration > 0) {
		return fmt.Errorf("-e, --pid, --comm and --duration select live events; with -i the whole file is sent: %w", unix.EINVAL)
	}
	notify := func(msg string) {}
	if !a.quiet {
		notify = func(msg string) { stderr.line("uetrace export: " + msg) }
	}
	opts := export.Options{
		Protocol: proto, Endpoint: a.endpoint, Headers: headers, ServiceName: a.service, Gzip: a.compression == "gzip",
		BatchSize: a.batchSize, BatchDelay: a.batchDelay, QueueSize: a.queue, Senders: a.senders,
		Timeout: a.timeout, RetryFor: a.retryFor, InitialBackoff: a.initialBackoff, MaxBackoff: a.maxBackoff,
		Block: a.input != "", Notify: notify,
	}
	exp, err := export.New(opts)
	if err != nil {
		return err
	}

	// The first SIGINT or SIGTERM stops the source; a second one stops
	// the sending of what is queued.
	srcCtx, stopSrc := context.WithCancel(cmd.Context())
	defer stopSrc()
	closeCtx, stopClose := context.WithCancel(context.Background())
	defer stopClose()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sigDone := make(chan struct{})
	defer close(sigDone)
	go func() {
		n := 0
		for {
			select {
			case <-sigs:
				n++
				if n == 1 {
					stopSrc()
				} else {
					stopClose()
				}
			case <-sigDone:
				return
			}
		}
	}()
	if a.duration > 0 {
		var cancel context.CancelFunc
		srcCtx, cancel = context.WithTimeout(srcCtx, a.duration)
		defer cancel()
	}

	start := time.Now()
	var (
		wg         sync.WaitGroup
		statusDone = make(chan struct{})
		samples    func() uint64
		srcErr     error
		summary    []string
	)
	samples = func() uint64 { return exp.Stats().Received }
	startStatus := func(what string) {
		if a.quiet || !isTerminal(cmd.ErrOrStderr()) {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			exportStatus(exp, samples, what, stderr, start, statusDone)
		}()
	}
	if a.input != "" {
		r, err := openPerfData(cmd, a.input)
		if err != nil {
			exp.Close(closeCtx)
			return err
		}
		defer r.Close()
		startStatus("sending " + a.input)
		st, err := export.File(srcCtx, r, exp)
		srcErr = err
		if st.NoWallClock && st.Samples > 0 {
			summary = append(summary, "note: the file has no clock data (uetrace record -k CLOCK_MONOTONIC writes it, as perf record -k does): times were sent as linux.perf_time")
		}
		if st.Lost > 0 {
			summary = append(summary, fmt.Sprintf("warning: the file says %d records were lost while recording", st.Lost))
		}
		if st.Unknown > 0 {
			summary = append(summary, fmt.Sprintf("warning: %d samples of events with no format in the file were sent undecoded (linux.raw)", st.Unknown))
		}
	} else {
		st, err := exportLive(srcCtx, cmd, g, a, exp, notify, startStatus)
		srcErr = err
		if st.Lost > 0 {
			summary = append(summary, fmt.Sprintf("warning: %d records were lost before export took them; try a larger --buffer-kb", st.Lost))
		}
		if st.Filtered > 0 {
			summary = append(summary, fmt.Sprintf("  (%d samples of other tasks left out by --pid/--comm)", st.Filtered))
		}
	}
	if srcErr != nil && errors.Is(srcErr, context.Canceled) {
		srcErr = nil // Ctrl-C: what was read is sent
	}

	// What is queued goes out within --shutdown-timeout.
	ctx, cancel := context.WithTimeout(closeCtx, a.shutdown)
	defer cancel()
	closeErr := exp.Close(ctx)
	close(statusDone)
	wg.Wait()
	stderr.clear()
	st := exp.Stats()
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "[ uetrace export: %d events in %s to %s (%s): %d delivered, %d rejected, %d dropped (%d queue full, %d failed, %d at shutdown); %d requests, %d retries, %s ]\n",
		st.Received, time.Since(start).Round(time.Millisecond), exp.URL(), proto, st.Delivered, st.Rejected, st.Dropped(),
		st.DroppedQueueFull, st.DroppedFailed, st.DroppedShutdown, st.Requests, st.Retries, byteSize(st.Bytes))
	for _, s := range summary {
		fmt.Fprintln(w, s)
	}
	if srcErr != nil {
		return srcErr
	}
	if closeErr != nil {
		return closeErr
	}
	if st.Rejected > 0 {
		return fmt.Errorf("the Collector rejected %d records: %s", st.Rejected, st.LastError)
	}
	return nil
}

// openPerfData opens a perf.data file, or reads a stream on standard input
// whole ("-").
func openPerfData(cmd *cobra.Command, in string) (*perfdata.Reader, error) {
	if in != "-" {
		return perfdata.Open(in)
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return nil, err
	}
	return perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
}

// exportLive sends events live through a recording's Sink until ctx is
// done. Times: the daemon's samples are CLOCK_MONOTONIC, and the kernel's
// are made so (use_clockid); the recording gives them their wall-clock
// times, by the clocks' offset read once.
func exportLive(ctx context.Context, cmd *cobra.Command, g *globals, a exportArgs, exp *export.Exporter,
	notify func(string), startStatus func(string)) (record.Stats, error) {
	if err := checkPIDs("export", a.pids); err != nil {
		return record.Stats{}, err
	}
	o, err := g.options()
	if err != nil {
		return record.Stats{}, err
	}
	var addErr error
	opts := record.Options{Events: a.events, BufferKB: a.bufferKB, NoFollow: a.noFollow, PIDs: a.pids, Comms: a.comms}
	src, err := live.Open(live.Where{Source: o.Backend, Socket: o.Socket, Tracefs: o.Tracefs}, opts, func(s *perfdata.Sample) {
		if err := exp.Add(ctx, s); err != nil && addErr == nil {
			addErr = err
		}
	}, notify)
	if err != nil {
		return record.Stats{}, err
	}
	if !a.quiet {
		var names []string
		for _, e := range src.Stats().Events {
			names = append(names, e.System+":"+e.Name)
		}
		if len(names) > 4 {
			names = append(names[:4], fmt.Sprintf("and %d more", len(names)-4))
		}
		if len(names) > 0 {
			notify("sending " + strings.Join(names, ", ") + " to " + exp.URL())
		}
	}
	startStatus("exporting from the " + src.Name())
	err = src.Run(ctx)
	if err == nil {
		err = addErr
	}
	return src.Stats(), err
}

func exportStatus(exp *export.Exporter, samples func() uint64, what string, w *lineWriter, start time.Time, done <-chan struct{}) {
	ticker(w, start, done, samples, func(elapsed time.Duration, n uint64, rate float64) string {
		st := exp.Stats()
		return fmt.Sprintf("[ %s %s: %d events, %s/s, %d delivered, %d batches queued, %d dropped, %d retries ]",
			what, elapsed, n, siCount(rate), st.Delivered, st.Queued, st.Dropped(), st.Retries)
	})
}
