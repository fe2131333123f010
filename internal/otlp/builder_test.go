package otlp

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// build writes r with a Builder.
func build(e *Builder, r *Record) {
	e.Record()
	e.Time(r.Time, r.ObservedTime)
	e.Severity(r.SeverityNumber, r.SeverityText)
	if r.Body.Kind != Empty {
		e.Body()
		buildValue(e, "", r.Body)
	}
	var tid [16]byte
	var sid [8]byte
	copy(tid[:], r.TraceID)
	copy(sid[:], r.SpanID)
	e.TraceContext(tid, sid, r.Flags)
	for _, kv := range r.Attributes {
		buildValue(e, kv.Key, kv.Value)
	}
	e.EventName(r.EventName)
	e.End()
}

func buildValue(e *Builder, key string, v Value) {
	switch v.Kind {
	case String:
		e.Str(key, v.Str)
	case Int:
		e.Int(key, v.AsInt())
	case Double:
		e.Double(key, v.AsDouble())
	case Bool:
		e.Bool(key, v.AsBool())
	case Bytes:
		e.BytesValue(key, v.Bytes)
	case Array:
		e.ArrayStart(key)
		for _, x := range v.Array {
			buildValue(e, "", x)
		}
		e.End()
	case Map:
		e.MapStart(key)
		for _, kv := range v.Map {
			buildValue(e, kv.Key, kv.Value)
		}
		e.End()
	}
}

// TestBuilderMatchesRecord: records built field by field — body and
// trace context too — read back as the same Records that AppendRequest
// encodes.
func TestBuilderMatchesRecord(t *testing.T) {
	want := sampleRequest()
	var e Builder
	var enc []EncodedResourceLogs
	for _, rl := range want {
		e.Reset()
		for i := range rl.Records {
			r := rl.Records[i]
			build(&e, &r)
		}
		if e.Depth() != 0 {
			t.Fatalf("depth %d after the records", e.Depth())
		}
		enc = append(enc, EncodedResourceLogs{Resource: rl.Resource, Scope: rl.Scope, Records: append([]byte(nil), e.Bytes()...)})
	}
	got, err := ParseRequest(AppendEncodedRequest(nil, enc))
	if err != nil {
		t.Fatal(err)
	}
	// An all-zero id is no id (OTLP: invalid): the Builder leaves it out.
	for i := range want {
		for j := range want[i].Records {
			if r := &want[i].Records[j]; bytes.Count(r.TraceID, []byte{0}) == len(r.TraceID) {
				r.TraceID = nil
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built records (-want +got):\n%s", diff)
	}
	// The same fields (in another order: the Builder writes them as they
	// are given) in the same number of bytes: every length in the fewest,
	// whether the Builder knew it before the value (scalars) or after.
	if b, w := AppendEncodedRequest(nil, enc), AppendRequest(nil, want); len(b) != len(w) {
		t.Errorf("the Builder's request is %d bytes, AppendRequest's %d", len(b), len(w))
	}
}

func BenchmarkBuilder(b *testing.B) {
	r := sampleRequest()[0].Records[0]
	var e Builder
	b.ReportAllocs()
	for b.Loop() {
		e.Reset()
		build(&e, &r)
	}
}

// TestAppendEncodedRequestBytes: records encoded as AppendRequest encodes
// them, put in a request by AppendEncodedRequest, make AppendRequest's
// request byte for byte: the resources, scopes and lengths around them
// are the same, in the fewest bytes.
func TestAppendEncodedRequestBytes(t *testing.T) {
	rls := sampleRequest()
	// A resource whose records take more than 2^14 bytes: a 3-byte length.
	big := rls[0]
	big.Records = nil
	for range 100 {
		big.Records = append(big.Records, rls[0].Records...)
	}
	rls = append(rls, big, ResourceLogs{Scope: Scope{Name: "empty"}})
	var enc []EncodedResourceLogs
	for _, rl := range rls {
		var recs []byte
		for i := range rl.Records {
			recs = appendMessage(recs, fScopeLogsLogRecords, func(b []byte) []byte { return appendRecord(b, &rl.Records[i]) })
		}
		enc = append(enc, EncodedResourceLogs{Resource: rl.Resource, Scope: rl.Scope, Records: recs})
	}
	prefix := []byte("kept")
	got := AppendEncodedRequest(bytes.Clone(prefix), enc)
	want := AppendRequest(bytes.Clone(prefix), rls)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendEncodedRequest wrote %d bytes, AppendRequest %d; they differ", len(got), len(want))
	}
}
