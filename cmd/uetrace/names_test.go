package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// Issue 28, item 6: one producer's event of an empty name (" u32 a",
// which DIAG_IOCSREG accepts) blinded every tool that listed
// events/user_events: the listing fails there (on Linux too). The tools go
// by available_events, skip what they cannot name and say so.
func TestCLIUnnamableEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	sock, _, _ := startServe(t)
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, cmd := range []string{" u32 a", "ok_ev u32 a"} {
		if _, err := f.Register(cmd, 0); err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
	}
	skip := `skipping user_events:"": no tracefs path can name it`

	// status: the empty name's line in user_events_status is blank (on
	// Linux too), which is not the end of the list.
	if out, errs, code := cli(t, sock, "status"); code != 0 || !regexp.MustCompile(`(?m)^ok_ev +user_events +[0-9]+ `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^"" +\? +- `).MatchString(out) || !strings.Contains(out, "Active: 2") {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}

	out, errs, code := cli(t, sock, "enable", "user_events:*")
	if code != 0 || out != "enabled user_events:ok_ev\n" || !strings.Contains(errs, "uetrace enable: "+skip) {
		t.Errorf("enable 'user_events:*': exit %d\n%s%s", code, out, errs)
	}
	if got := mustCLI(t, sock, "cat", "events/user_events/ok_ev/enable"); got != "1\n" {
		t.Errorf("ok_ev's enable after enable 'user_events:*': %q", got)
	}
	mustCLI(t, sock, "disable", "ok_ev")
	if _, errs, code := cli(t, sock, "enable", "user_events:"); code != 1 || !strings.Contains(errs, "no event it can use matches: the 1 that match were skipped") {
		t.Errorf("enable 'user_events:' (the empty name alone): exit %d\n%s", code, errs)
	}

	// trace -e enables what it selects until interrupted.
	tr := exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "trace", "-e", "user_events:*")
	trOut := &testutil.Buffer{}
	tr.Stdout, tr.Stderr = trOut, trOut
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, "trace -e to enable ok_ev, or to fail", func() bool {
		if tr.ProcessState != nil {
			return true
		}
		out, _, _ := cli(t, sock, "cat", "events/user_events/ok_ev/enable")
		return out == "1\n" || strings.Contains(trOut.String(), "uetrace: ")
	})
	tr.Process.Signal(syscall.SIGINT)
	tr.Wait()
	if code, _ := exitOf(tr.ProcessState); code != 0 || !strings.Contains(trOut.String(), "uetrace trace -e: "+skip) {
		t.Errorf("trace -e 'user_events:*': exit %d\n%s", code, trOut)
	}

	// record: the usable event is recorded, the other skipped and said so.
	dir := t.TempDir()
	data := filepath.Join(dir, "ok.data")
	rec := exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-e", "user_events:*", "-o", data,
		"--", testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "emit", "ok_ev u32 a", "--field", "a=7")
	b, _ := rec.CombinedOutput()
	if code, _ := exitOf(rec.ProcessState); code != 0 || !strings.Contains(string(b), "1 samples of 1 events") || !strings.Contains(string(b), "uetrace record: "+skip) ||
		!strings.Contains(string(b), "warning: 1 events that match were skipped") {
		t.Errorf("record -e 'user_events:*' -- emit ok_ev: exit %d\n%s", code, b)
	}

	// Records of the event no path names cannot be decoded: said, and a
	// failure.
	rec = exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-e", "user_events:*", "-o", filepath.Join(dir, "empty.data"),
		"--", testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "emit", " u32 a", "--field", "a=7")
	b, _ = rec.CombinedOutput()
	if code, _ := exitOf(rec.ProcessState); code != 1 || !strings.Contains(string(b), "input/output error (EIO): 1 samples cannot be decoded") {
		t.Errorf("record -e 'user_events:*' -- emit ' u32 a': exit %d\n%s", code, b)
	}

	// A recording that matched nothing says so and fails.
	rec = exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-e", "atk_*", "-o", filepath.Join(dir, "none.data"), "--", "true")
	b, _ = rec.CombinedOutput()
	if code, _ := exitOf(rec.ProcessState); code != 1 || !strings.Contains(string(b), `record "atk_*": no such file or directory (ENOENT): nothing recorded: no event matched`) {
		t.Errorf("record -e 'atk_*' matching nothing: exit %d\n%s", code, b)
	}
}

// Issue 28, item 6: 320 events with 200-byte names, or 8 000 short ones,
// made events/user_events larger than a message: enable E2BIG, record
// nothing. Every one is listed, enabled and recorded now.
func TestCLIManyEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	testutil.NeedPerfmon(t, "it writes u: lines to dynamic_events")
	for _, tc := range []struct {
		n    int
		name func(i int) string
	}{
		{320, func(i int) string { return fmt.Sprintf("atk_v%03d_%s", i, strings.Repeat("x", 191)) }},
		{8000, func(i int) string { return fmt.Sprintf("atk_%d", i) }},
	} {
		sock, _, _ := startServe(t)
		c, err := client.Dial(sock, nil)
		if err != nil {
			t.Fatal(err)
		}
		dyn, err := c.Open("dynamic_events", unix.O_WRONLY|unix.O_APPEND)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.n {
			if _, err := dyn.Write([]byte("u:" + tc.name(i) + " u32 a")); err != nil {
				t.Fatal(err)
			}
		}
		dyn.Close()
		c.Close()
		out, errs, code := cli(t, sock, "enable", "atk_*")
		if n := strings.Count(out, "\nenabled "); code != 0 || n+1 != tc.n {
			t.Fatalf("%d events: enable 'atk_*': exit %d, %d enabled\n%s", tc.n, code, n+1, errs)
		}
		mustCLI(t, sock, "disable", "atk_*")
		rec := exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-e", "atk_*", "-o", filepath.Join(t.TempDir(), "many.data"), "--", "true")
		b, _ := rec.CombinedOutput()
		if code, _ := exitOf(rec.ProcessState); code != 0 || !strings.Contains(string(b), fmt.Sprintf("0 samples of %d events", tc.n)) {
			t.Errorf("%d events: record -e 'atk_*': exit %d\n%.2000s", tc.n, code, b)
		}
	}
}
