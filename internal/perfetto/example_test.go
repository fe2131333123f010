package perfetto_test

import (
	"bytes"
	"fmt"

	"github.com/uetrace/uetrace/internal/perfetto"
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
