package ehotel_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/uetrace/uetrace/eventheader/ehotel"
)

// A program measuring through OpenTelemetry's Go SDK to user_events: every
// minute the reader pushes the data points to the exporter, which writes
// each as an otlp_metrics record while something listens (`perf record -e
// user_events:otlp_metrics`, or uetrace).
func Example_metrics() {
	exp := ehotel.NewMetricExporter(nil)
	if err := exp.Err(); err != nil {
		fmt.Println("metrics go nowhere:", err) // no user_events, no daemon
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(
		sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Minute))))
	defer provider.Shutdown(context.Background())

	orders, _ := provider.Meter("checkout").Int64Counter("orders")
	orders.Add(context.Background(), 1)
}
