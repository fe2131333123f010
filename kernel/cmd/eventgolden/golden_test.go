package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
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
	casesFile  = "../../../eventdef/testdata/kernel-cases.txt"
	goldenFile = "../../../eventdef/testdata/kernel-golden.json"
)

// TestGoldenMatchesKernel runs eventgolden in the reference kernel and checks
// that eventdef/testdata/kernel-golden.json is what the kernel answers now;
// with -update it rewrites the file instead.
func TestGoldenMatchesKernel(t *testing.T) {
	vmtest.Require(t)
	res := vmtest.RunProgram(t, "./kernel/cmd/eventgolden", "eventgolden", vmtest.Options{Files: map[string]string{"kernel-cases.txt": casesFile}}, "-cases", "kernel-cases.txt")
	js, rest, err := vmtest.Section(res.Output, "EVENTGOLDEN-JSON")
	t.Logf("eventgolden in the VM (%v):\n%s", res.Elapsed.Round(time.Millisecond), rest)
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
	gotN, wantN := normalise(js), normalise(want)
	if bytes.Equal(gotN, wantN) {
		return
	}
	// Show where: field by field if both decode, else line by line.
	var diff string
	gotG, err1 := decodeGolden(gotN)
	wantG, err2 := decodeGolden(wantN)
	if err1 == nil && err2 == nil {
		diff = cmp.Diff(wantG, gotG)
	}
	if diff == "" {
		diff = cmp.Diff(string(wantN), string(gotN))
	}
	t.Fatalf("%s is not what the kernel answers now (-golden +kernel; pids, time stamps and need-resched flags masked):\n%s\n"+
		"If the change is expected, run: go test ./kernel/cmd/eventgolden -run TestGoldenMatchesKernel -update",
		filepath.Clean(goldenFile), diff)
}

func decodeGolden(b []byte) (*golden, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var g golden
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	return &g, nil
}

// normalise masks in eventgolden's JSON what differs between two boots of
// the same kernel with the same input, all in the prefix of trace lines:
//   - the pid of the writes (47 or 48 so far, as the kernel's own threads
//     happen to start) and the time stamps, with the padding that depends
//     on their widths;
//   - the need-resched flag (the second of the five flags, "." or "N"): it
//     says whether a timer tick had asked for a reschedule when the record
//     was written, which depends on timing (one or two lines of the ~900
//     differ from boot to boot).
//
// The rest of the prefix (the CPU and the other flags), the rest of the
// lines and every other byte of the file are compared as they are.
//
// It works on the JSON text, not on decoded values, so that the comparison
// stays byte for byte: a trace line starts a "trace" string or follows a
// \n escape in it, and "trace_hex" holds the same bytes in hex.
func normalise(js []byte) []byte {
	js = traceLine.ReplaceAll(js, traceMask)
	return traceHex.ReplaceAllFunc(js, func(m []byte) []byte {
		h := traceHex.FindSubmatch(m)[1]
		b, err := hex.DecodeString(string(h))
		if err != nil {
			return m
		}
		b = traceLine.ReplaceAll(b, traceMask)
		return []byte(`"trace_hex": "` + hex.EncodeToString(b) + `"`)
	})
}

var (
	// traceLine is the prefix of a trace line of eventgolden's writes,
	// "     eventgolden-47      [000] .....     2.320144: ", at the start
	// of a string, after a \n escape in the JSON or after a newline in
	// trace_hex's bytes; traceMask is what it becomes.
	traceLine = regexp.MustCompile(`(^|"|\\n|\n) *eventgolden-\d+ +\[(\d{3})\] (\S)\S(\S+) +\d+\.\d{6}: `)
	traceMask = []byte(`${1}eventgolden-PID [$2] ${3}?$4 TS: `)
	traceHex  = regexp.MustCompile(`"trace_hex": "([0-9a-f]*)"`)
)
