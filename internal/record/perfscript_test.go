package record_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// perf script — Linux's own tool — decodes what uetrace record wrote: the
// event names from HEADER_EVENT_DESC, the fields by name from the format
// files in the tracing data, the task names from the COMM records.
func TestPerfScriptReadsRecording(t *testing.T) {
	perf := testutil.NeedPerf(t)
	tg := targets(t)[0] // the daemon: this machine need not have user_events
	f, name, ev := openEvent(t, tg, "ps", "u32 count; s64 delta; char[8] tag; __rel_loc char[] msg")
	multi, err := f.Register(name+"_m u16 code", userevents.MultiFormat)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "perf.data")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	rec := tg.start(t, out, record.Options{Events: []string{name + "*"}, Cmdline: []string{"uetrace", "record"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	waitEnabled(t, ev, waitLimit)
	var enc eventdef.Encoder
	for i := range 3 {
		err := ev.Encode(&enc, nil, func(e *eventdef.Encoder) {
			e.Uint(uint64(i + 1))
			e.Int(-int64(i) * 1_000_000_000_000)
			e.String(fmt.Sprintf("tag%d", i))
			e.String(fmt.Sprintf("hello perf %d", i))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := multi.Write([]byte{0x34, 0x12}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(perf, "script", "-i", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perf script: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("perf script complained:\n%s", stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("perf script printed %d lines, want 4:\n%s", len(lines), stdout.String())
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	for i := range 3 {
		want := fmt.Sprintf("user_events:%s: count=%d delta=%d tag=tag%d msg=hello perf %d", name, i+1, -int64(i)*1_000_000_000_000, i, i)
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("perf script line %d:\n%s\nwant it to end in\n%s", i, lines[i], want)
		}
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), strings.TrimSpace(string(comm))+" ") {
			t.Errorf("perf script line %d does not start with the task name %q:\n%s", i, comm, lines[i])
		}
	}
	if want := fmt.Sprintf("user_events_multi:%s_m.0: code=4660", name); !strings.HasSuffix(lines[3], want) {
		t.Errorf("perf script line 3:\n%s\nwant it to end in\n%s", lines[3], want)
	}
	t.Logf("perf script:\n%s", stdout.String())
}
