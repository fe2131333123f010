package procfs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The CPUs of a machine mean different things, each with its own name
// (Documentation/ABI/testing/sysfs-devices-system-cpu, Linux's
// include/linux/cpumask.h):
//
//   - possible (PossibleCPUs): every CPU this boot could ever bring up,
//     hot-plugged ones too; the kernel sizes per-CPU data by it
//     (nr_cpu_ids is the highest + 1), so a CPU number outside it cannot
//     exist;
//   - present (PresentCPUs): the CPUs in the machine now, online or not;
//   - online (OnlineCPUs): the CPUs scheduling tasks now — where a per-CPU
//     perf event can be opened, and what perf records as "nrcpus online";
//   - allowed (AllowedCPUs): the CPUs this process may run on, its affinity
//     (sched_getaffinity(2), status's Cpus_allowed) — fewer than online
//     under taskset or a cgroup's cpuset; what runtime.NumCPU counts, and
//     how many CPUs work spread over this process's threads can use.

// OnlineCPUs lists the CPUs online now (/sys/devices/system/cpu/online).
func OnlineCPUs() ([]int, error) { return cpuList("online") }

// PossibleCPUs lists the CPUs this boot could ever bring up
// (/sys/devices/system/cpu/possible).
func PossibleCPUs() ([]int, error) { return cpuList("possible") }

// PresentCPUs lists the CPUs in the machine now
// (/sys/devices/system/cpu/present).
func PresentCPUs() ([]int, error) { return cpuList("present") }

func cpuList(name string) ([]int, error) {
	b, err := ReadFile("/sys/devices/system/cpu/" + name)
	if err != nil {
		return nil, err
	}
	return ParseCPUList(string(b))
}

// AllowedCPUs is the number of CPUs this process may run on now: its
// affinity mask's (sched_getaffinity(2)), at least 1.
func AllowedCPUs() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil && set.Count() > 0 {
		return set.Count()
	}
	return 1
}

// MaxCPU is the highest CPU of a list, -1 for an empty one: the highest
// possible CPU + 1 is nr_cpu_ids, the number per-CPU data is sized by.
func MaxCPU(cpus []int) int {
	if len(cpus) == 0 {
		return -1
	}
	return slices.Max(cpus)
}

// ParseCPUList parses the kernel's CPU list format, "0-3,8,10-11" and a
// newline (bitmap_print_to_pagebuf's "%*pbl"; cpuset(7)'s "list format").
// A range wider than 65536 CPUs is refused (EINVAL): no kernel has more
// (NR_CPUS is at most 8192), and the list it would make is what an
// attacker-sized input would cost.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var cpus []int
	if s == "" {
		return nil, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: %w", s, unix.EINVAL)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("cpu list %q: %w", s, unix.EINVAL)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
