package userevents

// EnableAddr is the address of ev's enable word, for tests.
func EnableAddr(ev *Event) uint64 { return ev.f.arena.addr(ev.slot) }
