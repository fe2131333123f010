package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// A user's command as uid, with env (besides PATH): its combined output
// and exit status. A command still running at the deadline is killed and
// reported as exit -1.
func runAsUser(t *testing.T, uid uint32, env []string, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		return string(out), -1
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// A daemon of uid in the background, and how to stop it.
func serveAsUser(t *testing.T, uid uint32, env []string, bin string, args ...string) (*exec.Cmd, *testutil.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Dir = "/"
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return cmd, out
}

// Issue 28, item 5: a non-root serve without XDG_RUNTIME_DIR listens in
// /tmp/uetrace-<uid>, a name anyone can take first. serve starts only in
// a directory of the user's own, and a client sends nothing to a daemon
// that runs as someone it does not trust.
func TestCLISocketSquat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedRoot(t, "act as two other users")
	const victim, attacker = 65534, 65533
	base := testutil.SharedDir(t)
	bin := copyBinary(t, base)
	tmp := filepath.Join(base, "tmp") // a /tmp: everyone's, sticky
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(tmp, 0o1777)
	env := []string{"TMPDIR=" + tmp}
	dir := filepath.Join(tmp, fmt.Sprint("uetrace-", victim))
	sock := filepath.Join(dir, "uetrace.sock")
	mkdirAs := func(path string, uid int, mode os.FileMode) {
		t.Helper()
		if err := os.Mkdir(path, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, mode)
		if err := os.Chown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
	}

	// The attacker made the victim's directory first: serve refuses it.
	mkdirAs(dir, attacker, 0o777)
	out, code := runAsUser(t, victim, env, bin, "serve")
	if code == 0 || code == -1 || !strings.Contains(out, fmt.Sprintf("the socket's directory %s is owned by %d (uid %d), not by you (uid %d)", dir, attacker, attacker, victim)) {
		t.Errorf("serve in a directory another user made: exit %d\n%s", code, out)
	}

	// The attacker serves there: the victim's client finds out who runs
	// it before it sends a thing, and refuses.
	srv, srvOut := serveAsUser(t, attacker, env, bin, "--socket", sock, "--mode", "0666")
	testutil.Wait(t, "the attacker's daemon to answer", func() bool {
		_, code := runAsUser(t, attacker, nil, bin, "--socket", sock, "status")
		return code == 0
	})
	refused := fmt.Sprintf("the daemon there runs as %d (uid %d), not as root or as you (uid %d)", attacker, attacker, victim)
	for _, args := range [][]string{
		{"--backend", "daemon", "register", "--hold", "victim_secret u32 a"},
		{"--backend", "auto", "register", "victim_secret u32 a"},
		{"status"},
		{"--backend", "daemon", "record", "-e", "victim_*", "-o", filepath.Join(tmp, "victim.data")},
	} {
		out, code := runAsUser(t, victim, env, bin, args...)
		if code != 1 || !strings.Contains(out, refused) || !strings.Contains(out, "UETRACE_DAEMON_UID=65533") {
			t.Errorf("uetrace %s on the attacker's daemon: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if out, code := runAsUser(t, 0, []string{"UETRACE_SOCKET=" + sock}, bin, "status"); code != 1 || !strings.Contains(out, fmt.Sprintf("runs as %d (uid %d), not as root or as you (uid 0)", attacker, attacker)) {
		t.Errorf("root's status on the attacker's daemon: exit %d\n%s", code, out)
	}
	// Trusting it is a choice the user can make, by name.
	if out, code := runAsUser(t, victim, append(env, "UETRACE_DAEMON_UID=65533"), bin, "status"); code != 0 {
		t.Errorf("status with UETRACE_DAEMON_UID=65533: exit %d\n%s", code, out)
	}
	if strings.Contains(srvOut.String(), "victim_secret") {
		t.Errorf("the attacker's daemon saw the victim's event:\n%s", srvOut)
	}
	srv.Process.Signal(syscall.SIGTERM)
	srv.Wait()
	os.RemoveAll(dir)

	// A symbolic link, even to a directory of the victim's, and the
	// victim's own directory open to others are refused too.
	own := filepath.Join(base, "own")
	mkdirAs(own, victim, 0o700)
	if err := os.Symlink(own, dir); err != nil {
		t.Fatal(err)
	}
	if out, code := runAsUser(t, victim, env, bin, "serve"); code == 0 || code == -1 || !strings.Contains(out, "is a symbolic link") {
		t.Errorf("serve through a symbolic link: exit %d\n%s", code, out)
	}
	os.Remove(dir)
	mkdirAs(dir, victim, 0o755)
	if out, code := runAsUser(t, victim, env, bin, "serve"); code == 0 || code == -1 || !strings.Contains(out, "has mode 0755, which lets others in (want 0700)") {
		t.Errorf("serve in a directory of mode 0755: exit %d\n%s", code, out)
	}
	os.Remove(dir)

	// XDG_RUNTIME_DIR is held to the XDG Base Directory rules.
	xdg := filepath.Join(base, "xdg")
	mkdirAs(xdg, attacker, 0o777)
	xenv := []string{"XDG_RUNTIME_DIR=" + xdg}
	if out, code := runAsUser(t, victim, xenv, bin, "serve"); code == 0 || code == -1 || !strings.Contains(out, "XDG_RUNTIME_DIR "+xdg+" is owned by") {
		t.Errorf("serve with another user's XDG_RUNTIME_DIR: exit %d\n%s", code, out)
	}
	os.Chown(xdg, victim, victim)
	if out, code := runAsUser(t, victim, xenv, bin, "serve"); code == 0 || code == -1 || !strings.Contains(out, "has mode 0777") {
		t.Errorf("serve with an XDG_RUNTIME_DIR of mode 0777: exit %d\n%s", code, out)
	}
	os.Chmod(xdg, 0o700)

	// The normal path: the directory made 0700, and the user's own
	// clients served.
	for _, e := range [][]string{env, xenv} {
		srv, srvOut := serveAsUser(t, victim, e, bin)
		want := dir
		if e[0] == xenv[0] {
			want = filepath.Join(xdg, "uetrace")
		}
		testutil.Wait(t, "the victim's daemon to answer", func() bool {
			_, code := runAsUser(t, victim, e, bin, "status")
			return code == 0
		})
		if st := statOf(t, want); st.Uid != victim || st.Mode&0o777 != 0o700 {
			t.Errorf("%s: uid %d mode %04o, want %d 0700", want, st.Uid, st.Mode&0o777, victim)
		}
		if out, code := runAsUser(t, victim, e, bin, "--backend", "daemon", "register", "mine u32 a"); code != 0 {
			t.Errorf("register on the user's own daemon (%s): exit %d\n%s\ndaemon:\n%s", e[0], code, out, srvOut)
		}
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}
}

// A client in a user namespace that does not map the daemon's user sees
// the overflow uid, whoever runs it: such a daemon is trusted only at a
// socket whose every directory above can be written by its owner alone,
// where no other user could have put it.
func TestCLIDaemonUnmapped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedRoot(t, "map a user namespace")
	base := testutil.SharedDir(t)
	bin := copyBinary(t, base)
	owned, err := os.MkdirTemp("/run", "uetrace-unmapped")
	if err != nil {
		t.Skipf("no directory only root may write: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(owned) })
	os.Chmod(owned, 0o755)
	status := func(sock string) (string, int) {
		cmd := exec.Command(bin, "--socket", sock, "status")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		// Root of a namespace of its own, uid 65532 outside: without the
		// Credential it would stay the real root, unmapped.
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65532, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 65532, Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Skipf("a user namespace: %v", err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	for _, tc := range []struct {
		dir  string
		code int
		want string
	}{
		{filepath.Join(base, "d"), 1, "runs as a user this user namespace does not map"},
		{filepath.Join(owned, "d"), 0, "Active: 0"},
	} {
		sock := filepath.Join(tc.dir, "uetrace.sock")
		srv, _ := serveAsUser(t, 0, nil, bin, "--socket", sock, "--mode", "0666")
		testutil.Wait(t, "the daemon to answer", func() bool {
			_, code := runAsUser(t, 0, nil, bin, "--socket", sock, "status")
			return code == 0
		})
		if out, code := status(sock); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("status in a user namespace on %s: exit %d, want %d\n%s", sock, code, tc.code, out)
		}
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	}
}
