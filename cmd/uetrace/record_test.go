package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
)

// uetrace record -- CMD: the workload's status and signals, as perf record's.

// record -- CMD: CMD's exit status is uetrace's, as perf record's is.
func TestCLIRecordWorkloadStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	// An event to record: a recording that matches none fails.
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "ws_ev u32 a")
	testutil.Wait(t, "the event to be registered", func() bool { return strings.Contains(holdOut.String(), "holding") })
	dir := t.TempDir()
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 3", 3, 0},
		{"exit 0", 0, 0},
		{"kill -USR1 $$", -1, syscall.SIGUSR1},
	} {
		out := filepath.Join(dir, "w.data")
		cmd := exec.Command(testutil.Uetrace(t), "--backend", "daemon", "--socket", sock, "record", "-q", "-o", out, "--", "sh", "-c", tc.script)
		b, _ := cmd.CombinedOutput()
		if code, sig := exitOf(cmd.ProcessState); code != tc.code || sig != tc.sig {
			t.Errorf("record -- sh -c %q: exit %d signal %v, want %d %v\n%s", tc.script, code, sig, tc.code, tc.sig, b)
		}
		if _, err := exec.Command(testutil.Uetrace(t), "report", out).CombinedOutput(); err != nil {
			t.Errorf("report after sh -c %q: %v", tc.script, err)
		}
	}
}

// SIGINT to uetrace record -- CMD: CMD gets SIGTERM (perf's kill of the
// workload), uetrace stops at once with the workload's status — killed by
// SIGTERM, re-raised as perf's record__sig_exit does — and the file is
// complete.
func TestCLIRecordInterruptWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	dir := t.TempDir()
	out, pidFile := filepath.Join(dir, "i.data"), filepath.Join(dir, "pid")
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "rec_int u32 n")
	testutil.Wait(t, "the held registration", func() bool { return strings.Contains(holdOut.String(), "holding it") })

	rec, recOut := background(t, "--backend", "daemon", "--socket", sock, "record", "-q", "-e", "rec_int", "-o", out,
		"--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 1000")
	var pid int
	testutil.Wait(t, "the workload to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil && pid > 0
	})
	// emit writes only once the recording has enabled the event.
	testutil.Wait(t, "emit to write a record", func() bool {
		_, errs, code := cli(t, sock, "emit", "rec_int u32 n", "--field", "n=77")
		return code == 0 && !strings.Contains(errs, "not enabled")
	})

	sent := time.Now()
	rec.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { rec.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("record still running 30s after SIGINT (the workload was sleep 1000)\n%s", recOut.String())
	}
	t.Logf("record exited %v after SIGINT", time.Since(sent).Round(time.Millisecond))
	if code, sig := exitOf(rec.ProcessState); sig != syscall.SIGTERM {
		t.Errorf("record after SIGINT: exit %d signal %v, want killed by SIGTERM (the workload's)\n%s", code, sig, recOut.String())
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the workload (pid %d) is still there: %v", pid, err)
	}
	if !strings.Contains(recOut.String(), "[ uetrace record: 1 samples of 1 events in ") {
		t.Errorf("no summary of one sample:\n%s", recOut.String())
	}
	rep, err := exec.Command(testutil.Uetrace(t), "report", out).CombinedOutput()
	if err != nil || !strings.Contains(string(rep), "rec_int: n=") || !strings.Contains(string(rep), "77") {
		t.Errorf("report of the interrupted recording: %v\n%s", err, rep)
	}
}

// record -r N: the recording's threads run at SCHED_FIFO priority N, as
// perf record -r's do, and the workload with the normal policy; a priority
// out of range is refused before anything is recorded.
func TestCLIRecordRealtime(t *testing.T) {
	needRealtime(t)
	sock, _, _ := startServe(t)
	_, holdOut := background(t, "--backend", "daemon", "--socket", sock, "register", "--hold", "rt_ev u32 a")
	testutil.Wait(t, "the event to be registered", func() bool { return strings.Contains(holdOut.String(), "holding") })
	out := filepath.Join(t.TempDir(), "rt.data")
	// The workload says its own policy and its parent's threads'.
	script := `grep ^policy /proc/self/sched | tr -s ' ' | sed 's/^/self /'; for t in /proc/$PPID/task/*; do grep ^policy $t/sched | tr -s ' ' | sed 's/^/recorder /'; done`
	got := mustCLI(t, sock, "record", "-q", "-r", "7", "-e", "rt_ev", "-o", out, "--", "sh", "-c", script)
	recorder := 0
	for line := range strings.Lines(got) {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("workload said %q", got)
		}
		switch want := map[string]string{"self": "0", "recorder": "1"}[f[0]]; {
		case f[3] != want:
			t.Errorf("%s: policy %s, want %s (0 normal, 1 SCHED_FIFO)\n%s", f[0], f[3], want, got)
		case f[0] == "recorder":
			recorder++
		}
	}
	if recorder == 0 {
		t.Fatalf("no thread of the recorder seen:\n%s", got)
	}
	if _, errs, code := cli(t, sock, "record", "-q", "-r", "100", "-e", "rt_ev", "-o", out, "--duration", "1ms"); code == 0 || !strings.Contains(errs, "want 1 to 99") {
		t.Errorf("record -r 100: exit %d, %q; want a refusal that says the range", code, errs)
	}
}

// needRealtime skips a test of -r, which builds and runs the binary and
// needs what SCHED_FIFO needs.
func needRealtime(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("SCHED_FIFO needs root or CAP_SYS_NICE")
	}
}
