package perfetto_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/uetrace/uetrace/internal/report/perfetto"
)

func ExampleWriter() {
	var out bytes.Buffer // an *os.File in practice
	w := perfetto.NewWriter(&out)
	_ = w.Process(4242, "server") // optional: names for the tracks
	_ = w.Thread(4242, 4243, "worker")
	args := []perfetto.Arg{
		perfetto.Uint("count", 3),
		perfetto.String("msg", "hello"),
		perfetto.Bytes("id", []byte{0xca, 0xfe}), // shown as "cafe"
	}
	for i := range 3 {
		ts := uint64(1_000_000_000 + i*1000) // perf clock, ns
		if err := w.Instant(ts, 4242, 4243, "user_events", "request", args); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Len(), "bytes")
	// Output: 258 bytes
}

// Slices: nested ones on a thread's track, and two that overlap without
// nesting, each on an async track of its own (shown as one track "request"
// in the process's group, the two slices in rows).
func ExampleWriter_Begin() {
	var out bytes.Buffer
	w := perfetto.NewWriter(&out)
	th, _ := w.ThreadTrack(4242, 4243)
	_ = w.Begin(1000, th, "app", "handle", nil)
	_ = w.Begin(1100, th, "app", "parse", nil)
	_ = w.End(1200, th, nil) // ends "parse", the innermost
	_ = w.End(1300, th, []perfetto.Arg{perfetto.Uint("status", 200)})

	a, _ := w.AsyncTrack(4242, "request")
	b, _ := w.AsyncTrack(4242, "request")
	_ = w.Begin(2000, a, "app", "request", nil)
	_ = w.Begin(2100, b, "app", "request", nil)
	_ = w.End(2200, a, nil) // a ends first: b did not begin inside it
	_ = w.End(2300, b, nil)

	err := w.End(2400, b, nil) // nothing open on b: refused, nothing written
	fmt.Println(errors.Is(err, perfetto.ErrNoOpenSlice), w.OpenSlices())
	// Output: true 0
}
