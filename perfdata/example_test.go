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

// A recording of two CPUs' rings holds each ring's records in turn, and a
// task renamed on one CPU while it ran on another; a Session gives the
// samples in time order, each with its event and the name its task had
// then, as perf script shows them.
func ExampleSession() {
	dir, err := os.MkdirTemp("", "perfdata")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "perf.data")

	// A recording, as uetrace record writes one.
	w, err := perfdata.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := w.AddAttr(perfdata.Attr{
		Name:         "user_events:hello",
		Type:         perfdata.TypeTracepoint,
		Config:       1500,
		SamplePeriod: 1,
		SampleType:   perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU | perfdata.SampleRaw,
		Flags:        perfdata.AttrSampleIDAll,
		IDs:          []uint64{7, 8}, // on CPU 0 and CPU 1
	}); err != nil {
		log.Fatal(err)
	}
	w.SetTracingData(&perfdata.TracingData{Systems: []perfdata.TracingSystem{{
		Name: "user_events",
		Formats: [][]byte{[]byte("name: hello\nID: 1500\nformat:\n" +
			"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
			"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
			"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
			"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n" +
			"\tfield:u32 n;\toffset:8;\tsize:4;\tsigned:0;\n\n" +
			"print fmt: \"n=%u\", REC->n\n")},
	}}})
	hello := func(cpu uint32, tid uint32, t uint64, n byte) {
		raw := []byte{0xdc, 0x05, 0, 0, byte(tid), 0, 0, 0, n, 0, 0, 0}
		if err := w.WriteSample(&perfdata.Sample{ID: 7 + uint64(cpu), PID: 42, TID: tid, Time: t, CPU: cpu, Raw: raw}); err != nil {
			log.Fatal(err)
		}
	}
	// Names of the tasks that ran when the recording started: time 0.
	w.WriteComm(42, 42, "server", nil)
	w.WriteComm(42, 43, "worker", nil)
	// A round: CPU 0's ring, then CPU 1's.
	hello(0, 42, 1000, 1)
	hello(0, 42, 3000, 3)
	hello(1, 43, 2000, 2)
	w.WriteComm(42, 43, "busy", &perfdata.Sample{ID: 8, PID: 42, TID: 43, Time: 2500, CPU: 1})
	hello(1, 43, 4000, 4)
	w.WriteFinishedRound()
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	r, err := perfdata.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	s, err := perfdata.NewSession(r, nil)
	if err != nil {
		log.Fatal(err)
	}
	for {
		smp, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		n := smp.Event.Format.Field("n").Value(smp.Raw).Uint()
		fmt.Printf("%d %s %s/%d cpu %d: n=%d\n", smp.Time, smp.Event, smp.Comm, smp.TID, smp.CPU, n)
	}
	fmt.Printf("%d samples, %d lost\n", s.Stats().Samples, s.Stats().Lost)
	// Output:
	// 1000 user_events:hello server/42 cpu 0: n=1
	// 2000 user_events:hello worker/43 cpu 1: n=2
	// 3000 user_events:hello server/42 cpu 0: n=3
	// 4000 user_events:hello busy/43 cpu 1: n=4
	// 4 samples, 0 lost
}
