package usereventsreceiver

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/uetrace/uetrace/otelcol/usereventsreceiver/internal/metadata"
)

// NewFactory returns the userevents receiver's factory.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithLogs(createLogs, metadata.LogsStability),
		receiver.WithTraces(createTraces, metadata.TracesStability),
		receiver.WithMetrics(createMetrics, metadata.MetricsStability))
}

// receivers are the receivers made, by their config: the logs, traces and
// metrics receivers of one config are one receiver reading one source
// (the Collector's sharedcomponent pattern).
var receivers = shared{m: map[*Config]*eventsReceiver{}}

type shared struct {
	mu sync.Mutex
	m  map[*Config]*eventsReceiver
}

// get returns the receiver of cfg, made if there is none; set gives it
// its consumer of one signal.
func (s *shared) get(set receiver.Settings, cfg component.Config, with func(*eventsReceiver)) *eventsReceiver {
	c := cfg.(*Config)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.m[c]
	if r == nil {
		r = newReceiver(set, c, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.m, c)
		})
		s.m[c] = r
	}
	with(r)
	return r
}

func createLogs(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Logs) (receiver.Logs, error) {
	return receivers.get(set, cfg, func(r *eventsReceiver) { r.logs = next }), nil
}

func createTraces(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return receivers.get(set, cfg, func(r *eventsReceiver) { r.traces = next }), nil
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return receivers.get(set, cfg, func(r *eventsReceiver) { r.metrics = next }), nil
}
