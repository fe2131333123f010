// Command sdklogs sends log records through the OpenTelemetry Go SDK's
// own OTLP log exporter (otlploggrpc or otlploghttp, behind the SDK's
// batch processor): the anchor of uetrace export's benchmarks — what the
// SDK costs to deliver, to the same Collector in the same run, records of
// the shape export's are (the attributes, kinds and sizes of the
// benchmarks' EventHeader events, with the resource and scope export
// gives them).
//
//	sdklogs -n 200000 -protocol grpc -endpoint 127.0.0.1:4317
//
// It emits the records from one goroutine, a batch at a time, each batch
// flushed (ForceFlush) before the next: the queue never fills, so none is
// dropped, and the heap stays a batch's (a queue of every record would
// make the SDK's cost the garbage collector's). Then it shuts the provider
// down and prints what it emitted and the errors the SDK reported; it
// exits 1 if there was one. It lives in the
// Collector distribution's module because the exporters need gRPC, which
// uetrace's own module does not take.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

func main() {
	n := flag.Int("n", 100000, "records to send")
	protocol := flag.String("protocol", "grpc", "grpc or http")
	endpoint := flag.String("endpoint", "127.0.0.1:4317", "the Collector's host:port")
	batch := flag.Int("batch", 512, "records a request carries (the SDK's default, and uetrace export's)")
	flag.Parse()
	if err := run(*n, *protocol, *endpoint, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "sdklogs:", err)
		os.Exit(1)
	}
}

func run(n int, protocol, endpoint string, batch int) error {
	ctx := context.Background()
	var errs atomic.Int64
	var lastErr atomic.Value
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		errs.Add(1)
		lastErr.Store(err.Error())
	}))
	var exp sdklog.Exporter
	var err error
	switch protocol {
	case "grpc":
		exp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(endpoint), otlploggrpc.WithInsecure())
	case "http":
		exp, err = otlploghttp.New(ctx, otlploghttp.WithEndpoint(endpoint), otlploghttp.WithInsecure())
	default:
		err = fmt.Errorf("-protocol %q: want grpc or http", protocol)
	}
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	res := resource.NewSchemaless(attribute.String("host.name", host), attribute.Int("process.pid", os.Getpid()),
		attribute.String("process.executable.name", "exportme"), attribute.String("service.name", "export-test"))
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res),
		sdklog.WithProcessor(sdklog.NewBatchProcessor(exp, sdklog.WithMaxQueueSize(batch), sdklog.WithExportMaxBatchSize(batch))))
	logger := lp.Logger("github.com/uetrace/uetrace/internal/export", log.WithInstrumentationVersion("1"))

	start := time.Now()
	var r log.Record
	attrs := make([]attribute.KeyValue, 0, 20)
	for i := range n {
		// A benchmark EventHeader event as uetrace export maps it: its
		// tracepoint, thread and CPU, the EventHeader metadata, and its
		// fields (a struct as a map, an array, an errno as text).
		now := time.Now()
		r = log.Record{}
		r.SetTimestamp(now)
		r.SetObservedTimestamp(now)
		r.SetSeverity(log.SeverityInfo)
		r.SetSeverityText("INFO")
		r.SetEventName("UetraceTest:Request")
		attrs = append(attrs[:0],
			attribute.String("linux.tracepoint", "user_events:UetraceTest_L4K5"),
			attribute.Int("thread.id", 4242+i%3),
			attribute.Int("linux.cpu", i%2),
			attribute.String("eventheader.provider", "UetraceTest"),
			attribute.Int("eventheader.level", 4),
			attribute.Int("eventheader.keyword", 5),
			attribute.Int("eventheader.opcode", 1),
			attribute.Int("eventheader.id", 7),
			attribute.Int("eventheader.version", 2),
			attribute.String("eventheader.activity_id", "01020304-0506-0708-090a-0b0c0d0e0f10"),
			attribute.Int("seq", i),
			attribute.String("path", "/p/"+strconv.Itoa(i)),
			attribute.Bool("ok", i%2 == 0),
			attribute.Float64("ratio", float64(i)/4),
			attribute.Map("pt", attribute.Int("x", i), attribute.Int("y", -i)),
			attribute.Slice("arr", attribute.IntValue(i%65536), attribute.IntValue(2), attribute.IntValue(3)),
			attribute.String("err", "ENOENT(2)"),
		)
		r.AddAttributes(attrs...)
		logger.Emit(ctx, r)
		if (i+1)%batch == 0 {
			if err := lp.ForceFlush(ctx); err != nil {
				errs.Add(1)
				lastErr.Store(err.Error())
			}
		}
	}
	if err := lp.Shutdown(ctx); err != nil {
		errs.Add(1)
		lastErr.Store(err.Error())
	}
	fmt.Fprintf(os.Stderr, "[ sdklogs: %d records sent in %s; %d errors ]\n", n, time.Since(start).Round(time.Millisecond), errs.Load())
	if errs.Load() > 0 {
		return fmt.Errorf("%d errors, the last: %v", errs.Load(), lastErr.Load())
	}
	return nil
}
