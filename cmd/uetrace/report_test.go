package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestReportStdin reports a pipe-mode stream (perf record -o -) from
// standard input and from the file: the same lines.
func TestReportStdin(t *testing.T) {
	const pipeFile = "../../perfdata/testdata/sched_switch_pipe.data"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fromFile, err := exec.CommandContext(ctx, binary(t), "report", pipeFile, "--format", "json").Output()
	if err != nil {
		t.Fatalf("report %s: %v", pipeFile, err)
	}
	in, err := os.Open(pipeFile)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, binary(t), "report", "-", "--format", "json")
	cmd.Stdin = in
	fromStdin, err := cmd.Output()
	if err != nil {
		t.Fatalf("report -: %v", err)
	}
	if n := bytes.Count(fromFile, []byte("\n")); n == 0 || !bytes.Equal(fromFile, fromStdin) {
		t.Errorf("report of the file (%d lines) and of stdin differ:\n%s\n---\n%s", n, fromFile, fromStdin)
	}
}

// TestReportWallTime: --time wall prints perf script's tod before the
// time, and refuses a file without clock data.
func TestReportWallTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), "report", "--time", "wall", "../../perfdata/testdata/sched_switch_pipe.data")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	// perf script -F comm,pid,tid,cpu,tod,time,event printed this.
	if want := "[000] 2026-11-25 17:57:03.293108  5806.460070: sched:sched_switch:"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	out, err = exec.CommandContext(ctx, binary(t), "report", "--time", "wall", "../../perfdata/testdata/sched_switch.data").CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("no clock data")) {
		t.Errorf("a file without clock data: %v\n%s", err, out)
	}
}
