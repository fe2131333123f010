package otlp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuilderSpans: spans built field by field, in a request of the
// logs' shape, read back as ExportTraceServiceRequest's spans.
func TestBuilderSpans(t *testing.T) {
	var e Builder
	e.Span()
	e.SpanIDs([16]byte{1, 2}, [8]byte{3}, [8]byte{4})
	e.SpanName("GET /cart")
	e.SpanKind(SpanKindClient)
	e.SpanTimes(100, 250)
	e.Str("http.request.method", "GET")
	e.MapStart("m")
	e.Int("n", 7)
	e.End()
	e.SpanLink([16]byte{0xff}, [8]byte{0xee})
	e.SpanStatus(StatusError, "timed out")
	e.End()
	e.Span()
	e.SpanIDs([16]byte{1, 2}, [8]byte{5}, [8]byte{})
	e.SpanName("root")
	e.SpanStatus(StatusUnset, "")
	e.End()
	if e.Depth() != 0 {
		t.Fatalf("depth %d", e.Depth())
	}
	req := AppendEncodedRequest(nil, []EncodedResourceLogs{{
		Resource: []KeyValue{{Key: "service.name", Value: StringValue("checkout")}},
		Scope:    Scope{Name: "s", Version: "1"},
		Records:  e.Bytes(),
	}})
	got, err := ParseTraceRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	tid := append([]byte{1, 2}, make([]byte, 14)...)
	want := []ResourceSpans{{
		Resource: []KeyValue{{Key: "service.name", Value: StringValue("checkout")}},
		Scope:    Scope{Name: "s", Version: "1"},
		Spans: []Span{{
			TraceID: tid, SpanID: []byte{3, 0, 0, 0, 0, 0, 0, 0}, ParentSpanID: []byte{4, 0, 0, 0, 0, 0, 0, 0},
			Name: "GET /cart", Kind: SpanKindClient, Start: 100, End: 250,
			Attributes: []KeyValue{{Key: "http.request.method", Value: StringValue("GET")},
				{Key: "m", Value: MapValue([]KeyValue{{Key: "n", Value: IntValue(7)}})}},
			Links:      []Link{{TraceID: append([]byte{0xff}, make([]byte, 15)...), SpanID: []byte{0xee, 0, 0, 0, 0, 0, 0, 0}}},
			StatusCode: StatusError, StatusMessage: "timed out",
		}, {
			TraceID: tid, SpanID: []byte{5, 0, 0, 0, 0, 0, 0, 0}, Name: "root",
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}
