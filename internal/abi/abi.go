// Package abi is the Linux user_events uapi (include/uapi/linux/user_events.h):
// the struct layouts and ioctl numbers, with thin raw wrappers around the
// three ioctls, and nothing else.
//
// It does not open tracefs, parse event definitions, or manage enable words;
// callers own the user_events_data file descriptor and the memory the kernel
// writes enable bits into.
package abi

import (
	"encoding/binary"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Registration flags (struct user_reg.flags).
const (
	// RegPersist keeps the event after its last reference is dropped
	// (USER_EVENT_REG_PERSIST). Needs CAP_PERFMON or CAP_SYS_ADMIN.
	RegPersist = 1 << 0
	// RegMultiFormat gives each (name, format) pair its own tracepoint
	// "name.<hexid>" in system user_events_multi (USER_EVENT_REG_MULTI_FORMAT).
	RegMultiFormat = 1 << 1
	// RegMax is the first invalid flag value (USER_EVENT_REG_MAX).
	RegMax = 1 << 2
)

// UserReg is struct user_reg, the DIAG_IOCSREG argument. The C struct is
// packed; these field types give Go the same offsets (every field is
// naturally aligned), but on 64-bit platforms unsafe.Sizeof rounds up to
// 32: always pass Size = UserRegSize.
type UserReg struct {
	Size       uint32 // input: UserRegSize
	EnableBit  uint8  // input: bit to reflect the enable state into
	EnableSize uint8  // input: 4 or 8 (8 only on 64-bit kernels)
	Flags      uint16 // input: RegPersist | RegMultiFormat
	EnableAddr uint64 // input: address of the enable word
	NameArgs   uint64 // input: address of the NUL-terminated "name[:flags] fields"
	WriteIndex uint32 // output: index to prefix writes with
}

// UserRegSize is sizeof(struct user_reg): offsetofend(write_index).
const UserRegSize = 28

// UserUnreg is struct user_unreg, the DIAG_IOCSUNREG argument (16 bytes).
type UserUnreg struct {
	Size        uint32 // UserUnregSize
	DisableBit  uint8  // bit given at registration
	Reserved    uint8  // must be 0
	Reserved2   uint16 // must be 0
	DisableAddr uint64 // address given at registration
}

// UserUnregSize is sizeof(struct user_unreg).
const UserUnregSize = 16

// DiagIocMagic is the ioctl type byte of the user_events ioctls.
const DiagIocMagic = '*'

const ptrSize = unsafe.Sizeof(uintptr(0))

// The ioctl request numbers, computed like the kernel's _IOC(dir, type, nr,
// size) with this architecture's bit layout (iocDirShift, iocRead and
// iocWrite come from the per-arch files). The kernel declares them with a
// pointer type as the size argument, so the size field is sizeof(pointer),
// not the size of the struct: 0xC0082A00, 0x40082A01 and 0x40082A02 on
// amd64, arm64 and riscv64.
const (
	// IocSReg is DIAG_IOCSREG, _IOWR('*', 0, struct user_reg *).
	IocSReg = (iocRead|iocWrite)<<iocDirShift | ptrSize<<iocSizeShift | DiagIocMagic<<iocTypeShift | 0<<iocNrShift
	// IocSDel is DIAG_IOCSDEL, _IOW('*', 1, char *).
	IocSDel = iocWrite<<iocDirShift | ptrSize<<iocSizeShift | DiagIocMagic<<iocTypeShift | 1<<iocNrShift
	// IocSUnreg is DIAG_IOCSUNREG, _IOW('*', 2, struct user_unreg *).
	IocSUnreg = iocWrite<<iocDirShift | ptrSize<<iocSizeShift | DiagIocMagic<<iocTypeShift | 2<<iocNrShift
)

const (
	iocNrShift   = 0
	iocTypeShift = 8
	iocSizeShift = 16
)

// The size field must hold sizeof(pointer): this fails to compile otherwise.
const _ = uintptr(1<<iocSizeBits-1) - ptrSize

// DynLoc is the kernel's DYN_LOC(offset, size): the value of a __data_loc or
// __rel_loc field, offset in the low 16 bits and size in the high 16 bits.
func DynLoc(off, size uint16) uint32 {
	return uint32(size)<<16 | uint32(off)
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// Register issues DIAG_IOCSREG on fd, a user_events_data descriptor. The
// caller fills r (Size = UserRegSize) and must keep the string at
// r.NameArgs alive and unmoved for the call; RegisterName does that. On
// success the kernel stores r.WriteIndex. Errors are unix.Errno values.
//
// A non-errno, non-zero return from the kernel (possible for the
// struct-size quirk, which returns a value below -4095) is reported as
// an error of type RetError.
func Register(fd int, r *UserReg) error {
	r1, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), IocSReg, uintptr(unsafe.Pointer(r)))
	runtime.KeepAlive(r)
	if e != 0 {
		return e
	}
	if r1 != 0 {
		return RetError(int(r1))
	}
	return nil
}

