package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

var update = flag.Bool("update", false, "rewrite the golden file from the kernel's answers")

const goldenFile = "../../../internal/subsys/testdata/kernel-tracefs-files.json"

// TestGoldenMatchesKernel runs the capture in the reference kernel and
// checks that internal/subsys/testdata/kernel-tracefs-files.json is what
// the kernel answers now; with -update it rewrites the file instead.
func TestGoldenMatchesKernel(t *testing.T) {
	vmtest.Require(t)
	res := vmtest.RunProgram(t, "./kernel/cmd/tracefsgolden", comm, vmtest.Options{})
	js, rest, err := vmtest.Section(res.Output, "TFCAPTURE-JSON")
	t.Logf("capture in the VM (%v):\n%s", res.Elapsed.Round(time.Millisecond), rest)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenFile, js, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Clean(goldenFile), len(js))
		return
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, want) {
		t.Fatalf("%s is not what the kernel answers now (-golden +kernel):\n%s\n"+
			"If the change is expected, run: go test ./kernel/cmd/tracefsgolden -run TestGoldenMatchesKernel -update",
			filepath.Clean(goldenFile), cmp.Diff(string(want), string(js)))
	}
}
