package export_test

import (
	"context"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/perfdata"
)

// TestFilePerfCollect exports a file of Microsoft's perf-collect
// (LinuxTracepoints 1.4; perfdata/testdata/README.md), whose attrs sit in
// slots larger than their own size says: every sample arrives, named as
// perf-decode names it, with its fields.
func TestFilePerfCollect(t *testing.T) {
	r, err := perfdata.Open("../../perfdata/testdata/perf-collect.data")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := newServer(t)
	e := newExporter(t, s, otlp.HTTP, export.Options{BatchSize: 100})
	st, err := export.File(context.Background(), r, e)
	if err != nil {
		t.Fatal(err)
	}
	if sent := closeAndCheck(t, e, time.Minute); sent.Delivered != 8 || st.Samples != 8 || st.Unknown != 0 {
		t.Fatalf("file %+v, exporter %+v: want 8 samples delivered, all known", st, sent)
	}
	count := make(map[string]int)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range s.reqs {
		for _, rl := range req {
			for _, rec := range rl.Records {
				count[rec.EventName]++
				if rec.EventName != "user_events:my_tracepoint1" {
					continue
				}
				attrs := make(map[string]otlp.Value)
				for _, kv := range rec.Attributes {
					attrs[kv.Key] = kv.Value
				}
				if f := attrs["field2"]; f.Kind != otlp.String || f.Str != "value for field 2" {
					t.Errorf("my_tracepoint1's field2 is %+v, want the string \"value for field 2\"", f)
				}
				if f := attrs["field1"]; f.Kind != otlp.Int || f.Num != 1 {
					t.Errorf("my_tracepoint1's field1 is %+v, want the int 1", f)
				}
			}
		}
	}
	want := map[string]int{"user_events:my_tracepoint1": 1, "user_events:my_tracepoint3": 1,
		"MyProviderName:Event1": 3, "OtherProviderName:Event2": 3}
	for name, n := range want {
		if count[name] != n {
			t.Errorf("%d records of %s, want %d (all: %v)", count[name], name, n, count)
		}
	}
}
