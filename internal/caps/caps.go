// Package caps answers the one capability question user_events asks of a
// caller — perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN in its effective
// set — by reading procfs. It sets no capabilities and checks no others.
package caps

import (
	"os"
	"strconv"
	"strings"
)

// Capability bits (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

// PerfmonCapable reports whether process pid (0: this process) has
// CAP_PERFMON or CAP_SYS_ADMIN in its effective set, from the CapEff line
// of /proc/<pid>/status. A process that cannot be read has neither.
func PerfmonCapable(pid int) bool {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return perfmonIn(string(b))
}

// perfmonIn reads the CapEff line of a status file.
func perfmonIn(status string) bool {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && eff&(1<<capPerfmon|1<<capSysAdmin) != 0
		}
	}
	return false
}
