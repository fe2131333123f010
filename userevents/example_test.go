package userevents_test

import (
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// What a program does: open user_events (the kernel's where it has them,
// else the uetrace daemon's), register an event once, and write it while
// something traces it — for as long as it runs, since Linux deletes an
// event (not persistent) once nothing holds it: no registration, no
// descriptor, no tracer (auto-delete at its last reference). This needs
// the kernel or a running `uetrace serve`, so it is compiled but not run
// here (TestREADMEGoProgram runs it on a daemon); Example runs the same
// calls in-process.
func Example_program() {
	f, err := userevents.Open(nil) // the kernel, else the daemon
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	request, err := userevents.Define2[uint32, string](f, "myapp_request u32 status; __rel_loc char[] path")
	if err != nil {
		log.Fatal(err)
	}

	// A request a second until stopped: nothing is built while nobody
	// traces, nothing is allocated when someone does.
	for range time.Tick(time.Second) {
		if err := request.Write(200, "/index.html"); err != nil {
			log.Print(err)
		}
	}
}

// Events whose fields are known only at run time: Register, check Enabled
// and build the payload with an eventdef.Encoder. This needs the kernel or
// a running `uetrace serve`, so it is compiled but not run here.
func Example_encode() {
	f, err := userevents.Open(nil) // the kernel, else the daemon
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("myapp_request u32 status; __rel_loc char[] path", 0)
	if err != nil {
		log.Fatal(err)
	}

	var enc eventdef.Encoder
	buf := make([]byte, 0, 256) // reused: encoding allocates nothing
	if ev.Enabled() {           // one load and a bit test while nobody traces
		err := ev.Encode(&enc, buf, func(e *eventdef.Encoder) {
			e.Uint(200)
			e.String("/index.html")
		})
		if err != nil {
			log.Print(err)
		}
	}
}

// A typed event: the Go types are checked against the fields when it is
// defined, and Write takes the values as fmt's functions do — without
// building anything while the event is disabled, and without allocating.
func ExampleDefine2() {
	k := usereventstest.NewKernel(nil) // user_events in this process
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	request, err := userevents.Define2[uint32, string](f, "myapp_request u32 status; __rel_loc char[] path")
	if err != nil {
		fmt.Println(err)
		return
	}
	fs := k.Tracefs()
	fs.WriteFile("events/user_events/myapp_request/enable", []byte("1"), 0)

	if err := request.Write(200, "/index.html"); err != nil {
		fmt.Println(err)
	}
	trace, _ := fs.ReadFile("trace")
	lines := strings.Split(strings.TrimSpace(string(trace)), "\n")
	last := lines[len(lines)-1]
	fmt.Println(last[strings.Index(last, "myapp_request:"):])

	// A Go type that does not fit its field is refused before anything is
	// registered.
	_, err = userevents.Define2[string, string](f, "myapp_other u32 status; __rel_loc char[] path")
	fmt.Println(err)
	// Output:
	// myapp_request: status=0xc8 (200) path=/index.html
	// define "myapp_other u32 status; __rel_loc char[] path": invalid argument (EINVAL): field 1 "u32 status": a Go string does not set an integer field: use an integer type of at most 4 bytes
}

// A program registers its event once, checks Enabled before building a
// payload — one load and a bit test when nobody is looking — and writes.
// Here user_events run in this process (package usereventstest), so the
// example can also enable the event and read the trace; with nil options
// the same code uses the kernel or the uetrace daemon.
func Example() {
	k := usereventstest.NewKernel(nil)
	f, err := userevents.Open(k.Options())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	ev, err := f.Register("myapp_request u32 status; __rel_loc char[] path", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enabled:", ev.Enabled())

	// What `uetrace enable myapp_request` does.
	fs := k.Tracefs()
	fs.WriteFile("events/user_events/myapp_request/enable", []byte("1"), 0)
	fmt.Println("enabled:", ev.Enabled())

	var enc eventdef.Encoder
	if ev.Enabled() {
		err := ev.Encode(&enc, nil, func(e *eventdef.Encoder) {
			e.Uint(200)
			e.String("/index.html")
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	trace, _ := fs.ReadFile("trace")
	lines := strings.Split(strings.TrimSpace(string(trace)), "\n")
	last := lines[len(lines)-1]
	fmt.Println(last[strings.Index(last, "myapp_request:"):])
	// Output:
	// enabled: false
	// enabled: true
	// myapp_request: status=0xc8 (200) path=/index.html
}

// Errors wrap the kernel's errno and say what was wrong.
func ExampleFile_Register_errors() {
	f, _ := userevents.Open(usereventstest.NewKernel(nil).Options())
	defer f.Close()
	_, err := f.Register("myapp_request u32 status; char[0] path", 0)
	fmt.Println(err)
	fmt.Println(errors.Is(err, unix.EINVAL))

	f.Register("myapp_request u32 status", 0)
	_, err = f.Register("myapp_request u64 status", 0)
	fmt.Println(errors.Is(err, unix.EADDRINUSE))
	// Output:
	// register "myapp_request u32 status; char[0] path": invalid argument (EINVAL): field 2 "char[0] path": array length is 0
	// true
	// true
}

// Write takes the payload as slices, as writev does: no copying together.
func ExampleEvent_Write() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	ev, _ := f.Register("counter u32 id; u64 value", 0)
	fs := k.Tracefs()
	fs.WriteFile("events/user_events/counter/enable", []byte("1"), 0)

	id := []byte{7, 0, 0, 0}
	value := []byte{42, 0, 0, 0, 0, 0, 0, 0}
	if err := ev.Write(id, value); err != nil {
		fmt.Println(err)
	}
	// Too short for the event's fields: the kernel's EINVAL.
	err := ev.Write(id)
	fmt.Println(errors.Is(err, unix.EINVAL))

	fs.WriteFile("events/user_events/counter/enable", []byte("0"), 0)
	// Nothing attached: EBADF, which callers that raced with a disable
	// can ignore.
	err = ev.Write(id, value)
	fmt.Println(errors.Is(err, unix.EBADF))
	// Output:
	// true
	// true
}
