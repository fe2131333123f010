package ehprovider_test

import (
	"fmt"
	"log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// What a program does: a provider on user_events (the kernel's, else the
// daemon's), an event defined once with its fields' types, and a write
// that costs one load of the enable word while nobody listens. This needs
// the kernel or a running `uetrace serve`, so it is compiled but not run;
// Example runs the same calls in-process.
func Example_program() {
	f, err := userevents.Open(nil) // the kernel, else the daemon
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	p, err := ehprovider.New(f, "MyProvider", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	// Registers MyProvider_L4K1 on first use; package-level vars do well.
	request := ehprovider.Define3[uint32, string, float64](p, "Request",
		eventheader.LevelInformation, 0x1, "status", "path", "dur_ms")
	request.Write(200, "/index.html", 1.5) // 0 allocations; nothing but a load while disabled

	// Dynamic events: build only while someone listens.
	tp := p.Tracepoint(eventheader.LevelError, 0x2)
	var b ehprovider.Builder // one per goroutine, reused
	if tp.Enabled() {
		b.Reset(tp, "Failure")
		b.AddInt32("errno", -2, 0)
		b.AddString("file", "/etc/myapp.conf", eventheader.FormatDefault, 0)
		if err := tp.Write(&b); err != nil {
			log.Print(err)
		}
	}
}

// In-process, a session attaches to the provider's tracepoints (as `perf
// record -e user_events:MyProvider_*` would), and the record read back
// decodes with eventheader.Decode.
func Example() {
	k := usereventstest.NewKernel(nil)
	f, err := userevents.Open(k.Options())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider", nil)
	defer p.Close()
	request := ehprovider.Define3[uint32, string, float64](p, "Request",
		eventheader.LevelInformation, 0x1, "status", "path", "dur_ms")
	fmt.Println(request.Tracepoint().Name(), "enabled:", request.Enabled())

	ss, _ := k.NewSession("user_events:MyProvider_*")
	defer ss.Close()
	fmt.Println(request.Tracepoint().Name(), "enabled:", request.Enabled())
	request.Write(200, "/index.html", 1.5)

	recs := ss.Records()
	ev, err := eventheader.Decode(recs[0].Name, recs[0].Payload())
	if err != nil {
		fmt.Println(err)
		return
	}
	js, _ := ev.AppendJSON(nil)
	fmt.Println(string(js))
	// Output:
	// MyProvider_L4K1 enabled: false
	// MyProvider_L4K1 enabled: true
	// { "n": "MyProvider:Request", "status": 200, "path": "/index.html", "dur_ms": 1.5, "meta": { "level": 4, "keyword": "0x1" } }
}

// A dynamic event: its fields chosen at run time, built only while the
// tracepoint is enabled, here with an activity id and an opcode.
func ExampleTracepoint_Write() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider", &ehprovider.Options{Group: "myapp"})
	tp := p.Tracepoint(eventheader.LevelWarning, 0x4)
	ss, _ := k.NewSession("user_events:MyProvider_*")
	defer ss.Close()

	var b ehprovider.Builder
	if tp.Enabled() {
		b.ResetHeader(tp, "Retry", eventheader.Header{Opcode: eventheader.OpcodeActivityStart})
		b.SetActivityID(&[16]byte{0: 1, 15: 2}, nil)
		b.AddUint32("attempt", 3, eventheader.FormatDefault, 0)
		b.AddUint32("err", 11, eventheader.FormatErrno, 0)
		if err := tp.Write(&b); err != nil {
			fmt.Println(err)
		}
	}

	recs := ss.Records()
	ev, _ := eventheader.Decode(recs[0].Name, recs[0].Payload())
	js, _ := ev.AppendJSON(nil)
	fmt.Println(recs[0].Name)
	fmt.Println(string(js))
	// Output:
	// MyProvider_L3K4Gmyapp
	// { "n": "MyProvider:Retry", "attempt": 3, "err": "EAGAIN(11)", "meta": { "level": 3, "keyword": "0x4", "opcode": 1, "activity": "01000000-0000-0000-0000-000000000002" } }
}

// An activity: a typed event with opcode ActivityStart written with its
// activity id and the id of the activity that started it, events within
// it carrying the id, and one with opcode ActivityStop ending it. The ids
// are the caller's (random, e.g. from crypto/rand); WriteActivity copies
// them into the event, allocating nothing.
func ExampleEvent1_WriteActivity() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider", nil)
	defer p.Close()
	ss, _ := k.NewSession("user_events:MyProvider_*")
	defer ss.Close()

	lv := eventheader.LevelInformation
	jobStart := ehprovider.Define1[string](p, "Job", lv, 0x1, "name",
		ehprovider.WithOpcode(eventheader.OpcodeActivityStart))
	step := ehprovider.Define2[uint32, ehprovider.Errno](p, "Step", lv, 0x1, "step", "err")
	jobStop := ehprovider.Define1[uint32](p, "Job", lv, 0x1, "steps",
		ehprovider.WithOpcode(eventheader.OpcodeActivityStop))

	request := [16]byte{0: 0xaa, 15: 0x01} // the activity this job runs for
	job := [16]byte{0: 0x10, 15: 0x02}
	jobStart.WriteActivity(&job, &request, "reindex")
	step.WriteActivity(&job, nil, 1, 0)
	step.WriteActivity(&job, nil, 2, 11)
	jobStop.WriteActivity(&job, nil, 2)

	recs := ss.Records()
	for _, r := range recs {
		ev, _ := eventheader.Decode(r.Name, r.Payload())
		js, _ := ev.AppendJSON(nil)
		fmt.Println(string(js))
	}
	// Output:
	// { "n": "MyProvider:Job", "name": "reindex", "meta": { "level": 4, "keyword": "0x1", "opcode": 1, "activity": "10000000-0000-0000-0000-000000000002", "relatedActivity": "aa000000-0000-0000-0000-000000000001" } }
	// { "n": "MyProvider:Step", "step": 1, "err": "ERRNO(0)", "meta": { "level": 4, "keyword": "0x1", "activity": "10000000-0000-0000-0000-000000000002" } }
	// { "n": "MyProvider:Step", "step": 2, "err": "EAGAIN(11)", "meta": { "level": 4, "keyword": "0x1", "activity": "10000000-0000-0000-0000-000000000002" } }
	// { "n": "MyProvider:Job", "steps": 2, "meta": { "level": 4, "keyword": "0x1", "opcode": 2, "activity": "10000000-0000-0000-0000-000000000002" } }
}

