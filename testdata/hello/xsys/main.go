// A program the binary-size test (layout_test.go) builds: see TestProducerBinarySize.

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	fmt.Println("hello", unix.Getpid())
	os.Exit(0)
}
