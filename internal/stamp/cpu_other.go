//go:build !amd64

package stamp

func cpu() uint32 { return getcpuSyscall() }

// curm cannot read the M here: 0 turns the thread id cache off.
func curm() uintptr { return 0 }

func lslInUse() bool { return false }

// rseqCPU: without the thread id cache there is no slot to keep a struct
// rseq's address in.
func rseqCPU(int32) *uint32 { return nil }

func rseqInUse() string { return "none" }

const rseqMode, rseqOwn = 0, 1

func cpuNoSlot() uint32 { return cpu() }
