//go:build mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64

package abi

// The _IOC layout of powerpc, mips and sparc: 13 size bits, direction in
// bits 29-31, _IOC_NONE = 1, _IOC_READ = 2, _IOC_WRITE = 4.
const (
	iocDirShift = 29
	iocSizeBits = 13
	iocWrite    = 4
	iocRead     = 2
)
