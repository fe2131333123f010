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
	ev, err := userevents.Define1[uint32](f, "hello_event u32 n")
	if err != nil {
		fmt.Println(err)
		return
	}
	ev.Write(1)
}
