// Package commonschema names what Microsoft's Common Schema 4.0 — the
// layout OpenTelemetry's user_events exporters (Rust, C++, .NET Geneva)
// give their EventHeader events — puts where: the version field, the
// parts, the type names, and the span attributes that go into PartB under
// names of their own. Writers (eventheader/ehotel) and readers (export)
// take them from here, so that the two agree.
//
// It holds names only; building and decoding events is package
// eventheader's.
package commonschema

// Version is the value of the field "__csver__" every event starts with:
// 0x400, Common Schema 4.0.
const Version = 0x400

// The event's fields, in the order the exporters write them.
const (
	VersionField = "__csver__"
	PartA        = "PartA" // envelope: time, trace context, cloud role
	PartB        = "PartB" // the type's own fields; "_typeName" names the type
	PartC        = "PartC" // everything else: the attributes
	TypeName     = "_typeName"
)

// The types an event's PartB says it is.
const (
	TypeLog  = "Log"
	TypeSpan = "Span"
)

// SpanAttributes maps the span attributes OpenTelemetry's Rust trace
// exporter writes into PartB to their PartB names
// (get_well_known_attributes in
// opentelemetry-user-events-trace/src/trace/exporter.rs): the semantic
// conventions' database, HTTP, messaging and RPC attributes.
var SpanAttributes = map[string]string{
	"db.system.name":             "dbSystem",
	"db.namespace":               "dbName",
	"db.query.text":              "dbStatement",
	"http.request.method":        "httpMethod",
	"url.full":                   "httpUrl",
	"http.response.status_code":  "httpStatusCode",
	"messaging.system":           "messagingSystem",
	"messaging.destination.name": "messagingDestination",
	"messaging.url":              "messagingUrl",
	"rpc.system.name":            "rpcSystem",
	"rpc.response.status_code":   "rpcGrpcStatusCode",
}

// SpanAttributeOf is the attribute a PartB field of a span stands for
// ("httpMethod" → "http.request.method"), or "" for a PartB field that is
// none.
func SpanAttributeOf(partB string) string { return spanAttributeOf[partB] }

var spanAttributeOf = func() map[string]string {
	m := make(map[string]string, len(SpanAttributes))
	for attr, b := range SpanAttributes {
		m[b] = attr
	}
	return m
}()
