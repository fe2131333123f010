package procfs

import (
	"bytes"
	"strconv"
)

// ParseStat reads the command name and the CPU last run on (processor,
// field 39) from /proc/<tid>/stat (do_task_stat, fs/proc/array.c): the pid,
// then comm in parentheses — possibly with spaces and parentheses of its
// own, so it ends at the last ')' — then fields 3 (state) to 52. A line cut
// short, or whose field 39 is not a number, has CPU 0. comm is b's bytes:
// a caller reading stat on every request keeps a name without allocating
// while it does not change.
func ParseStat(b []byte) (comm []byte, cpu int, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return nil, 0, false
	}
	comm = b[open+1 : end]
	rest := b[end+1:]
	field := 2 // rest starts after field 2 (comm)
	for len(rest) > 0 {
		// Skip the separator, then take one field.
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\n') {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			break
		}
		i := 0
		for i < len(rest) && rest[i] != ' ' && rest[i] != '\n' {
			i++
		}
		field++
		if field == 39 {
			v, err := strconv.Atoi(string(rest[:i])) // no allocation: the conversion does not escape
			if err != nil {
				return comm, 0, true
			}
			return comm, v, true
		}
		rest = rest[i:]
	}
	return comm, 0, true
}
