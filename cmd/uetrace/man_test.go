package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update", false, "rewrite docs/man from the commands")

const manDir = "../../docs/man/man1"

// TestManPages checks that docs/man/man1 holds the page of every command, as
// the commands define them today (go test ./cmd/uetrace -run TestManPages
// -update writes them), and no other; and that man(1) reads them.
func TestManPages(t *testing.T) {
	pages := manPages(newRootCmd())
	if *updateMan {
		os.RemoveAll(manDir)
		if err := os.MkdirAll(manDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, page := range pages {
			if err := os.WriteFile(filepath.Join(manDir, name), page, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(manDir, "*.1"))
	var have []string
	for _, f := range files {
		have = append(have, filepath.Base(f))
	}
	var want []string
	for name := range pages {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Fatalf("docs/man/man1 holds %q, the commands make %q: go test ./cmd/uetrace -run TestManPages -update", have, want)
	}
	for _, name := range want {
		got, _ := os.ReadFile(filepath.Join(manDir, name))
		if !bytes.Equal(got, pages[name]) {
			t.Errorf("docs/man/man1/%s is not what the command defines: go test ./cmd/uetrace -run TestManPages -update", name)
		}
	}
	for _, must := range []string{"uetrace.1", "uetrace-record.1", "uetrace-serve.1", "uetrace-completion-bash.1"} {
		if pages[must] == nil {
			t.Errorf("no page %s", must)
		}
	}

	// man(1) finds and formats them: what a user reads with
	// man -M docs/man uetrace-record, or once installed.
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("no man(1)")
	}
	cmd := exec.Command("man", "-M", filepath.Dir(manDir), "uetrace-record")
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MAN_KEEP_FORMATTING=0", "PAGER=cat", "MANPAGER=cat")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("man -M docs/man uetrace-record: %v\n%s", err, out)
	}
	// Bold and underline are overstrikes ("N\bN") where the output is no
	// terminal.
	text := regexp.MustCompile(".\b").ReplaceAllString(string(out), "")
	for _, want := range []string{"NAME", "uetrace-record - Record events", "SYNOPSIS", "OPTIONS", "-e, --event", "EXAMPLES",
		"uetrace record -e 'myapp_*' --duration 10s", "SEE ALSO"} {
		if !strings.Contains(text, want) {
			t.Errorf("man uetrace-record shows no %q", want)
		}
	}
	if t.Failed() {
		t.Logf("man uetrace-record:\n%s", text)
	}
}
