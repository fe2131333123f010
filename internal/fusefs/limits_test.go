package fusefs_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/fusefs/callers"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

const (
	nobodyUID = 65534
	otherUID  = 65533
	// capDACOverride lets a caller that is not root through the tree's
	// root-only modes (default_permissions) without making it root or
	// perfmon-capable, whom the per-uid limits spare.
	capDACOverride = 1
)

// TestFUSELimitsPerUID: what a caller of the tree makes the daemon hold
// counts in its uid's account (daemon.Server.FUSECharge): one user (nobody)
// hoarding open files, directories and registrations through FUSE gets
// EMFILE and ENOMEM at its limits — the events failed registrations left
// in its user_events_data counting (they did not, and 50 such made 50
// events) — another user and root are served on,
// the daemon's Stats show the hoard, and once the hoarder is killed its
// account is back to nothing. (Before, the FUSE tree bounded none of it.)
// All mount access is from child processes under deadlines.
func TestFUSELimitsPerUID(t *testing.T) {
	testutil.NeedFUSE(t, "mounting FUSE, running callers as other users")
	// A directory the other users can reach: the program, and the mount.
	top := testutil.SharedDir(t)
	bin := testutil.BuildC(t, filepath.Join(top, "hostile"), filepath.Join("testdata", "hostile.c"), "-Wall", "-O2", "-pthread")
	os.Chmod(bin, 0o755)

	s := subsys.New(subsys.Options{NumCPU: 1})
	srv := daemon.New(daemon.Config{Subsystem: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: daemon.Limits{FilesPerUID: 8, RegistrationsPerUID: 5}})
	defer srv.Close()
	cs := callers.New(s)
	_ = cs.Follow()
	dir := filepath.Join(top, "tracing")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tree, err := fusefs.Mount(dir, s, fusefs.Options{Callers: cs, Charge: srv.FUSECharge, ChargeRefs: srv.FUSEChargeRefs})
	if err != nil {
		cs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Tree.Close aborts the connection before it detaches the mount.
		if err := tree.Close(); err != nil {
			t.Errorf("Tree.Close: %v", err)
		}
		cs.Close()
	})
	as := func(ctx context.Context, uid uint32, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, bin, args...)
		c.Dir = "/"
		c.WaitDelay = 5 * time.Second
		if uid != 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}, AmbientCaps: []uintptr{capDACOverride}}
		}
		return c
	}

	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer hcancel()
	hoarder := as(hctx, nobodyUID, "hoard", dir, "20", "20", "50")
	stdin, err := hoarder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := hoarder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	hoarder.Stderr = &stderr
	if err := hoarder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		hoarder.Process.Kill()
		hoarder.Wait()
	}()
	var said strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(said.String(), "holding\n") {
		n, err := stdout.Read(buf)
		said.Write(buf[:n])
		if err != nil {
			t.Fatalf("the hoarder ended: %v; said:\n%s%s", err, said.String(), stderr.String())
		}
	}
	// user_events_data and 7 of user_events_status; the directory over
	// the 8; 5 registrations (the enablers).
	for _, want := range []string{"files 8 EMFILE", "dir EMFILE", "regs 5 ENOMEM", "failed 50"} {
		if !strings.Contains(said.String(), want+"\n") {
			t.Errorf("the hoarder said %q, want a line %q", said.String(), want)
		}
	}
	st := srv.Stats()
	// The file refers to hoard and 4 of the failed registrations' events:
	// 5, the uid's limit; the other 46 were refused it, and those 4 an
	// enabler (the uid holds 5), so each of the 50 was refused a limit.
	if u := st.ByUID[nobodyUID]; u.FUSEFiles != 8 || u.Regs != 5 || u.Refs != 5 || st.OverLimit != 3+50 {
		t.Errorf("stats while hoarded: %+v", st)
	}
	if n := len(s.Events()); n != 5 {
		t.Errorf("%d events exist while hoarded, want the 5 the hoarder's file refers to", n)
	}
	if text := string(st.AppendText(nil)); !strings.Contains(text, "fuse_files 8\n") || !strings.Contains(text, "uid 65534 connections 0 registrations 5 ") {
		t.Errorf("the stats text lacks the hoard:\n%s", text)
	}

	// Another user, and root, are served.
	for _, uid := range []uint32{otherUID, 0} {
		cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
		out, err := as(cctx, uid, "client", dir, "fuselimit_client").CombinedOutput()
		ccancel()
		if err != nil || string(out) != "ok\n" {
			t.Fatalf("the client of uid %d was not served: %q, %v", uid, out, err)
		}
	}

	// Killed, the hoarder lets go of its files (RELEASE) and its enablers
	// (its exit, through package callers).
	hoarder.Process.Kill()
	hoarder.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := srv.Stats()
		if len(st.ByUID) == 0 && st.FUSEFiles == 0 && st.Regs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not given back within 30 s after the hoarder was killed: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
