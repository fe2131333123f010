package harness

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestFUSEWhereTheDaemonCannot runs, on the fuse backend, every scenario
// known-differences.txt lists for the daemon or in-process but not for
// fuse — open modes, pwrite positions, unmapped names and payloads,
// read-only enable memory — and requires each to be what the kernel
// answered (conformance/kernel.results): what the daemon's protocol cannot
// say, the kernel ABI through FUSE does.
func TestFUSEWhereTheDaemonCannot(t *testing.T) {
	if err := Unavailable("fuse"); err != nil {
		t.Skip(err)
	}
	if vmtest.InVM() {
		t.Skip("uetrace run is for this machine")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	known, err := LoadKnown(knownPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, by := range known {
		_, fuse := by["fuse"]
		if !fuse && (by["daemon"] != "" || by["daemon-ring"] != "" || by["inprocess"] != "") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		t.Fatal("known-differences.txt lists nothing for the daemon or in-process")
	}
	data, err := os.ReadFile(kernelGolden)
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := ParseResults(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	bin, uetrace := filepath.Join(tmp, "ueconform"), filepath.Join(tmp, "uetrace")
	if err := vmtest.Build("github.com/uetrace/uetrace/conformance/cmd/ueconform", bin); err != nil {
		t.Fatal(err)
	}
	if err := vmtest.Build("github.com/uetrace/uetrace/cmd/uetrace", uetrace); err != nil {
		t.Fatal(err)
	}
	args := []string{"-backend", "fuse", "-uetrace", uetrace}
	for _, n := range names {
		args = append(args, filepath.Join(corpus, n+".scn"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	killGroup(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ueconform -backend fuse: %v\n%s", err, stderr.String())
	}
	got, err := ParseResults(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		want, ok := kernel.Text[n]
		if !ok {
			t.Errorf("%s: not in kernel.results", n)
			continue
		}
		if got.Text[n] != want {
			t.Errorf("%s: through FUSE (+) not as the kernel (-):\n%s", n,
				cmp.Diff(strings.Split(want, "\n"), strings.Split(got.Text[n], "\n")))
		}
	}
	t.Logf("%d scenarios the daemon or in-process cannot express, all as the kernel through FUSE: %s", len(names), strings.Join(names, " "))
}
