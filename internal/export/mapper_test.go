package export_test

import (
	"bytes"
	"testing"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// TestMapper: the mapping the Exporter and the Collector's receiver share
// makes one logs request of samples grouped by process, keeps the
// undecodable as linux.raw records, and gives the same request again after
// Reset (its memory reused).
func TestMapper(t *testing.T) {
	_, wants := testFile(t, 6)
	raw, err := perfdata.NewEvent("user_events", "noformat", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := export.NewMapper(export.MapperOptions{HostName: "h", ServiceName: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	add := func() {
		for i := range wants {
			s := wants[i].sample
			if sig := m.Add(&s, 1); sig != otlp.Logs {
				t.Fatalf("sample %d became signal %v, want logs", i, sig)
			}
		}
		other := perfdata.Sample{Event: raw, PID: testPID + 1000, TID: testPID + 1000, Wall: 5, Raw: []byte{1, 2, 3}}
		m.Add(&other, 1)
	}
	add()
	if m.Len() != len(wants)+1 || m.Count(otlp.Logs) != len(wants)+1 || m.Count(otlp.Traces) != 0 || m.Count(otlp.Metrics) != 0 {
		t.Fatalf("Len %d, counts %d/%d/%d; want %d logs", m.Len(), m.Count(otlp.Logs), m.Count(otlp.Traces), m.Count(otlp.Metrics), len(wants)+1)
	}
	first := m.AppendRequest(nil, otlp.Logs)
	rls, err := otlp.ParseRequest(first)
	if err != nil {
		t.Fatal(err)
	}
	if len(rls) != 2 {
		t.Fatalf("%d resources, want 2 (the test file's process and another)", len(rls))
	}
	last := rls[1].Records[0]
	var rawAttr []byte
	for _, kv := range last.Attributes {
		if kv.Key == export.AttrUndecodable {
			rawAttr = kv.Value.Bytes
		}
	}
	if !bytes.Equal(rawAttr, []byte{1, 2, 3}) {
		t.Errorf("the undecodable record's %s = %v, want its bytes", export.AttrUndecodable, rawAttr)
	}
	if n := len(rls[0].Records); n != len(wants) {
		t.Errorf("%d records of the file's process, want %d", n, len(wants))
	}
	m.Reset()
	if m.Len() != 0 || len(m.AppendRequest(nil, otlp.Logs)) != 0 {
		t.Fatalf("after Reset: Len %d, request %d bytes", m.Len(), len(m.AppendRequest(nil, otlp.Logs)))
	}
	add()
	if again := m.AppendRequest(nil, otlp.Logs); !bytes.Equal(again, first) {
		t.Errorf("the request after Reset differs from the first")
	}
}

// BenchmarkMapper: mapping the test file's samples (plain and EventHeader
// events) in batches of 512, the memory of each batch reused.
func BenchmarkMapper(b *testing.B) {
	_, wants := testFile(b, 512)
	m, err := export.NewMapper(export.MapperOptions{HostName: "h"})
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		m.Add(&wants[i].sample, 1)
		if i++; i == len(wants) {
			buf = m.AppendRequest(buf[:0], otlp.Logs)
			m.Reset()
			i = 0
		}
	}
}
