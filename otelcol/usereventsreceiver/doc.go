// Package usereventsreceiver is the OpenTelemetry Collector's userevents
// receiver: it takes Linux user_events as they are written — from the
// kernel's perf events, or from a uetrace daemon's session where the
// kernel has no user_events — and gives them to the Collector's pipelines
// as the telemetry they were made from.
//
// The mapping is uetrace export's (package export's Encoder), written
// straight into pdata (pdataWriter) where export writes OTLP protobuf, so
// the receiver and `uetrace export` send the same thing
// (TestPdataSameAsOTLP):
//
//   - a Common Schema log record (OpenTelemetry's Rust and C++ user_events
//     log exporters', uetrace's ehotel) → the LogRecord it was: time,
//     body, severity number and text, event name, trace and span ids,
//     attributes, and service.name and service.instance.id in the resource;
//   - a Common Schema span (PartB "Span": the Rust trace exporter's,
//     ehotel's) → the span: ids, parent, name, kind, times, status, links,
//     attributes;
//   - an otlp_metrics record (the Rust, C++ and ehotel metrics exporters')
//     → its ExportMetricsServiceRequest, as written;
//   - any other event → a log record with its fields as typed attributes
//     (by the EventHeader metadata or the tracefs format), and the
//     tracepoint, thread and CPU;
//   - what does not decode → a log record with its bytes as linux.raw:
//     nothing is dropped for being unreadable.
//
// Every resource also holds host.name, process.pid and
// process.executable.name.
//
// Self-observability is the receiver helper's (ObsReport): accepted and
// refused log records, spans and metric points. Items of a signal that no
// pipeline of this receiver takes are counted as refused, with an error
// that says so. Records the source lost (its buffers overflowed) are
// logged as warnings with their count.
//
// What differs from the SDK's own OTLP exporter (package export,
// commonschema.go, says it in detail): the resource is the process's (the
// SDK's other resource attributes are not written by the user_events
// exporters), and a span's or log's instrumentation scope is this
// receiver's. What differs from uetrace export: a key an event gives
// twice in one record or map is one attribute here, of the last value
// (pdata's maps hold a value a key), where export sends both.
package usereventsreceiver

//go:generate mdatagen metadata.yaml
