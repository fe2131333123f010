package tracefs_test

import (
	"fmt"
	"log"
	"os"

	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
	"github.com/uetrace/uetrace/userevents/usereventstest"
)

// What `uetrace enable` does, on the kernel where it has user_events, else
// on the uetrace daemon. This needs one of them, so it is compiled but not
// run here; Example runs the same calls on an in-process kernel.
func Example_enable() {
	t, err := tracefs.Open(nil) // the kernel's, else the daemon's
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	err = t.WriteFile("events/user_events/myapp_request/enable", []byte("1"), os.O_TRUNC)
	if err != nil {
		log.Fatal(err)
	}
}

// The same files on the kernel, the daemon and an in-process kernel: here
// the last, which a test can use.
func Example() {
	k := usereventstest.NewKernel(nil)
	f, _ := userevents.Open(k.Options())
	defer f.Close()
	f.Register("myapp_request u32 status", userevents.MultiFormat)
	t := k.Tracefs()
	t.WriteFile("events/user_events_multi/myapp_request.0/enable", []byte("1"), os.O_WRONLY)
	status, _ := t.ReadFile("user_events_status")
	fmt.Print(string(status))
	dyn, _ := t.ReadFile("dynamic_events")
	fmt.Print(string(dyn))
	// Output:
	// myapp_request.0 # Used by ftrace
	//
	// Active: 1
	// Busy: 1
	// u:myapp_request u32 status
}
