package ringcheck

import (
	"runtime"

	"github.com/uetrace/uetrace/internal/procfs"
)

// PossibleCPUs is the number of CPUs this machine can have: nr_cpu_ids,
// the highest possible CPU + 1 (procfs.PossibleCPUs), at least
// runtime.NumCPU. It is read once, at start-up.
var PossibleCPUs = func() int {
	cpus, _ := procfs.PossibleCPUs()
	return max(runtime.NumCPU(), procfs.MaxCPU(cpus)+1)
}()

// CPU is the CPU a producer reported, as a CPU that can exist: taken
// modulo PossibleCPUs. A CPU cannot be checked — the CPU a thread last ran
// on says nothing of where it wrote — but no consumer may see one that
// cannot exist. An honest producer's CPU is below PossibleCPUs, and so
// taken as it is without a division.
func CPU(cpu uint32) int {
	if n := uint32(PossibleCPUs); cpu >= n {
		cpu %= n
	}
	return int(cpu)
}
