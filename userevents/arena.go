package userevents

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// arenaSize is the address space an arena reserves: 262 144 four-byte enable
// words. Only the pages that hold words in use are ever backed by memory.
const arenaSize = 1 << 20

// slotSize is the size of one enable word: enable_size 4.
const slotSize = 4

// An arena is off-heap memory holding enable words, one 4-byte slot per
// registered event: the kernel (or the daemon) writes a bit there, so the
// address must never move or be freed while registered — which Go heap
// memory cannot promise. Its pages stay mapped for the life of the process,
// so a load through a stale pointer reads memory, never faults.
type arena struct {
	mu   sync.Mutex
	mem  []byte
	fd   int // the memfd shared with the daemon; -1 when anonymous
	next int // first never-used slot offset
	free []int
}

var (
	anonOnce, sharedOnce   sync.Once
	anonArena, sharedArena *arena
	anonErr, sharedErr     error
)

// privateArena is the process's anonymous arena, for the kernel and
// Options.OpenData's.
func privateArena() (*arena, error) {
	anonOnce.Do(func() {
		mem, err := unix.Mmap(-1, 0, arenaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			anonErr = fmt.Errorf("mapping the enable-word arena: %w", err)
			return
		}
		anonArena = &arena{mem: mem, fd: -1}
	})
	return anonArena, anonErr
}

// memfdArena is the process's arena shared with daemons: a memfd sealed
// against shrinking and growing, so a daemon that maps it can trust its size.
func memfdArena() (*arena, error) {
	sharedOnce.Do(func() {
		fd, err := unix.MemfdCreate("uetrace-enable-words", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			sharedErr = fmt.Errorf("memfd_create: %w", err)
			return
		}
		if err := unix.Ftruncate(fd, arenaSize); err != nil {
			unix.Close(fd)
			sharedErr = fmt.Errorf("sizing the enable-word memfd: %w", err)
			return
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			unix.Close(fd)
			sharedErr = fmt.Errorf("sealing the enable-word memfd: %w", err)
			return
		}
		mem, err := unix.Mmap(fd, 0, arenaSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			sharedErr = fmt.Errorf("mapping the enable-word memfd: %w", err)
			return
		}
		sharedArena = &arena{mem: mem, fd: fd}
	})
	return sharedArena, sharedErr
}

// alloc returns the offset of a free slot, reusing released ones first.
func (a *arena) alloc() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.free); n > 0 {
		off := a.free[n-1]
		a.free = a.free[:n-1]
		return off, nil
	}
	if a.next+slotSize > len(a.mem) {
		return 0, fmt.Errorf("all %d enable words of the arena are in use: %w", len(a.mem)/slotSize, unix.ENOMEM)
	}
	off := a.next
	a.next += slotSize
	return off, nil
}

// release makes a slot reusable. The caller has made sure nothing writes
// it any more (the enabler is unregistered) and no Event points at it.
func (a *arena) release(off int) {
	atomic.StoreUint32(a.word(off), 0)
	a.mu.Lock()
	a.free = append(a.free, off)
	a.mu.Unlock()
}

func (a *arena) word(off int) *uint32 {
	return (*uint32)(unsafe.Pointer(&a.mem[off]))
}

// addr is the slot's address as the kernel and the daemon see it.
func (a *arena) addr(off int) uint64 {
	return uint64(uintptr(unsafe.Pointer(&a.mem[off])))
}

// base is the arena's first address.
func (a *arena) base() uint64 { return a.addr(0) }
