package eventdef_test

import (
	"fmt"

	"github.com/uetrace/uetrace/eventdef"
)

// An Encoder fills the fields in declaration order; __rel_loc data goes
// after the fixed part, with its loc word computed as the kernel reads it.
func ExampleEncoder() {
	ev, err := eventdef.Parse("myapp_hello u32 n; __rel_loc char[] msg")
	if err != nil {
		fmt.Println(err)
		return
	}
	buf := make([]byte, 0, 64) // reused for every record: no allocation

	var enc eventdef.Encoder
	enc.Reset(ev, buf[:0])
	enc.Uint(42)
	enc.String("hello")
	payload, err := enc.Payload()

	// n, then the __rel_loc word (length 6 << 16 | offset 0 from the end
	// of the word), then the string and its NUL.
	fmt.Printf("% x %v\n", payload, err)
	// Output: 2a 00 00 00 00 00 06 00 68 65 6c 6c 6f 00 <nil>
}
