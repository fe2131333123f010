package userevents

import "testing"

// EnableAddr is the address of ev's enable word, for tests.
func EnableAddr(ev *Event) uint64 { return ev.f.arena.addr(ev.slot) }

// KernelFD is the descriptor of a File of the kernel backend.
func KernelFD(f *File) int { return f.data.(*kernelData).fd }

// KernelEventOnFD is an Event of the kernel backend, its write index 0,
// whose writes go to fd (/dev/null where the kernel has no user_events):
// what the write path adds to writev(2).
func KernelEventOnFD(tb testing.TB, fd int) *Event {
	a, err := privateArena()
	if err != nil {
		tb.Fatal(err)
	}
	f := &File{backend: Kernel, arena: a, data: &kernelData{fd: fd}, events: map[*Event]struct{}{}}
	slot, err := a.alloc()
	if err != nil {
		tb.Fatal(err)
	}
	ev := &Event{f: f, index: 0, cmd: "bench u32 a", slot: slot}
	ev.word.Store(a.word(slot))
	return ev
}

// RingCount is how many rings a File of the daemon backend publishes into:
// its ring set's; 0 without one.
func RingCount(f *File) int {
	if r := f.ring.Load(); r != nil {
		return r.set.Len()
	}
	return 0
}
