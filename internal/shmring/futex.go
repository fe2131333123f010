package shmring

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations. Not the _PRIVATE ones: the word is in a shared
// mapping and the waiter and the waker are different processes, so the
// kernel must key the futex by the memfd's page, not by the address space.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr == val, for at most timeout. It returns nil
// when woken, EAGAIN if *addr was not val, ETIMEDOUT, or EINTR.
func futexWait(addr *uint32, val uint32, timeout time.Duration) error {
	ts := unix.NsecToTimespec(int64(timeout))
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// futexWake wakes the one waiter there can be on addr. Its only possible
// error, EFAULT, cannot happen on a mapped word; a consumer that misses a
// wake sleeps until its timeout, which is why Wait has one.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, 1, 0, 0, 0)
}

// eventfdAdd adds 1 to the eventfd fd: a wake for a consumer that polls
// it. A full counter (EAGAIN on a non-blocking eventfd) means the consumer
// has a wake pending anyway; nothing else can fail on an eventfd.
func eventfdAdd(fd int) {
	one := uint64(1)
	unix.Write(fd, (*[8]byte)(unsafe.Pointer(&one))[:])
}
