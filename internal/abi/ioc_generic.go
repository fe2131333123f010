//go:build !(mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64)

package abi

// The generic _IOC layout (include/uapi/asm-generic/ioctl.h): 14 size
// bits, direction in bits 30-31, _IOC_WRITE = 1, _IOC_READ = 2.
const (
	iocDirShift = 30
	iocSizeBits = 14
	iocWrite    = 1
	iocRead     = 2
)
