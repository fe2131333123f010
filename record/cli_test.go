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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/vmtest"
	"github.com/uetrace/uetrace/userevents"
)

// uetraceBinary is the uetrace command: $UETRACE_BIN (the VM test passes
// the one it built), else built once for this test binary.
func uetraceBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("UETRACE_BIN"); p != "" {
		return p
	}
	if vmtest.InVM() {
		t.Skip("no UETRACE_BIN in the VM")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "uetrace-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "uetrace")
		buildErr = vmtest.Build("./cmd/uetrace", builtBin)
	})
	if buildErr != nil {
		t.Fatalf("build uetrace: %v", buildErr)
	}
	return builtBin
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchServeEnv); spec != "" {
		benchServe(spec)
		return
	}
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}

// `uetrace record` runs while this process writes known events; Ctrl-C
// (SIGINT) stops it and the file holds them; `uetrace report --format
// json` shows exactly those values.
func TestRecordCommand(t *testing.T) {
	bin := uetraceBinary(t)
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		name := uniq("cli")
		ev, err := f.Register(name+" u32 i; __rel_loc char[] s", 0)
		if err != nil {
			t.Fatal(err)
		}
		backend := []string{"--backend", tg.opts.Backend.String()}
		if tg.opts.Socket != "" {
			backend = append(backend, "--socket", tg.opts.Socket)
		}
		dir := t.TempDir()
		data := filepath.Join(dir, "cli.data")
		var stderr bytes.Buffer
		rec := exec.Command(bin, append(backend, "record", "-e", name, "-o", data)...)
		pipe, err := rec.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := rec.Start(); err != nil {
			t.Fatal(err)
		}
		// The kernel sets the bit when the first CPU's perf event opens;
		// "recording" is said once every CPU's is enabled.
		attached := make(chan struct{})
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			sc := bufio.NewScanner(pipe)
			said := false
			for sc.Scan() {
				stderr.Write(append(sc.Bytes(), '\n'))
				if !said && strings.HasPrefix(sc.Text(), "uetrace record: recording ") {
					said = true
					close(attached)
				}
			}
		}()
		select {
		case <-attached:
		case <-time.After(10 * time.Second):
			rec.Process.Kill()
			<-copied
			t.Fatalf("uetrace record did not say it was recording in 10 s:\n%s", stderr.String())
		}
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
		rec.Process.Signal(syscall.SIGINT)
		<-copied
		if err := rec.Wait(); err != nil {
			t.Fatalf("uetrace record: %v\n%s", err, stderr.String())
		}
		summary := stderr.String()
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

func le32(x uint32) []byte { return []byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)} }
