package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestShellScenarios runs the scenarios a shell can — echo, cat, ls and test
// on the tracefs files — in bash under uetrace run, where
// /sys/kernel/tracing is uetrace's FUSE tree, and compares them with what
// the kernel answered (conformance/kernel.results): dynamic_events, enable
// files, user_events_status, format and trace, byte for byte.
func TestShellScenarios(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	uetrace := vmtest.Uetrace(t)
	scenarios, err := Load("../scenarios")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(kernelGolden)
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := ParseResults(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var out bytes.Buffer
	ran, err := RunShell(ctx, func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, uetrace, "run", "--private", "--", bash, "--norc", "--noprofile")
	}, scenarios, &out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseResults(&out)
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for _, name := range got.Names {
		want, ok := kernel.Text[name]
		switch {
		case !ok:
			t.Errorf("%s: no kernel result", name)
		case got.Text[name] != want:
			t.Errorf("%s: through a shell on uetrace's tree:\n%s\non the kernel:\n%s", name, got.Text[name], want)
		default:
			same++
		}
	}
	if ran < 40 {
		t.Errorf("only %d scenarios are shell scenarios; the corpus had over 40", ran)
	}
	t.Logf("%d/%d shell scenarios identical to the kernel's", same, ran)
}
