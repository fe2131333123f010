package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

var update = flag.Bool("update", false, "rewrite the golden file from the kernel's answers")

const (
	casesFile  = "../../../internal/subsys/tracefilter/testdata/filter-cases.txt"
	goldenFile = "../../../internal/subsys/tracefilter/testdata/kernel-filters.json"
)

// TestGoldenMatchesKernel runs filtergolden in the reference kernel and
// checks that tracefilter/testdata/kernel-filters.json is what the kernel
// answers now; with -update it rewrites the file instead.
func TestGoldenMatchesKernel(t *testing.T) {
	vmtest.Require(t)
	res := vmtest.RunProgram(t, "./kernel/cmd/filtergolden", comm, vmtest.Options{Files: map[string]string{"filter-cases.txt": casesFile}}, "-cases", "filter-cases.txt")
	js, rest, err := vmtest.Section(res.Output, "FILTERGOLDEN-JSON")
	t.Logf("filtergolden in the VM (%v):\n%s", res.Elapsed.Round(time.Millisecond), rest)
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
	gotN, wantN := Normalise(js), Normalise(want)
	if !bytes.Equal(gotN, wantN) {
		t.Fatalf("%s is not what the kernel answers now (-golden +kernel; time stamps and pids masked):\n%s\n"+
			"If the change is expected, run: go test ./kernel/cmd/filtergolden -run TestGoldenMatchesKernel -update",
			filepath.Clean(goldenFile), cmp.Diff(string(wantN), string(gotN)))
	}
}

var (
	// error_log's "[    1.234567]" time stamps, Go-quoted in the JSON.
	logStamp = regexp.MustCompile(`\[ *\d+\.\d{6}\] `)
	pidLine  = regexp.MustCompile(`"pid": \d+,`)
	// The trace lines' prefix: comm-pid, CPU, flags, time stamp.
	traceLine = regexp.MustCompile(` *filtergolden-\d+ +\[(\d{3})\] (\S)\S(\S+) +\d+\.\d{6}: `)
)

// Normalise masks what differs between two boots: error_log's time stamps,
// and in the unfiltered trace the pid, the time stamps and the
// need-resched flag.
func Normalise(js []byte) []byte {
	js = logStamp.ReplaceAll(js, []byte("[TS] "))
	js = pidLine.ReplaceAll(js, []byte(`"pid": PID,`))
	return traceLine.ReplaceAll(js, []byte("filtergolden-PID [$1] $2?$3 TS: "))
}
