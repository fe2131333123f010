package caps

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

// startAs starts args with cred, its stdout's first line awaited: it runs
// until the test ends.
func startAs(t *testing.T, cred *syscall.Credential, args ...string) int {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if !bufio.NewScanner(out).Scan() {
		t.Fatalf("%v said nothing", args)
	}
	return cmd.Process.Pid
}

func TestCheck(t *testing.T) {
	testutil.NeedRoot(t, "processes of other users")
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	pid := startAs(t, nobody, "sh", "-c", "echo ready; exec cat")
	self := os.Getpid()
	for _, tc := range []struct {
		name string
		u    User
		pid  int
		want error
	}{
		{"privileged reaches anyone", User{UID: 1, GID: 1, Privileged: true}, pid, nil},
		{"root reaches root's", User{UID: 0, GID: 0}, self, nil},
		{"the same user", User{UID: 65534, GID: 65534}, pid, nil},
		{"another user", User{UID: 65534, GID: 65534}, self, unix.EPERM},
		{"root without CAP_SYS_PTRACE, another user's", User{UID: 0, GID: 0}, pid, unix.EPERM},
		{"another group", User{UID: 65534, GID: 1}, pid, unix.EPERM},
		{"gone", User{UID: 65534, GID: 65534}, 1 << 30, unix.ESRCH},
	} {
		err := tc.u.Check(tc.pid)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A process of the user's that is not dumpable (PR_SET_DUMPABLE 0, as a
// process that changed credentials is) is refused, as ptrace refuses it.
func TestCheckNotDumpable(t *testing.T) {
	testutil.NeedRoot(t, "a process of another user")
	// The system's python3: one in root's home the other user cannot run.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 to call prctl")
	}
	pid := startAs(t, &syscall.Credential{Uid: 65534, Gid: 65534}, py, "-c",
		"import ctypes, sys; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); print('ready', flush=True); sys.stdin.read()")
	err := User{UID: 65534, GID: 65534}.Check(pid)
	if !errors.Is(err, unix.EPERM) {
		t.Errorf("a process that is not dumpable: %v, want EPERM", err)
	}
}

func TestIDs(t *testing.T) {
	u, g, ok := ids([]byte("Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\n"))
	if !ok || u != [3]uint32{1, 2, 3} || g != [3]uint32{5, 6, 7} {
		t.Errorf("ids: %v %v %v", u, g, ok)
	}
	if _, _, ok := ids([]byte("Uid:\t1\t2\nGid:\t5\t6\t7\n")); ok {
		t.Error("ids of a short Uid line: ok")
	}
}

func FuzzIDs(f *testing.F) {
	f.Add([]byte("Uid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\n"))
	f.Fuzz(func(t *testing.T, b []byte) { ids(b) })
}
