package vmtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun boots the kernel once and checks what a run promises: the
// command runs as root in /test with its files, its output comes back byte
// for byte (no CR inserted, binary intact), its exit status is returned, the
// environment is passed, and tracefs with user_events is mounted.
func TestRun(t *testing.T) {
	Require(t)
	dir := t.TempDir()
	data := []byte("line one\nline two\n\x00\x01\xff binary\r\n")
	if err := os.WriteFile(filepath.Join(dir, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `cat sub/data
echo "uid=$(id -u) pwd=$(pwd) greeting=$GREETING invm=$UETRACE_IN_VM"
test -e /sys/kernel/tracing/user_events_data && echo user_events
uname -r
exit 7
`
	if err := os.WriteFile(filepath.Join(dir, "script"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{
		Files: map[string]string{"sub/data": filepath.Join(dir, "data"), "script": filepath.Join(dir, "script")},
		Env:   []string{"GREETING=it's here"},
	}, "sh", "./script")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run took %v", res.Elapsed)
	if res.ExitCode != 7 {
		t.Errorf("exit code %d, want 7; output:\n%s", res.ExitCode, res.Output)
	}
	if !bytes.HasPrefix(res.Output, data) {
		t.Errorf("output does not start with the file's exact bytes:\n%q", res.Output)
	}
	rest := string(res.Output[len(data):])
	for _, want := range []string{"uid=0 pwd=/test", "greeting=it's here", "invm=1", "user_events\n", "6.12."} {
		if !strings.Contains(rest, want) {
			t.Errorf("output lacks %q:\n%s", want, rest)
		}
	}
}

func TestShellQuote(t *testing.T) {
	got := shellQuote([]string{"a b", "it's", ""})
	if want := `'a b' 'it'\''s' ''`; got != want {
		t.Errorf("shellQuote = %s, want %s", got, want)
	}
}
