package userevents

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/kernelfs"
	"golang.org/x/sys/unix"
)

// kernelData is the kernel's user_events_data (Backend Kernel): its
// operations are the system calls themselves.
type kernelData struct{ fd int }

// openKernelData opens the user_events_data of the tracefs at root ("":
// found).
func openKernelData(root string) (*kernelData, error) {
	fd := -1
	_, err := kernelfs.File(root, "user_events_data", func(path string) (err error) {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &kernelData{fd: fd}, nil
}

func (k *kernelData) Register(reg []byte, name string) (idx uint32, err error) {
	err = onRegisterThread(func() (err error) {
		idx, err = abi.RegisterBytes(k.fd, reg, name)
		return err
	})
	return idx, err
}

func (k *kernelData) Unregister(unreg []byte) error {
	return onRegisterThread(func() error { return abi.UnregisterBytes(k.fd, unreg) })
}

func (k *kernelData) Delete(name string) error { return abi.Delete(k.fd, name) }

// Writev is writev(2) of iov, which has at most maxIov+1 slices. The
// iovecs live in a fixed array on the stack.
func (k *kernelData) Writev(iov ...[]byte) (int, error) {
	var vecs [maxIov + 1]unix.Iovec
	n, total := 0, 0
	for _, b := range iov[:min(len(iov), maxIov+1)] {
		if len(b) > 0 {
			vecs[n] = unix.Iovec{Base: &b[0], Len: uint64(len(b))}
			n++
			total += len(b)
		}
	}
	err := writev(k.fd, &vecs[0], n)
	runtime.KeepAlive(iov)
	if err != nil {
		return 0, err
	}
	return total, nil
}

func (k *kernelData) Close() error { return unix.Close(k.fd) }

// The kernel keeps enablers per task (current->user_event_mm): a thread
// cloned before the process's first registration has none of its own, so
// a DIAG_IOCSUNREG from it finds nothing (ENOENT), and its registrations
// would go into a second user_event_mm. Go moves goroutines between
// threads, so every register and unregister runs on one thread that is
// locked for the life of the process.
var (
	regOnce sync.Once
	regCh   chan regCall
)

type regCall struct {
	fn   func() error
	done chan error
}

func onRegisterThread(fn func() error) error {
	regOnce.Do(func() {
		regCh = make(chan regCall)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for c := range regCh {
				c.done <- c.fn()
			}
		}()
	})
	done := make(chan error, 1)
	regCh <- regCall{fn, done}
	return <-done
}

// writev is writev(2) of n iovecs, retried after a signal.
func writev(fd int, vecs *unix.Iovec, n int) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(vecs)), uintptr(n))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// FindTracefs returns where tracefs is mounted: /sys/kernel/tracing when it
// is tracefs, else the first tracefs mount in /proc/self/mountinfo, else
// the "tracing" directory of the first debugfs mount.
func FindTracefs() (string, error) { return kernelfs.Find() }
