package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
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
	base, err := os.MkdirTemp("", "uetrace-tracers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyBinary(t, base)
	serve := func(dir string, args ...string) string {
		sock := filepath.Join(base, dir, "uetrace.sock")
		srv, _ := background(t, append([]string{"serve", "--socket", sock, "--mode", "0666"}, args...)...)
		testutil.Wait(t, "the daemon to answer", func() bool { _, _, code := cli(t, sock, "status"); return code == 0 })
		t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() })
		return sock
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
