package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// TestUserNamespaceRootIsNotPrivileged: a client that is root of a user
// namespace it made (`unshare -Ur`) has every capability in its CapEff,
// none in the daemon's namespace. As Linux refuses it there (capable()
// in init_user_ns), the daemon refuses it PERSIST registrations, `u:`
// lines in dynamic_events and the deletion of root's PERSIST event — all
// of which it once allowed, reading CapEff alone.
func TestUserNamespaceRootIsNotPrivileged(t *testing.T) {
	if os.Getenv("UETRACE_TEST_CHILD") == "userns" {
		userNamespaceChild(t)
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	dir, err := os.MkdirTemp("", "uetrace-userns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	s := serveIn(t, Config{}, dir)
	os.Chmod(s.sock, 0o666)

	// The daemon's owner creates a PERSIST event the child will try to
	// delete. Without privilege (an ordinary user running the test) there
	// is none to delete: the other two refusals are still checked.
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	owner := a.dial(t, s.sock)
	persisted := owner.PerfmonCapable()
	if persisted {
		if _, _, err := owner.Register(reg(a.addr(0), abi.RegPersist), "root_persist u32 a", false); err != nil {
			t.Fatalf("PERSIST as the daemon's root: %v", err)
		}
		un := make([]byte, 16)
		wire.LE.PutUint32(un, 16)
		wire.LE.PutUint64(un[8:], a.addr(0))
		if err := owner.Unregister(un); err != nil {
			t.Fatal(err)
		}
		// The connection's reference would make the deletion EBUSY, which
		// Linux checks before privilege.
		owner.Close()
		owner = a.dial(t, s.sock)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(dir, "child.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyExe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "-Ur", copyExe, "-test.run=^TestUserNamespaceRootIsNotPrivileged$", "-test.v")
	cmd.Env = append(os.Environ(), "UETRACE_TEST_CHILD=userns", "UETRACE_TEST_SOCK="+s.sock)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "unshare failed") {
			t.Skipf("no user namespaces here: %s", out)
		}
		t.Fatalf("child in a user namespace: %v\n%s", err, out)
	}
	t.Logf("child: %s", bytes.TrimSpace(out))
	for _, want := range []string{"capable: false", "persist: EPERM", "u: create: EPERM"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("child's output lacks %q", want)
		}
	}
	if persisted {
		if !strings.Contains(string(out), "delete root's persist: EPERM\n") {
			t.Errorf("root's PERSIST event deleted by a user namespace's root")
		}
		if !strings.Contains(readFile(t, owner, "dynamic_events"), "root_persist") {
			t.Errorf("root's PERSIST event is gone:\n%s", readFile(t, owner, "dynamic_events"))
		}
	}
}

// userNamespaceChild is the client inside the user namespace.
func userNamespaceChild(t *testing.T) {
	a := newArena(t, 4096, unix.F_SEAL_SHRINK)
	c, err := client.Dial(os.Getenv("UETRACE_TEST_SOCK"), &client.Arena{FD: a.fd, Addr: a.addr(0), Size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(st)) {
		if strings.HasPrefix(line, "CapEff:") {
			fmt.Print(line)
		}
	}
	errno := func(err error) string {
		var e unix.Errno
		if errors.As(err, &e) {
			return unix.ErrnoName(e)
		}
		return fmt.Sprint(err)
	}
	fmt.Printf("capable: %v\n", c.PerfmonCapable())
	_, _, err = c.Register(reg(a.addr(0), abi.RegPersist), "ns_persist u32 a", false)
	fmt.Printf("persist: %s\n", errno(err))
	fmt.Printf("u: create: %s\n", errno(writeFile(c, "dynamic_events", "u:ns_dyn u32 a")))
	fmt.Printf("delete root's persist: %s\n", errno(c.Delete("root_persist")))
}
