package userevents

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tracefsMagic is TRACEFS_MAGIC, the f_type statfs reports for tracefs.
const tracefsMagic = 0x74726163

// FindTracefs returns where tracefs is mounted: /sys/kernel/tracing when it
// is tracefs, else the first tracefs mount in /proc/self/mountinfo, else
// the "tracing" directory of the first debugfs mount.
func FindTracefs() (string, error) {
	var st unix.Statfs_t
	if unix.Statfs("/sys/kernel/tracing", &st) == nil && st.Type == tracefsMagic {
		return "/sys/kernel/tracing", nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("finding tracefs: %w", err)
	}
	defer f.Close()
	var debugfs string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 98:0 / /mnt1 rw,noatime master:1 - ext3 /dev/root rw": the
		// mount point is field 5, the type follows the " - ".
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mnt := unescapeMount(fields[4])
		switch fields[sep+1] {
		case "tracefs":
			return mnt, nil
		case "debugfs":
			if debugfs == "" {
				debugfs = filepath.Join(mnt, "tracing")
			}
		}
	}
	if debugfs != "" {
		if _, err := os.Stat(debugfs); err == nil {
			return debugfs, nil
		}
	}
	return "", &Error{Op: "find", Path: "tracefs", Errno: unix.ENOENT, Reason: "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)"}
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			v := 0
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + int(c-'0')
			}
			if ok {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kernelFile is the path of a user_events file of the tracefs at root
// ("": found), after checking it with check: an ENOENT means the kernel was
// built without user_events.
func kernelFile(root, name string, check func(path string) error) (string, error) {
	if root == "" {
		var err error
		if root, err = FindTracefs(); err != nil {
			return "", err
		}
	}
	path := filepath.Join(root, name)
	if err := check(path); err != nil {
		if err == unix.ENOENT {
			return "", &Error{Op: "open", Path: path, Errno: unix.ENOENT, Reason: "this kernel has no user_events (CONFIG_USER_EVENTS)"}
		}
		return "", wrapErr("open", path, "", err)
	}
	return root, nil
}

func openKernel(root string) (*File, error) {
	fd := -1
	_, err := kernelFile(root, "user_events_data", func(path string) (err error) {
		fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	a, err := privateArena()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &File{backend: Kernel, arena: a, kfd: fd, events: map[*Event]struct{}{}}, nil
}

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

// kernelWritev writes [index][payload...] to fd with one writev(2). The
// iovecs live in a fixed array on the stack, so that neither they nor the
// caller's buffers escape: payload has at most maxIov slices.
func kernelWritev(fd int, index uint32, payload [][]byte) error {
	if len(payload) == 1 && len(payload[0]) > 0 {
		return kernelWrite1(fd, index, payload[0])
	}
	var vecs [maxIov + 1]unix.Iovec
	vecs[0] = unix.Iovec{Base: (*byte)(unsafe.Pointer(&index)), Len: 4}
	n := 1
	for _, b := range payload[:min(len(payload), maxIov)] {
		if len(b) > 0 {
			vecs[n] = unix.Iovec{Base: &b[0], Len: uint64(len(b))}
			n++
		}
	}
	err := writev(fd, &vecs[0], n)
	runtime.KeepAlive(payload)
	return err
}

// kernelWrite1 is kernelWritev of one payload slice, the usual case (an
// Encoder's payload), with no array of iovecs to clear.
func kernelWrite1(fd int, index uint32, payload []byte) error {
	vecs := [2]unix.Iovec{
		{Base: (*byte)(unsafe.Pointer(&index)), Len: 4},
		{Base: &payload[0], Len: uint64(len(payload))},
	}
	err := writev(fd, &vecs[0], 2)
	runtime.KeepAlive(payload)
	return err
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
