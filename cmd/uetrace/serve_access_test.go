package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/uetrace/uetrace/internal/testutil"
	"golang.org/x/sys/unix"
)

// --tracers takes users and @groups by number or name, and all.
func TestParseTracers(t *testing.T) {
	tr, err := parseTracers("0, root,1000,@0,@root,@4242")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.UIDs, []uint32{0, 0, 1000}) || !slices.Equal(tr.GIDs, []uint32{0, 0, 4242}) || tr.All {
		t.Errorf("parsed %+v", tr)
	}
	if tr, err := parseTracers("all"); err != nil || !tr.All {
		t.Errorf("all: %+v, %v", tr, err)
	}
	if tr, err := parseTracers(""); err != nil || tr.All || len(tr.UIDs)+len(tr.GIDs) != 0 {
		t.Errorf("empty: %+v, %v", tr, err)
	}
	for _, bad := range []string{"no-such-user-here", "@no-such-group-here", "-1", "@"} {
		if _, err := parseTracers(bad); !errors.Is(err, unix.EINVAL) {
			t.Errorf("--tracers %q: %v, want EINVAL", bad, err)
		}
	}
}

// A user who may connect but is not a tracer produces and reads the
// status, with the daemon's counts; control is EACCES, naming --tracers;
// serve --tracers lets it in.
func TestCLITracers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedRoot(t, "connect as another user")
	base := testutil.SharedDir(t)
	bin := copyBinary(t, base)
	serve := func(dir string, args ...string) string {
		return serveAt(t, filepath.Join(base, dir, "uetrace.sock"), append([]string{"--mode", "0666"}, args...)...)
	}
	sock := serve("default")
	out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status")
	if code != 0 || !strings.Contains(out, "Daemon:") || !strings.Contains(out, "uid 65534 connections ") || strings.Contains(out, "uid 0 ") ||
		!strings.Contains(out, "\n  shared_kb ") || !strings.Contains(out, "\n  fuse_files 0\n") {
		t.Errorf("status as nobody: exit %d\n%s", code, out)
	}
	out, code = asNobody(t, bin, "--backend", "daemon", "--socket", sock, "write", "tracing_on", "0")
	if code == 0 || !strings.Contains(out, "EACCES") || !strings.Contains(out, "--tracers") {
		t.Errorf("tracing_on 0 as nobody: exit %d\n%s", code, out)
	}
	if got := mustCLI(t, sock, "cat", "tracing_on"); got != "1\n" {
		t.Errorf("tracing_on after nobody's refused write: %q", got)
	}
	if out := mustCLI(t, sock, "status"); !strings.Contains(out, "denied 1") {
		t.Errorf("root's status does not count the refusal:\n%s", out)
	}

	sock = serve("listed", "--tracers", "65534", "--shared-kb", "4096", "--max-fuse-files", "16")
	if out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "write", "tracing_on", "0"); code != 0 {
		t.Errorf("tracing_on 0 as a listed tracer: exit %d\n%s", code, out)
	}
	if got := mustCLI(t, sock, "cat", "tracing_on"); got != "0\n" {
		t.Errorf("tracing_on after the tracer's write: %q", got)
	}
}

// FuzzParseTracers: any --tracers text is a list or EINVAL, and a list
// printed (daemon.Tracers.String, numbers) reads back the same.
func FuzzParseTracers(f *testing.F) {
	for _, s := range []string{"", "all", "0", "root", "@0", "@root", "1000,@4242", " 1 , @2 ,", "@", "-1", "4294967296", "all,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := parseTracers(s)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("%q: %v, want EINVAL", s, err)
			}
			return
		}
		back, err := parseTracers(tr.String())
		if err != nil || back.All != tr.All || !tr.All && (!slices.Equal(back.UIDs, tr.UIDs) || !slices.Equal(back.GIDs, tr.GIDs)) {
			t.Fatalf("%q parsed %+v, printed %q, read back %+v, %v", s, tr, tr.String(), back, err)
		}
	})
}

