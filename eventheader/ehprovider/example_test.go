package ehprovider_test

import (
	"context"
	"fmt"
	"log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// What a program does: a provider on user_events (the kernel's, else the
// daemon's), an event defined once with its fields' types, and a write
// that costs one load of the enable word while nobody listens. This needs
// the kernel or a running `uetrace serve`, so it is compiled but not run;
// Example runs the same calls in-process.
func Example_program() {
	f, err := userevents.Open(userevents.Options{}) // the kernel, else the daemon
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	p, err := ehprovider.New(f, "MyProvider")
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
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(userevents.Options{Backend: userevents.InProcess, Subsystem: sys})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider")
	defer p.Close()
	request := ehprovider.Define3[uint32, string, float64](p, "Request",
		eventheader.LevelInformation, 0x1, "status", "path", "dur_ms")
	fmt.Println(request.Tracepoint().Name(), "enabled:", request.Enabled())

	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	ss.AttachMatching("user_events:MyProvider_*", true)
	fmt.Println(request.Tracepoint().Name(), "enabled:", request.Enabled())
	request.Write(200, "/index.html", 1.5)

	recs, _ := ss.Read(context.Background(), make([]byte, 4096), nil)
	ev, err := eventheader.Decode(recs[0].Event.Name(), recs[0].Raw[8:]) // after the common header
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
	sys := subsys.New(subsys.Options{})
	f, _ := userevents.Open(userevents.Options{Backend: userevents.InProcess, Subsystem: sys})
	defer f.Close()
	p, _ := ehprovider.New(f, "MyProvider", ehprovider.WithGroup("myapp"))
	tp := p.Tracepoint(eventheader.LevelWarning, 0x4)
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	ss.AttachMatching("user_events:MyProvider_*", true)

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

	recs, _ := ss.Read(context.Background(), make([]byte, 4096), nil)
	ev, _ := eventheader.Decode(recs[0].Event.Name(), recs[0].Raw[8:])
	js, _ := ev.AppendJSON(nil)
	fmt.Println(recs[0].Event.Name())
	fmt.Println(string(js))
	// Output:
	// MyProvider_L3K4Gmyapp
	// { "n": "MyProvider:Retry", "attempt": 3, "err": "EAGAIN(11)", "meta": { "level": 3, "keyword": "0x4", "opcode": 1, "activity": "01000000-0000-0000-0000-000000000002" } }
}
