// A program the binary-size test (layout_test.go) builds: see TestProducerBinarySize.

package main

import (
	"fmt"
	"os"

	"github.com/uetrace/uetrace/userevents"
)

func main() {
	f, err := userevents.Open(nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer f.Close()
	ev, err := f.Register("hello_event u32 n", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	ev.Write([]byte{1, 0, 0, 0})
}