// RetError is a non-zero ioctl return value that is not an errno: the
// kernel returned a negative number below -4095, which the system call
// ABI passes through as a plain return value.
type RetError int

func (r RetError) Error() string {
	return "ioctl returned " + strconv.Itoa(int(r))
}

// RegisterName sets r.NameArgs to a NUL-terminated copy of nameArgs (which
// must not contain NUL bytes; if it does, the kernel sees only the text up
// to the first one) and calls Register.
func RegisterName(fd int, r *UserReg, nameArgs string) error {
	p := cString(nameArgs)
	r.NameArgs = uint64(uintptr(unsafe.Pointer(p)))
	err := Register(fd, r)
	runtime.KeepAlive(p)
	return err
}

// cString returns a NUL-terminated copy of s on the heap (the Go heap does
// not move objects, and a pointer returned from a non-inlined function
// cannot live on the caller's stack, whose copy could move).
//
//go:noinline
func cString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// Unregister issues DIAG_IOCSUNREG on fd. The caller fills u
// (Size = UserUnregSize, DisableBit, DisableAddr).
func Unregister(fd int, u *UserUnreg) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), IocSUnreg, uintptr(unsafe.Pointer(u)))
	runtime.KeepAlive(u)
	return errnoErr(e)
}

// Delete issues DIAG_IOCSDEL for the event registered as name. Text after
// a NUL byte in name is not seen by the kernel.
func Delete(fd int, name string) error {
	p := cString(name)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), IocSDel, uintptr(unsafe.Pointer(p)))
	runtime.KeepAlive(p)
	return errnoErr(e)
}

// Bytes encodes r as the kernel lays struct user_reg out: packed, in the
// machine's byte order.
func (r UserReg) Bytes() []byte {
	b := make([]byte, UserRegSize)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], r.Size)
	b[4], b[5] = r.EnableBit, r.EnableSize
	ne.PutUint16(b[6:], r.Flags)
	ne.PutUint64(b[8:], r.EnableAddr)
	ne.PutUint64(b[16:], r.NameArgs)
	ne.PutUint32(b[24:], r.WriteIndex)
	return b
}

// Bytes encodes u as the kernel lays struct user_unreg out.
func (u UserUnreg) Bytes() []byte {
	b := make([]byte, UserUnregSize)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], u.Size)
	b[4], b[5] = u.DisableBit, u.Reserved
	ne.PutUint16(b[6:], u.Reserved2)
	ne.PutUint64(b[8:], u.DisableAddr)
	return b
}

// RegisterBytes issues DIAG_IOCSREG with reg, a struct user_reg as Bytes
// lays it out, whose name_args it points at a NUL-terminated copy of
// nameArgs; it returns the write index the kernel stored. reg is copied
// first; its size field must not say more than its length.
func RegisterBytes(fd int, reg []byte, nameArgs string) (uint32, error) {
	b := make([]byte, max(len(reg), UserRegSize))
	copy(b, reg)
	p := cString(nameArgs)
	binary.NativeEndian.PutUint64(b[16:], uint64(uintptr(unsafe.Pointer(p))))
	r1, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), IocSReg, uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(p)
	runtime.KeepAlive(b)
	if e != 0 {
		return 0, e
	}
	if r1 != 0 {
		return 0, RetError(int(r1))
	}
	return binary.NativeEndian.Uint32(b[24:]), nil
}

// UnregisterBytes issues DIAG_IOCSUNREG with unreg, a struct user_unreg as
// Bytes lays it out.
func UnregisterBytes(fd int, unreg []byte) error {
	b := make([]byte, max(len(unreg), UserUnregSize))
	copy(b, unreg)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), IocSUnreg, uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(b)
	return errnoErr(e)
}
