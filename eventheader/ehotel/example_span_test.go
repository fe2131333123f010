package ehotel_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/uetrace/uetrace/eventheader/ehotel"
)

// A program tracing through OpenTelemetry's Go SDK to user_events: the span
// processor writes each sampled span when it ends, synchronously and only
// while something listens, to MyCompany_MyComponent_L4K1, as
// OpenTelemetry's Rust user_events trace exporter does.
func Example_spans() {
	proc, err := ehotel.NewSpanProcessor("MyCompany_MyComponent", nil)
	if err != nil {
		panic(err) // an invalid provider name
	}
	if err := proc.Exporter().Err(); err != nil {
		fmt.Println("spans go nowhere:", err) // no user_events, no daemon
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))),
		sdktrace.WithSpanProcessor(proc),
	)
	defer provider.Shutdown(context.Background())

	_, span := provider.Tracer("checkout").Start(context.Background(), "charge card")
	span.SetAttributes(attribute.String("http.request.method", "POST"), attribute.Int("amount", 1299))
	span.SetStatus(codes.Error, "payment declined")
	span.End()
}
