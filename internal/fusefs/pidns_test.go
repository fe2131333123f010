package fusefs_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// A tree served for a user (Options.For) reaches a caller's memory only
// where that user could ptrace it, however the caller reached the mount:
// served for root without CAP_SYS_PTRACE, a caller of root's uid and gid is
// served (newHostile's warm-up client, and the client here), one of another
// gid is EPERM at DIAG_IOCSREG, its memory untouched — as ptrace would
// refuse that user. (A pid FUSE gave in another namespace than the one the
// tree was told, or one reused, thus never reaches another user's process.)
func TestHostileServedFor(t *testing.T) {
	e := newHostileWith(t, fusefs.Options{For: &caps.User{UID: 0, GID: 0}})
	e.client("served_for_same")

	ctx, cancel := context.WithTimeout(context.Background(), clientDeadline)
	defer cancel()
	c := e.cmd(ctx, "client", e.dir, "served_for_other")
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 65534}}
	out, err := c.Output()
	stderr := c.Stderr.(*testutil.Buffer).String()
	if err == nil || !strings.Contains(stderr, "DIAG_IOCSREG") || !strings.Contains(stderr, "EPERM") {
		t.Errorf("a caller of gid 65534 in a tree served for gid 0: %v, %q, %q; want DIAG_IOCSREG's EPERM", err, out, stderr)
	}
	if st := e.sh(`cat "$T/user_events_status"`); strings.Contains(st, "served_for_other") {
		t.Errorf("the refused caller's event was registered:\n%s", st)
	}
	e.client("served_for_after")
}

// A tree told the wrong pid namespace — a client that mounted in a pid
// namespace of its own and handed the device over from outside it, which
// the daemon cannot catch — still never reaches another user's process: the
// mounter's command gets, in its namespace, the pid another user's process V
// has in this one, and calls DIAG_IOCSREG with the address of V's struct
// user_reg. The tree takes the id as its own namespace's, so finds V — and
// refuses it, as the user it is served for (65534) could not ptrace V (uid
// 1): EPERM, and V's write_index is still its sentinel. (Served for root,
// the same call registers V's event and writes into V.)
func TestHostileWrongNamespace(t *testing.T) {
	py, script := wrongNamespaceScript(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	victim := exec.CommandContext(ctx, py, script, "victim")
	victim.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1, Gid: 1}}
	victim.Dir, victim.Stderr = "/", os.Stderr
	vin, err := victim.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	vout, err := victim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { vin.Close(); victim.Wait() }()
	if sc := bufio.NewScanner(vout); !sc.Scan() || sc.Text() != "ready" {
		t.Fatal("the victim did not start")
	}
	vpid := victim.Process.Pid
	if vpid < 100 {
		t.Skipf("the victim's pid %d is one the namespace's own processes may hold", vpid)
	}

	s := subsys.New(subsys.Options{NumCPU: 2})
	out := serveFromChildNamespace(t, ctx, s, fusefs.Options{
		// PIDs left nil: this process's namespace, not the mounter's.
		For: &caps.User{UID: 65534, GID: 65534},
	}, py, script, "mounter", strconv.Itoa(vpid))
	if !strings.Contains(out, "ioctl=-1 errno=EPERM") {
		t.Errorf("DIAG_IOCSREG at pid %d of another namespace, taken as this one's, was not refused: %s", vpid, out)
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(vpid) + "/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var wi [4]byte
	if _, err := mem.ReadAt(wi[:], 0x5a5a00000000+24); err != nil {
		t.Fatal(err)
	}
	if got := binary.NativeEndian.Uint32(wi[:]); got != 0xdeadbeef {
		t.Errorf("the victim's write_index was written: %#x, want the sentinel 0xdeadbeef", got)
	}
}

