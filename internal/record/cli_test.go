package record_test

import (
	"bufio"
	"bytes"
	"encoding/json"
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

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchServeEnv); spec != "" {
		benchServe(spec)
		return
	}
	os.Exit(testutil.Run(m))
}

// `uetrace record` runs while this process writes known events; Ctrl-C
// (SIGINT) stops it and the file holds them; `uetrace report --format
// json` shows exactly those values.
func TestRecordCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "cli", "u32 i; __rel_loc char[] s")
		backend := backendArgs(tg)
		data := filepath.Join(t.TempDir(), "cli.data")
		rec := startRecording(t, bin, append(backend, "record", "-e", name, "-o", data)...)
		if !ev.Enabled() {
			t.Fatal("recording, but the event is not enabled")
		}
		const n = 100
		for i := range n {
			s := fmt.Sprintf("value %d", i)
			payload := append(le32(uint32(i)), le32(uint32(len(s)+1)<<16)...)
			payload = append(append(payload, s...), 0)
			if err := ev.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond) // past the kernel's 100 ms poll
		summary := rec.stop(t)
		if !strings.Contains(summary, fmt.Sprintf("[ uetrace record: %d samples of 1 events", n)) ||
			!strings.Contains(summary, "user_events:"+name) {
			t.Errorf("summary:\n%s", summary)
		}

		out, err := exec.Command(bin, "report", data, "--format", "json").Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("report has %d lines, want %d:\n%s", len(lines), n, out)
		}
		for i, line := range lines {
			var s jsonSample
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("line %d %q: %v", i, line, err)
			}
			want := map[string]any{"i": float64(i), "s": fmt.Sprintf("value %d", i)}
			if s.Name != name || fmt.Sprint(s.Fields) != fmt.Sprint(want) {
				t.Fatalf("line %d: %s %v, want %s %v", i, s.Name, s.Fields, name, want)
			}
		}
		text, err := exec.Command(bin, "report", data).Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		if !strings.Contains(string(text), fmt.Sprintf("user_events:%s: i=7 s=value 7\n", name)) {
			t.Errorf("text report:\n%s", text)
		}
	})
}

// recording is a `uetrace record` process.
type recording struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	copied chan struct{}
}

// startRecording starts `uetrace args...` and returns once it says it is
// recording.
func startRecording(t *testing.T, bin string, args ...string) *recording {
	t.Helper()
	rec := &recording{cmd: exec.Command(bin, args...), copied: make(chan struct{})}
	pipe, err := rec.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The kernel sets the bit when the first CPU's perf event opens;
	// "recording" is said once every CPU's is enabled.
	attached := make(chan struct{})
	go func() {
		defer close(rec.copied)
		sc := bufio.NewScanner(pipe)
		said := false
		for sc.Scan() {
			rec.stderr.Write(append(sc.Bytes(), '\n'))
			if !said && strings.HasPrefix(sc.Text(), "uetrace record: recording ") {
				said = true
				close(attached)
			}
		}
	}()
	select {
	case <-attached:
	case <-time.After(waitLimit):
		rec.cmd.Process.Kill()
		<-rec.copied
		t.Fatalf("uetrace record did not say it was recording in %v:\n%s", waitLimit, rec.stderr.String())
	}
	return rec
}

// stop stops the recording as Ctrl-C does and returns what it printed.
func (rec *recording) stop(t *testing.T) string {
	t.Helper()
	rec.cmd.Process.Signal(syscall.SIGINT)
	<-rec.copied
	if err := rec.cmd.Wait(); err != nil {
		t.Fatalf("uetrace record: %v\n%s", err, rec.stderr.String())
	}
	return rec.stderr.String()
}

// A task that writes and exits before the recording could look it up in
// /proc is still named in the report: on the kernel by perf's COMM record
// of its exec, on the daemon by the session's record of the writer's name.
// The recording is stopped (SIGSTOP) while the task runs and is reaped.
func TestRecordShortLivedTask(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, _ := openEvent(t, tg, "short", "u32 i")
		command := name + " u32 i"
		backend := backendArgs(tg)
		data := filepath.Join(t.TempDir(), "short.data")
		rec := startRecording(t, bin, append(backend, "record", "-e", name, "-o", data)...)
		rec.cmd.Process.Signal(syscall.SIGSTOP)
		emit := exec.Command(bin, append(backend, "emit", command, "--field", "i=7")...)
		out, err := emit.CombinedOutput()
		rec.cmd.Process.Signal(syscall.SIGCONT)
		if err != nil {
			rec.stop(t)
			t.Fatalf("uetrace emit: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond) // past the kernel's 100 ms poll
		rec.stop(t)
		out, err = exec.Command(bin, "report", data, "--format", "json").Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		var s jsonSample
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("report %q: %v", out, err)
		}
		if s.Name != name || s.Fields["i"] != float64(7) || s.Comm != filepath.Base(bin)[:min(15, len(filepath.Base(bin)))] {
			t.Errorf("report: %s", out)
		}
	})
}

func le32(x uint32) []byte { return []byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)} }
