package procfs

import (
	"bytes"
	"strconv"
)

// Comm reads /proc/<pid>/comm: the command name of the process pid (of
// its thread pid, for a thread's id).
func Comm(pid int) (string, error) {
	b, err := ReadFile(pidPath(pid, "comm"))
	if err != nil {
		return "", err
	}
	return ParseComm(b), nil
}

// ThreadComm reads /proc/<pid>/task/<tid>/comm: the command name of thread
// tid of process pid, which a thread may set apart from its process's
// (PR_SET_NAME). The path fails if tid is not pid's.
func ThreadComm(pid, tid int) (string, error) {
	b, err := ReadFile(pidPath(pid, "task/"+strconv.Itoa(tid)+"/comm"))
	if err != nil {
		return "", err
	}
	return ParseComm(b), nil
}

// ParseComm is a comm file's name: the kernel writes the task's comm and a
// newline (proc_task_name, fs/proc/array.c). Only that one newline is
// taken off: a name may hold any byte but NUL, a newline too.
func ParseComm(b []byte) string { return string(CommBytes(b)) }

// CommBytes is ParseComm without the allocation: the name is b's bytes, for
// a caller that reads comm at every request and keeps a name while it does
// not change.
func CommBytes(b []byte) []byte { return bytes.TrimSuffix(b, []byte("\n")) }
