// Package ehotel writes OpenTelemetry's Go SDK telemetry to Linux
// user_events as OpenTelemetry's Rust user_events exporters do, so that
// the agents that decode their events decode these:
//
//   - logs (go.opentelemetry.io/otel/sdk/log): an exporter and a processor
//     writing each record as the EventHeader event of the crate
//     opentelemetry-user-events-logs of
//     open-telemetry/opentelemetry-rust-contrib, whose
//     src/logs/exporter.rs (export_log_data, build_part_a) and
//     src/logs/processor.rs the layout below (FORMAT) follows;
//   - spans (go.opentelemetry.io/otel/sdk/trace): an exporter and a
//     processor writing each span as the EventHeader event "Span" of the
//     crate opentelemetry-user-events-trace (src/trace/exporter.rs,
//     export_span; SPANS below);
//   - metrics (go.opentelemetry.io/otel/sdk/metric): an exporter writing
//     each data point as the plain event otlp_metrics of the crate
//     opentelemetry-user-events-metrics (src/exporter/mod.rs,
//     src/tracepoint/mod.rs; METRICS below).
//
// Logs and spans are Common Schema over EventHeader; metrics are OTLP
// protobuf.
//
// What it does:
//   - NewProcessor: an sdklog.Processor that answers Enabled from the enable
//     bit of the record's tracepoint and, in OnEmit, checks that bit before
//     building anything, then builds and writes the event synchronously on
//     the caller's goroutine, as the Rust crate's Processor does. This is
//     the one to use: the SDK's BatchProcessor copies and queues every
//     record before an exporter could tell that nobody listens.
//   - NewExporter: the same writer as an sdklog.Exporter, for pipelines
//     that want the SDK's processors; it checks the enable bit per record
//     at Export.
//   - one provider per exporter, named as in Rust (1 to 233 ASCII letters,
//     digits and '_'), whose five tracepoints "<provider>_L1K1" ...
//     "<provider>_L5K1" are registered at once through package
//     eventheader/ehprovider on any userevents backend (the kernel, the
//     uetrace daemon, in-process), so that perf or uetrace can attach before
//     the first record.
//
// NewSpanProcessor and NewSpanExporter are the same for spans, on one
// tracepoint "<provider>_L4K1".
//
// What it does not: no event name callback (Rust's
// experimental_eventname_callback): every event is named "Log"; no
// buffering, batching or retry — a write either reaches user_events or
// returns an error. It does not decode: package eventheader does, and
// mapping these events back to OTLP log records is `uetrace export`'s.
//
// # SPANS
//
// One span is one EventHeader event named "Span" written, when the span
// ends and if it is sampled, to "<provider>_L4K1" (level 4, keyword 1), the
// header as for logs. The fields, in this order:
//
//	__csver__               value32  UnsignedInt  always: 1024 (0x400)
//	PartA                   struct
//	  time                  string   -            always: the span's end, as a log record's time
//	  ext_dt_traceId        string   -            always: 32 lowercase hex digits
//	  ext_dt_spanId         string   -            always: 16 lowercase hex digits
//	  ext_cloud_role        string   -            the resource has service.name: its value
//	  ext_cloud_roleInstance string  -            the resource has service.instance.id: its value
//	PartB                   struct
//	  _typeName             string   -            always: "Span"
//	  name                  string   -            always: the span's name
//	  startTime             string   -            always: the span's start
//	  success               value8   Boolean      always: the status is not Error
//	  kind                  value32  UnsignedInt  always: Internal 0 (and Unspecified), Server 1, Client 2,
//	                                              Producer 3, Consumer 4
//	  parentId              string   -            the parent span id is valid: 16 hex digits
//	  links                 string   -            the span has links: [{"toTraceId":"…","toSpanId":"…"},…]
//	  <Common Schema name>  <value>               each well-known attribute, in the span's order:
//	                                              db.system.name dbSystem, db.namespace dbName,
//	                                              db.query.text dbStatement, http.request.method httpMethod,
//	                                              url.full httpUrl, http.response.status_code httpStatusCode,
//	                                              messaging.system messagingSystem,
//	                                              messaging.destination.name messagingDestination,
//	                                              messaging.url messagingUrl, rpc.system.name rpcSystem,
//	                                              rpc.response.status_code rpcGrpcStatusCode
//	  statusMessage         string   -            the status is Error with a description, and there is
//	                                              no httpStatusCode
//	PartC                   struct   of the other attributes, in the span's order, when there is one; at
//	                                 most 127
//
// Values are written as for logs, with the same differences from Rust
// (which writes "" for every kind but bool, int64, float64 and string).
// The span's events, dropped counts, scope and status code Unset against
// Ok are not written, as in Rust.
//
// # FORMAT
//
// One record is one EventHeader event written to the tracepoint
// "<provider>_L<level>K1" (keyword 1, no provider group), the level from
// the record's severity number:
//
//	severity number   1-8 TRACE, DEBUG   9-12 INFO   13-16 WARN   17-20 ERROR   21-24 FATAL
//	EventHeader level 5 Verbose          4 Info      3 Warning    2 Error       1 CriticalError
//
// A record whose severity number is outside 1..24 is not written (an
// error, as in Rust). The header: flags pointer64|little-endian|extension,
// version 0, id 0, tag 0, opcode 0 (Info), the level; no activity id. The
// event name is "Log". The fields, in this order (encoding, format — "-"
// for the default — and when the field is present):
//
//	__csver__               value32  UnsignedInt  always: 1024 (0x400), the Common Schema version
//	PartA                   struct of the fields below that are present
//	  time                  string   -            always: the record's Timestamp, else its ObservedTimestamp,
//	                                              else now; UTC RFC 3339 with "Z" and 0, 3, 6 or 9 fractional
//	                                              digits, the fewest that keep every non-zero one
//	                                              ("2024-01-01T12:34:56.789Z", "2024-01-01T12:34:56Z")
//	  ext_dt_traceId        string   -            trace or span id valid: 32 lowercase hex digits
//	  ext_dt_spanId         string   -            trace or span id valid: 16 lowercase hex digits
//	  ext_cloud_role        string   -            the resource has service.name: its value
//	  ext_cloud_roleInstance string  -            the resource has service.instance.id: its value
//	PartC                   struct   of the attributes, when there is at least one
//	  <attribute key>       <value>               every attribute in the record's order, except an
//	                                              "event_id" of type int64; then the resource attributes
//	                                              named by Options.ResourceAttributes, in key order (never
//	                                              service.name or service.instance.id); at most 127;
//	                                              a key's ';' and NUL bytes written as '_'
//	PartB                   struct of the fields below that are present
//	  _typeName             string   -            always: "Log"
//	  body                  <value>               the body is not empty
//	  severityNumber        value16  SignedInt    always: the severity number
//	  severityText          string   -            the severity text is not ""
//	  eventId               value64  SignedInt    an "event_id" attribute of type int64: its value (the last one)
//	  name                  string   -            the event name is not blank (spaces only): as it is
//
// "string" is string_length16_char8 (a u16 byte count, then UTF-8), the
// structs' field counts are exact. A <value> — an attribute's or the
// body's — is written by its type:
//
//	bool       value8                 Boolean     0 or 1
//	int64      value64                SignedInt
//	float64    value64                Float
//	string     string_length16_char8  -
//	[]byte     binary_length16_char8  -  (hex)  the bytes
//	any other  string_length16_char8  StringJSON  the value as JSON
//
// The first four are Rust's encodings exactly. Where Rust writes an empty
// string — bytes, slices, maps — this writes the value: bytes as binary,
// and []bool, []int64, []float64, []string, slices and maps as JSON text in
// a string field whose format is StringJSON, which tells it from a plain
// string. The JSON is OpenTelemetry's "AnyValue representation for non-OTLP
// protocols" (attribute.Value.String): a map an object (keys in the order
// the record holds them), a
// slice an array, numbers and booleans JSON literals, NaN and the
// infinities the strings "NaN", "Infinity" and "-Infinity", bytes a base64
// string, an empty value null. An empty value on its own (not in a slice
// or map) is that JSON's null too, a StringJSON field "null". An
// event whose metadata and data exceed 65467 bytes (65535 - 68) is not
// written and is an ERANGE error, as Rust's builder refuses it (perf, for
// its part, drops any tracepoint record over 8 KiB, PERF_MAX_TRACE_SIZE,
// and ftrace one over about 4 KiB).
//
// # Differences from the Rust exporter
//
// Besides the values Rust writes as "": a PartC of more than 127 fields
// keeps the first 127 (Rust's count wraps and garbles the event); the
// trace ids are written when the trace or the span id is valid (the Go SDK
// always carries them, zero without a span; Rust writes them when the
// record has a trace context); resource attributes are read from each
// record's resource (cached per resource) rather than set once, and
// written in key order (Rust's follow a hash map's); an attribute key's ';'
// and NUL bytes, which the format reserves, become '_' (Rust writes them,
// and decoders split the name or cut it); and a record of an invalid
// severity is an error only while one of the provider's tracepoints is
// enabled.
//
// # METRICS
//
// NewMetricExporter registers the event
//
//	otlp_metrics u32 protocol; char[8] version; __rel_loc u8[] buffer
//
// at once, and its Export, while the event is enabled, writes one record a
// data point: protocol 0 (protobuf), version "v0.19.00", and the buffer
// an ExportMetricsServiceRequest holding the whole resource, the point's
// scope (name, version, attributes, schema URL), its metric (name,
// description, unit) and the aggregation — Gauge, Sum, Histogram,
// ExponentialHistogram — with that one point, so that each record fits in
// the 64 KiB a record can hold (a request over 65360 bytes is not
// written, and Export's error counts it). The fields are in the .proto's
// declaration order, which is prost's, and what proto3 omits is omitted,
// so a request is the Rust exporter's byte for byte but for the order of
// the resource's attributes (a hash map's there, key order here). As in
// Rust, the temporality of every instrument is delta, a histogram's sum
// and an exponential histogram's buckets are always written, exemplars
// never. Where Rust has no aggregation — Summary, which the Go SDK's
// bridges make — the point is written as OTLP's SummaryDataPoint.
package ehotel
