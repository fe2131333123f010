package procfs

import "strconv"

// PidfdNSpid reads the NSpid line of pidfd's /proc/self/fdinfo entry
// (pidfd_show_fdinfo, kernel/pid.c): the process's id in each pid namespace
// from this process's /proc's down to its own, as a status file's NSpid —
// or the one entry -1 where /proc's namespace cannot see it (a process in
// a namespace above, or one that has been reaped).
func PidfdNSpid(pidfd int) ([]int, error) {
	b, err := ReadFile("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return nil, err
	}
	return ParsePidfdNSpid(b), nil
}

// ParsePidfdNSpid is the NSpid line of a pidfd's fdinfo, nil if there is
// none: the same line as a status file's, parsed by ParseStatus's rule.
func ParsePidfdNSpid(b []byte) []int {
	s := ParseStatus(b)
	if !s.Has(StatusNSpid) {
		return nil
	}
	return s.NSpid
}
