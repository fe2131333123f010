package ehotel_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// A program logging through OpenTelemetry's Logs SDK to user_events: the
// processor writes each record, synchronously and only while something
// listens, to MyCompany_MyComponent_L<level>K1, as OpenTelemetry's Rust
// user_events exporter does; `perf record -e
// user_events:MyCompany_MyComponent_L2K1` or uetrace records the errors.
func Example_program() {
	proc, err := ehotel.NewProcessor("MyCompany_MyComponent", nil)
	if err != nil {
		panic(err) // an invalid provider name
	}
	if err := proc.Exporter().Err(); err != nil {
		fmt.Println("logs go nowhere:", err) // no user_events, no daemon
	}
	provider := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))),
		sdklog.WithProcessor(proc),
	)
	defer provider.Shutdown(context.Background())
	logger := provider.Logger("checkout")

	var r log.Record
	r.SetSeverity(log.SeverityError)
	r.SetBody(attribute.StringValue("payment declined"))
	r.AddAttributes(attribute.String("card", "visa"), attribute.Int("amount", 1299))
	logger.Emit(context.Background(), r)
}

// The events read back: an in-process user_events subsystem, a session
// attached to the provider's tracepoints as perf would be, and
// eventheader.Decode for what it received.
func Example() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	proc, _ := ehotel.NewProcessor("MyProvider", &ehotel.Options{File: f})
	ss, _ := k.NewSession("user_events:MyProvider_L2K1")
	defer ss.Close() // errors only

	provider := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))),
		sdklog.WithProcessor(proc),
	)
	defer provider.Shutdown(context.Background())
	logger := provider.Logger("checkout")
	ctx := context.Background()
	fmt.Println("errors enabled:", logger.Enabled(ctx, log.EnabledParameters{Severity: log.SeverityError}))
	fmt.Println("info enabled:", logger.Enabled(ctx, log.EnabledParameters{Severity: log.SeverityInfo}))

	for _, sev := range []log.Severity{log.SeverityInfo, log.SeverityError} {
		var r log.Record
		r.SetTimestamp(time.Date(2026, 11, 25, 19, 0, 0, 250e6, time.UTC))
		r.SetSeverity(sev)
		r.SetSeverityText(sev.String())
		r.SetBody(attribute.StringValue("payment declined"))
		r.AddAttributes(attribute.String("card", "visa"), attribute.Int("amount", 1299))
		logger.Emit(ctx, r) // no event is built for the INFO record: nobody listens
	}

	recs := ss.Records()
	for _, rec := range recs {
		ev, _ := eventheader.Decode(rec.Name, rec.Payload())
		js, _ := ev.AppendJSON(nil)
		fmt.Printf("%s %s\n", rec.Name, js)
	}
	// Output:
	// errors enabled: true
	// info enabled: false
	// MyProvider_L2K1 { "n": "MyProvider:Log", "__csver__": 1024, "PartA": { "time": "2026-11-25T19:00:00.250Z", "ext_cloud_role": "checkout" }, "PartC": { "card": "visa", "amount": 1299 }, "PartB": { "_typeName": "Log", "body": "payment declined", "severityNumber": 17, "severityText": "ERROR" }, "meta": { "level": 2, "keyword": "0x1" } }
}