// Arrays and structs: a slice is a variable-length array of its elements
// (here []uint32 and []string), []byte stays counted binary, and
// WithStruct groups consecutive fields — here the 2nd and 3rd — in a
// nested struct; the write is the same one call.
func ExampleDefine5() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider", nil)
	defer p.Close()
	ss, _ := k.NewSession("user_events:MyProvider_*")
	defer ss.Close()

	batch := ehprovider.Define5[string, string, uint16, []uint32, []string](p, "Batch",
		eventheader.LevelVerbose, 0x2, "queue", "host", "port", "sizes", "tags",
		ehprovider.WithStruct("peer", 1, 2))
	if err := batch.Err(); err != nil {
		fmt.Println(err)
		return
	}
	batch.Write("ingest", "db1", 5432, []uint32{512, 1024, 64}, []string{"retry", "bulk"})

	recs := ss.Records()
	ev, _ := eventheader.Decode(recs[0].Name, recs[0].Payload())
	js, _ := ev.AppendJSON(nil)
	fmt.Println(string(js))
	// Output:
	// { "n": "MyProvider:Batch", "queue": "ingest", "peer": { "host": "db1", "port": 5432 }, "sizes": [ 512, 1024, 64 ], "tags": [ "retry", "bulk" ], "meta": { "level": 5, "keyword": "0x2" } }
}
