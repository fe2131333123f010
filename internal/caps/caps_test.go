package caps

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStatus(t *testing.T) {
	for _, c := range []struct {
		status string
		ok     bool
		want   bool
	}{
		{"Name:\tx\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n", true, true}, // root
		{"Uid:\t1\t1\t1\t1\nCapEff:\t0000004000000000\n", true, true},           // CAP_PERFMON alone
		{"Uid:\t1\t1\t1\t1\nCapEff:\t0000000000200000\n", true, true},           // CAP_SYS_ADMIN alone
		{"Uid:\t65534\t65534\t65534\t65534\nCapEff:\t0000000000000000\n", true, false},
		{"Uid:\t1\t1\t1\t1\nCapEff:\t00000000000000ff\nCapBnd:\tffff\n", true, false}, // other capabilities
		{"Uid:\t0\t0\t0\t0\nCapPrm:\t000001ffffffffff\n", false, false},               // no CapEff line
		{"CapEff:\t000001ffffffffff\n", false, false},                                 // no Uid line
		{"Uid:\t0\t0\t0\t0\nCapEff:\tzz\n", false, false},
		{"Uid:\tx\nCapEff:\t000001ffffffffff\n", false, false},
	} {
		got, ok := parseStatus([]byte(c.status))
		if ok != c.ok || ok && got.perfmon() != c.want {
			t.Errorf("parseStatus(%q) = %+v, %v; want perfmon %v, %v", c.status, got, ok, c.want, c.ok)
		}
	}
}

// TestSelf: this process, root in CI, is capable; as an ordinary user not.
func TestSelf(t *testing.T) {
	want := os.Geteuid() == 0
	if got := PerfmonCapable(0); got != want {
		t.Errorf("PerfmonCapable(0) = %v as uid %d", got, os.Geteuid())
	}
}

// sleeper starts a process that waits until the test ends.
func sleeper(t *testing.T, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Skipf("%v: %v", args, err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait(); cancel() })
	return cmd.Process.Pid
}

// waitNS waits until process pid is no longer in this process's user
// namespace (unshare has made its own and exec'd).
func waitNS(t *testing.T, pid int) {
	t.Helper()
	self, _ := os.Readlink("/proc/self/ns/user")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ns, err := os.Readlink("/proc/" + itoa(pid) + "/ns/user")
		if err == nil && ns != self {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d never entered a user namespace of its own (%v)", pid, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func itoa(n int) string { return string(appendInt(nil, n)) }

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// TestUserNamespaceRoot: a process that is root with every capability in
// a user namespace it made (`unshare -Ur`) is not capable here, as Linux's
// capable() would refuse it in the initial namespace — what made PERSIST
// forgeable when CapEff alone decided.
func TestUserNamespaceRoot(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	pid := sleeper(t, "unshare", "-Ur", "cat")
	waitNS(t, pid)
	st, err := os.ReadFile("/proc/" + itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := parseStatus(st); !ok || !c.perfmon() {
		t.Fatalf("the namespaced process has no CAP_PERFMON in its CapEff: %+v %v — the test proves nothing", c, ok)
	}
	if PerfmonCapable(pid) {
		t.Error("root of its own user namespace counted as perfmon capable")
	}
}

// TestOtherProcesses: a root process in this namespace is capable (when
// this test is root), a process that has exited is not.
func TestOtherProcesses(t *testing.T) {
	pid := sleeper(t, "cat")
	if got, want := PerfmonCapable(pid), os.Geteuid() == 0; got != want {
		t.Errorf("PerfmonCapable(child of uid %d) = %v", os.Geteuid(), got)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if PerfmonCapable(cmd.Process.Pid) {
		t.Error("an exited process counted as capable")
	}
}

// TestRootSeenByOrdinaryUser: an ordinary user's process cannot open a
// root process's ns/user; the uid_map stands in, and pid 1, root with
// every capability in the initial namespace, is capable.
func TestRootSeenByOrdinaryUser(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("checked by TestAsOrdinaryUser, as nobody")
	}
	st, err := os.ReadFile("/proc/1/status")
	if err != nil {
		t.Skip(err)
	}
	if c, ok := parseStatus(st); !ok || !c.perfmon() || c.euid != 0 {
		t.Skipf("pid 1 is not root with CAP_PERFMON here: %+v", c)
	}
	if !PerfmonCapable(1) {
		t.Error("pid 1 (root) is not perfmon capable to an ordinary user")
	}
}

// TestAsOrdinaryUser runs this package's tests again as nobody.
func TestAsOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "uetrace-caps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copyExe := dir + "/caps.test"
	if err := os.WriteFile(copyExe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, copyExe, "-test.v", "-test.run", "^Test(Self|UserNamespaceRoot|OtherProcesses|RootSeenByOrdinaryUser)$")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestRootSeenByOrdinaryUser") {
		t.Errorf("the uid_map path was not checked:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
}

// TestInItsOwnNamespace: root of a user namespace is capable there — the
// namespace uetrace run --private makes for its command.
func TestInItsOwnNamespace(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	pid := sleeper(t, "unshare", "-Ur", "cat")
	waitNS(t, pid)
	other := sleeper(t, "cat") // this namespace's process, as this test's user
	ns, err := os.Open("/proc/" + itoa(pid) + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if !PerfmonCapableIn(int(ns.Fd()), pid) {
		t.Error("root of its own user namespace is not capable there")
	}
	// This namespace is the parent of that one: a process here with the
	// capability has it there too — and so does the namespace's owner.
	if !PerfmonCapableIn(int(ns.Fd()), other) {
		t.Errorf("a process of the namespace's owner (uid %d) is not capable in it", os.Geteuid())
	}
}
