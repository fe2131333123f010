// Command goport writes user_events with the Go port of LinuxTracepoints
// (github.com/cataggar/LinuxTracepoints-Go), as a program using it would:
// a plain event through its userevents package and EventHeader events
// through its eventheader provider. It prints what each write returned,
// never a pid or a time, so that two runs can be compared line for line.
// The events goport_plain and GoPortProvider_L4K1 must be enabled before
// it starts. It is built by the interposer package's tests against a
// checkout of the port (UETRACE_LINUXTRACEPOINTS_GO), in a module of its
// own: it is not part of uetrace's.
package main

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/cataggar/LinuxTracepoints-Go/eventheader"
	"github.com/cataggar/LinuxTracepoints-Go/userevents"
)

func main() {
	f, err := userevents.Open()
	if err != nil {
		fail(err)
	}
	reg, err := f.Register("goport_plain", "u32 n; __rel_loc char[] s", userevents.RegisterOptions{})
	if err != nil {
		fail(err)
	}
	fmt.Printf("register goport_plain: enabled %v\n", reg.Enabled())
	for n := uint32(1); n <= 3; n++ {
		s := fmt.Sprintf("plain %d\x00", n)
		// n, then s's __rel_loc word: its size, and an offset of 0 from
		// the word's end, where s follows.
		fields := binary.LittleEndian.AppendUint32(nil, n)
		fields = binary.LittleEndian.AppendUint32(fields, uint32(len(s))<<16)
		fmt.Printf("writev goport_plain %d: %v\n", n, reg.Writev(fields, []byte(s)))
	}

	p, err := eventheader.OpenProvider("GoPortProvider")
	if err != nil {
		fail(err)
	}
	set, err := p.EventSet(eventheader.LevelInformation, 1, "")
	if err != nil {
		fail(err)
	}
	fmt.Printf("event set %s: enabled %v\n", set.Name(), set.Enabled())
	for n := uint32(1); n <= 3; n++ {
		b, err := eventheader.NewBuilder("GoPortEvent")
		if err != nil {
			fail(err)
		}
		if err := b.SetID(uint16(n)); err != nil {
			fail(err)
		}
		if err := b.Uint32("n", n); err != nil {
			fail(err)
		}
		if err := b.String("s", fmt.Sprintf("eventheader %d", n)); err != nil {
			fail(err)
		}
		fmt.Printf("write GoPortEvent %d: %v\n", n, set.Write(b))
	}
	// Closing unregisters the events' enable words through the tree.
	fmt.Printf("close provider: %v\n", p.Close())
	fmt.Printf("close registration: %v\n", reg.Close())
	fmt.Printf("close file: %v\n", f.Close())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goport:", err)
	os.Exit(1)
}