// asNobody runs the binary as uid/gid 65534 and returns its stderr and
// exit code.
func asNobody(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "UETRACE_SOCKET="}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// serve --mode and --group set who may connect; a client refused says
// whose socket it is and what to do.
func TestCLISocketAccess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedRoot(t, "connect as another user")
	// A directory other users can reach, for the binary and the daemons.
	base := testutil.SharedDir(t)
	bin := copyBinary(t, base)
	serve := func(dir string, args ...string) string {
		return serveAt(t, filepath.Join(base, dir, "uetrace.sock"), args...)
	}
	rootName, rootGroup := nameOf(t, 0, false), nameOf(t, 0, true)

	// The default, 0660 and root's group: a stranger is told whose it is.
	sock := serve("default")
	want := fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0660): ask to be added to its group, or start your own with uetrace serve\n", sock, rootName, rootGroup)
	if out, code := asNobody(t, bin, "--socket", sock, "status"); code != 1 || out != want {
		t.Errorf("uid 65534 on root's default daemon: exit %d\n got %q\nwant %q", code, out, want)
	}

	// 0600: the other user is refused by the socket, and told so.
	sock = serve("private", "--mode", "0600")
	st := statOf(t, sock)
	if st.Mode&0o777 != 0o600 {
		t.Errorf("--mode 0600: socket mode %04o", st.Mode&0o777)
	}
	if dst := statOf(t, filepath.Dir(sock)); dst.Mode&0o777 != 0o700 {
		t.Errorf("--mode 0600: directory mode %04o, want 0700", dst.Mode&0o777)
	}
	// The directory keeps nobody out: 0600 is the socket's own refusal.
	os.Chmod(filepath.Dir(sock), 0o755)
	want = fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0600): ask to be added to its group, or start your own with uetrace serve\n", sock, rootName, rootGroup)
	for _, backend := range []string{"daemon", "auto"} {
		out, code := asNobody(t, bin, "--backend", backend, "--socket", sock, "status")
		if code != 1 || out != want {
			t.Errorf("--backend %s as uid 65534 on a 0600 socket: exit %d\n got %q\nwant %q", backend, code, out, want)
		}
	}
	out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "register", "x u32 a")
	if code != 1 || out != want {
		t.Errorf("register as uid 65534 on a 0600 socket: exit %d\n got %q\nwant %q", code, out, want)
	}
	// A directory that refuses is named instead.
	os.Chmod(filepath.Dir(sock), 0o700)
	out, _ = asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status")
	if want := fmt.Sprintf("uetrace: permission denied on %s (owned by %s:%s, mode 0700): ask to be added to its group, or start your own with uetrace serve\n", filepath.Dir(sock), rootName, rootGroup); out != want {
		t.Errorf("refused by the directory:\n got %q\nwant %q", out, want)
	}

	// --group: the socket and its directory get the group, whose members
	// may connect.
	group := nameOf(t, 65534, true)
	sock = serve("shared", "--group", group)
	if st := statOf(t, sock); st.Gid != 65534 || st.Mode&0o777 != 0o660 {
		t.Errorf("--group %s: socket gid %d mode %04o, want 65534 0660", group, st.Gid, st.Mode&0o777)
	}
	if st := statOf(t, filepath.Dir(sock)); st.Gid != 65534 || st.Mode&0o777 != 0o750 {
		t.Errorf("--group %s: directory gid %d mode %04o, want 65534 0750", group, st.Gid, st.Mode&0o777)
	}
	if out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status"); code != 0 {
		t.Errorf("a member of --group %s: exit %d\n%s", group, code, out)
	}

	// --mode 0666: everyone.
	sock = serve("open", "--mode", "0666")
	if st := statOf(t, sock); st.Mode&0o777 != 0o666 {
		t.Errorf("--mode 0666: socket mode %04o", st.Mode&0o777)
	}
	if out, code := asNobody(t, bin, "--backend", "daemon", "--socket", sock, "status"); code != 0 {
		t.Errorf("anyone on a 0666 socket: exit %d\n%s", code, out)
	}
}

// nameOf is the user or group name of an id, as the error shows it.
func nameOf(t *testing.T, id int, group bool) string {
	t.Helper()
	s := strconv.Itoa(id)
	if group {
		if g, err := user.LookupGroupId(s); err == nil {
			return g.Name
		}
		return s
	}
	if u, err := user.LookupId(s); err == nil {
		return u.Username
	}
	return s
}

// serveAt runs uetrace serve with args on the socket sock until the test
// ends (then SIGTERM), and returns sock once the daemon answers.
func serveAt(t *testing.T, sock string, args ...string) string {
	t.Helper()
	srv, _ := background(t, append([]string{"serve", "--socket", sock}, args...)...)
	testutil.Wait(t, "the daemon to answer", func() bool { _, _, code := cli(t, sock, "status"); return code == 0 })
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
	return sock
}
