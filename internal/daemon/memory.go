package daemon

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxArena is the largest enable-word arena a client may share.
const MaxArena = 64 << 20

// region is a client's arena memfd mapped into the daemon: the bytes the
// client sees at [base, base+len(mem)).
type region struct {
	base uint64
	mem  []byte
	dev  uint64
	ino  uint64
	uid  uint32 // whose Limits.SharedKBPerUID it counts in
}

// mapArena checks and maps a memfd a client sent. It must be a regular file
// of exactly the announced size, at most MaxArena, sealed against shrinking
// — otherwise the client could truncate it and the daemon's next bit update
// would fault — and mappable for reading and writing.
func mapArena(fd int, base, size uint64) (*region, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("arena: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("arena: not a memfd (mode %#o): %w", st.Mode, unix.EINVAL)
	}
	// Only shmem's pages stay the daemon's to touch once mapped: a
	// hugetlbfs memfd (MFD_HUGETLB) takes seals too, but its client can
	// punch a hole (fallocate), which F_SEAL_SHRINK allows, and the
	// daemon's next access of the page faults in a new huge page — SIGBUS,
	// the whole daemon down, when the pool is empty.
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return nil, fmt.Errorf("arena: fstatfs: %w", err)
	}
	if sfs.Type != unix.TMPFS_MAGIC {
		return nil, fmt.Errorf("arena: not a memfd of ordinary pages (file system type %#x; a MFD_HUGETLB one is refused): %w", sfs.Type, unix.EINVAL)
	}
	if size == 0 || size > MaxArena || size%8 != 0 {
		return nil, fmt.Errorf("arena: size %d is not a multiple of 8 in 8..%d: %w", size, MaxArena, unix.EINVAL)
	}
	if uint64(st.Size) != size {
		return nil, fmt.Errorf("arena: the memfd has %d bytes, the hello says %d: %w", st.Size, size, unix.EINVAL)
	}
	if base%8 != 0 || base+size < base {
		return nil, fmt.Errorf("arena: address %#x is not 8-aligned or the range wraps: %w", base, unix.EINVAL)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("arena: F_GET_SEALS: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("arena: the memfd is not sealed against shrinking (F_SEAL_SHRINK): %w", unix.EINVAL)
	}
	if seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0 {
		return nil, fmt.Errorf("arena: the memfd is sealed against writing: %w", unix.EACCES)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("arena: mmap: %w", err)
	}
	return &region{base: base, mem: mem, dev: st.Dev, ino: st.Ino}, nil
}

// memory is the subsys.Memory of one client process: the arenas it shared.
// The daemon writes enable bits there and nowhere else.
type memory struct {
	mu      sync.RWMutex
	regions []*region
	closed  bool
}

// add adds a region, or keeps the one already mapped for the same memfd at
// the same address (a second connection of the process). A region added is
// first charged (Limits.SharedKBPerUID): if charge fails, it is not.
func (m *memory) add(r *region, charge func() error) (*region, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.regions {
		if o.dev == r.dev && o.ino == r.ino && o.base == r.base && len(o.mem) == len(r.mem) {
			unix.Munmap(r.mem)
			return o, nil
		}
		if r.base < o.base+uint64(len(o.mem)) && o.base < r.base+uint64(len(r.mem)) {
			unix.Munmap(r.mem)
			return nil, fmt.Errorf("arena at %#x overlaps one the process already shared: %w", r.base, unix.EEXIST)
		}
	}
	if err := charge(); err != nil {
		unix.Munmap(r.mem)
		return nil, err
	}
	m.regions = append(m.regions, r)
	return r, nil
}

// SetBit implements subsys.Memory.
func (m *memory) SetBit(addr uint64, bit uint, on bool) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return unix.EFAULT
	}
	for _, r := range m.regions {
		if addr >= r.base && addr-r.base <= uint64(len(r.mem))-8 {
			w := (*uint64)(unsafe.Pointer(&r.mem[addr-r.base]))
			if on {
				atomic.OrUint64(w, 1<<bit)
			} else {
				atomic.AndUint64(w, ^(uint64(1) << bit))
			}
			return nil
		}
	}
	return unix.EFAULT
}

// unmap releases every region, returning them (their mem still says how
// long they were); later SetBit calls fail.
func (m *memory) unmap() []*region {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for _, r := range m.regions {
		unix.Munmap(r.mem)
	}
	rs := m.regions
	m.regions = nil
	return rs
}
