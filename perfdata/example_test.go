package perfdata_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/uetrace/uetrace/perfdata"
)

// A recorder writes samples of a tracepoint, then the attr with its sample
// ids, the format of the tracepoint and the host facts; a reader reads them
// back. `perf script -i` prints the same file.
func Example() {
	dir, err := os.MkdirTemp("", "perfdata")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "perf.data")

	w, err := perfdata.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := w.AddAttr(perfdata.Attr{
		Name:         "user_events:hello",
		Type:         perfdata.TypeTracepoint,
		Config:       1500, // the id in tracefs
		SamplePeriod: 1,
		SampleType:   perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU | perfdata.SampleRaw,
		Flags:        perfdata.AttrSampleIDAll,
		IDs:          []uint64{7},
	}); err != nil {
		log.Fatal(err)
	}
	if err := w.WriteComm(42, 42, "hello", &perfdata.Sample{ID: 7, PID: 42, TID: 42, Time: 1_000_000_000}); err != nil {
		log.Fatal(err)
	}
	// The record of the tracepoint: common_type 1500 (0x05dc), flags,
	// preempt count, common_pid 42, then a u32 payload field.
	raw := []byte{0xdc, 0x05, 0, 0, 42, 0, 0, 0, 1, 0, 0, 0}
	if err := w.WriteSample(&perfdata.Sample{ID: 7, PID: 42, TID: 42, Time: 1_000_000_500, CPU: 1, Raw: raw}); err != nil {
		log.Fatal(err)
	}
	if err := w.WriteFinishedRound(); err != nil {
		log.Fatal(err)
	}
	w.SetTracingData(&perfdata.TracingData{Systems: []perfdata.TracingSystem{{
		Name:    "user_events",
		Formats: [][]byte{[]byte("name: hello\nID: 1500\nformat:\n...")},
	}}})
	w.SetMeta(perfdata.HostMeta(nil))
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := perfdata.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for _, a := range r.Attrs() {
		fmt.Printf("event %s, ids %v\n", a.Name, a.IDs)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		switch rec.Type {
		case perfdata.RecordComm:
			fmt.Printf("%s: %d/%d is %q\n", rec.Type, rec.PID, rec.TID, rec.Comm)
		case perfdata.RecordSample:
			s := &rec.Sample
			fmt.Printf("%s: %s, tid %d, cpu %d, time %d, raw % x\n", rec.Type, rec.Attr.Name, s.TID, s.CPU, s.Time, s.Raw)
		default:
			fmt.Println(rec.Type)
		}
	}
	// Output:
	// event user_events:hello, ids [7]
	// COMM: 42/42 is "hello"
	// SAMPLE: user_events:hello, tid 42, cpu 1, time 1000000500, raw dc 05 00 00 2a 00 00 00 01 00 00 00
	// FINISHED_ROUND
}