// A caller found wrongly lends nothing of the process it was taken for:
// not its privilege, not its uid's account. The mounter (pid 1 of its own
// pid namespace, handed over from outside as above, then uid 65534 with no
// capabilities) is taken for this namespace's pid 1, a root process with
// CAP_PERFMON. Before, its write of "!u:root_persist u32 x" to dynamic_events
// deleted root's persistent event with that process's privilege (where
// Linux, and the socket, answer EPERM to a caller without CAP_PERFMON), and
// its open files counted in uid 0's account, which no limit holds. Now a
// caller the tree's user could not ptrace has no privilege and counts in the
// tree's user's account.
func TestHostileWrongNamespaceLendsNothing(t *testing.T) {
	py, script := wrongNamespaceScript(t)
	if caps.PerfmonCapable(1) == false {
		t.Skip("this namespace's pid 1 is not perfmon-capable: it lends nothing to take")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := subsys.New(subsys.Options{NumCPU: 2})
	if err := s.FS().WriteFile(subsys.FileDynamicEvents, []byte("u:root_persist u32 x\n"), os.O_APPEND, subsys.Cred{PerfmonCapable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FS().Stat("events/user_events/root_persist"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	charged := map[uint32]int{}
	out := serveFromChildNamespace(t, ctx, s, fusefs.Options{
		For: &caps.User{UID: 65534, GID: 65534},
		Charge: func(uid uint32, cred subsys.Cred, files, regs int, force bool) error {
			mu.Lock()
			defer mu.Unlock()
			if files > 0 {
				charged[uid] += files
			}
			return nil
		},
	}, py, script, "unprivileged")
	if !strings.Contains(out, "delete=EPERM") {
		t.Errorf("a caller without CAP_PERFMON, taken for pid 1, deleting root's persistent event: %s; want EPERM", out)
	}
	if _, err := s.FS().Stat("events/user_events/root_persist"); err != nil {
		t.Errorf("root's persistent event is gone: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if charged[0] != 0 || charged[65534] == 0 {
		t.Errorf("the caller's open files were charged to %v; want uid 65534's account (the tree's user), not uid 0's", charged)
	}
}

// wrongNamespaceScript is testdata/wrongns.py in a directory every user may
// read, and the system's python3 (ctypes), which other users may run.
func wrongNamespaceScript(t *testing.T) (py, script string) {
	t.Helper()
	testutil.NeedFUSE(t, "pid namespaces, mounting FUSE, another user's process")
	py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 for testdata/wrongns.py")
	}
	src, err := os.ReadFile(filepath.Join("testdata", "wrongns.py"))
	if err != nil {
		t.Fatal(err)
	}
	// A directory the victim's user can read (t.TempDir's parent is 0700).
	tmp, err := os.MkdirTemp("", "uetrace-wrongns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(tmp, "wrongns.py")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return py, script
}

// serveFromChildNamespace runs wrongns.py's mode with args as pid 1 of a new
// pid and mount namespace, which mounts FUSE on a directory beside the script
// and hands the device over; serves s's tree on it with o from this process
// (as the daemon serves a device a client handed over from another
// namespace than the mount's), tells the mounter to go, and returns what it
// printed once it has exited.
func serveFromChildNamespace(t *testing.T, ctx context.Context, s *subsys.Subsystem, o fusefs.Options, py, script, mode string, args ...string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(script), "tracing")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "ours"), os.NewFile(uintptr(pair[1]), "theirs")
	defer ours.Close()
	mounter := exec.CommandContext(ctx, py, append([]string{script, mode, dir}, args...)...)
	mounter.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	mounter.ExtraFiles = []*os.File{theirs}
	var out testutil.Buffer
	mounter.Stdout, mounter.Stderr = &out, &out
	if err := mounter.Start(); err != nil {
		t.Skipf("a new pid namespace: %v", err)
	}
	theirs.Close()
	buf, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(pair[0], buf, oob, unix.MSG_CMSG_CLOEXEC)
	var fds []int
	if err == nil {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0])
		}
	}
	if len(fds) != 1 {
		mounter.Wait()
		t.Fatalf("the mounter handed no device over: %v\n%s", err, out.String())
	}
	tree, err := fusefs.Serve(os.NewFile(uintptr(fds[0]), "/dev/fuse"), s, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if _, err := ours.Write([]byte("go")); err != nil {
		t.Fatal(err)
	}
	if err := mounter.Wait(); err != nil {
		t.Fatalf("the mounter: %v\n%s", err, out.String())
	}
	return out.String()
}

// A descriptor handed over that is not a FUSE device — a pipe whose other
// end the client keeps, a socket — is refused (EINVAL) and not kept: served,
// it was read for requests that never came, held with its goroutine until
// the daemon stopped, one more for each ServeFUSE of a tracer. A FUSE device
// never mounted ends its tree at once (the kernel's read says EPERM).
func TestServeRefusesOtherDescriptors(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	s := subsys.New(subsys.Options{NumCPU: 2})
	if tree, err := fusefs.Serve(r, s, fusefs.Options{For: &caps.User{UID: 65534, GID: 65534}}); !errors.Is(err, unix.EINVAL) {
		if err == nil {
			tree.Close()
		}
		t.Errorf("Serve of a pipe: %v, want EINVAL", err)
	}
	testutil.NeedRoot(t, "/dev/fuse")
	dev, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	tree, err := fusefs.Serve(dev, s, fusefs.Options{For: &caps.User{UID: 65534, GID: 65534}})
	if err != nil {
		t.Fatalf("Serve of an unmounted /dev/fuse: %v", err)
	}
	defer tree.Close()
	select {
	case <-tree.Done():
	case <-time.After(time.Minute):
		t.Error("the tree on a FUSE device never mounted is still served after a minute")
	}
}
