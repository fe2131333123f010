package preload

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SharedMemfd checks fd, a memfd the library handed over (a ring, a table,
// a v10 status page), before the daemon maps it: a regular file of
// ordinary shmem pages, sealed against shrinking and growing and not
// against writing. It returns its size. what names it in the errors
// (EINVAL, EACCES for a write seal).
//
// A hugetlbfs memfd takes seals too, but its owner can punch a hole in it
// (F_SEAL_SHRINK allows that), and the daemon's next access of the page
// then faults in a new huge page — SIGBUS, the daemon down, when the pool
// is empty. A memfd that may shrink or grow would let its owner make an
// access of the daemon's fault the same way.
func SharedMemfd(fd int, what string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("%s: fstat: %w", what, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, fmt.Errorf("%s is not a memfd (mode %#o): %w", what, st.Mode, unix.EINVAL)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return 0, fmt.Errorf("%s: fstatfs: %w", what, err)
	}
	if sfs.Type != unix.TMPFS_MAGIC {
		return 0, fmt.Errorf("%s is not a memfd of ordinary pages (file system type %#x; a MFD_HUGETLB one is refused): %w", what, sfs.Type, unix.EINVAL)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: F_GET_SEALS: %w", what, err)
	}
	if seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW) != unix.F_SEAL_SHRINK|unix.F_SEAL_GROW {
		return 0, fmt.Errorf("%s's memfd is not sealed against shrinking and growing (F_SEAL_SHRINK, F_SEAL_GROW): %w", what, unix.EINVAL)
	}
	if seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0 {
		return 0, fmt.Errorf("%s's memfd is sealed against writing: %w", what, unix.EACCES)
	}
	return st.Size, nil
}
