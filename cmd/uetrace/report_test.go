package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// TestReportStdin reports a pipe-mode stream (perf record -o -) from
// standard input and from the file: the same lines.
func TestReportStdin(t *testing.T) {
	const pipeFile = "../../perfdata/testdata/sched_switch_pipe.data"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fromFile, err := exec.CommandContext(ctx, testutil.Uetrace(t), "report", pipeFile, "--format", "json").Output()
	if err != nil {
		t.Fatalf("report %s: %v", pipeFile, err)
	}
	in, err := os.Open(pipeFile)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, testutil.Uetrace(t), "report", "-", "--format", "json")
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
	cmd := exec.CommandContext(ctx, testutil.Uetrace(t), "report", "--time", "wall", "../../perfdata/testdata/sched_switch_pipe.data")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	// perf script -F comm,pid,tid,cpu,tod,time,event printed this.
	if want := "[000] 2026-11-25 17:57:03.293108  5806.460070: sched:sched_switch:"; !bytes.Contains(out, []byte(want)) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	out, err = exec.CommandContext(ctx, testutil.Uetrace(t), "report", "--time", "wall", "../../perfdata/testdata/sched_switch.data").CombinedOutput()
	// The words name uetrace's own way to record the clock data: a
	// newcomer who recorded with uetrace record was told only perf's.
	if err == nil || !bytes.Contains(out, []byte("no clock data")) || !bytes.Contains(out, []byte("uetrace record -k CLOCK_MONOTONIC")) {
		t.Errorf("a file without clock data: %v\n%s", err, out)
	}
}

// TestExportNoClockDataNote: export of a file without clock data says its
// times went out as perf's and how uetrace itself records the clock data —
// a newcomer who recorded with uetrace record, as the README does, was
// told only of perf record -k. Nothing listens on port 1: every event is
// dropped at once, and counted.
func TestExportNoClockDataNote(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, testutil.Uetrace(t), "export", "-i", "../../perfdata/testdata/sched_switch.data",
		"--endpoint", "http://127.0.0.1:1", "--shutdown-timeout", "100ms").CombinedOutput()
	want := "note: the file has no clock data (uetrace record -k CLOCK_MONOTONIC writes it, as perf record -k does): times were sent as linux.perf_time"
	if err == nil || !bytes.Contains(out, []byte(want)) {
		t.Errorf("export of a file without clock data: %v, want exit status 1 and %q in:\n%s", err, want, out)
	}
}

// TestReportEventHeaderThroughDaemon: a producer writes an EventHeader
// event through the daemon, uetrace record captures it, uetrace report
// --format json shows its name, every field and its metadata. Two more
// events, an ActivityStart never stopped and an ActivityStop of an
// activity never started, are each reported on stderr with --format
// perfetto.
func TestReportEventHeaderThroughDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	sock, _, _ := startServe(t)
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tp := eventheader.TracepointName{Provider: "MyApp", Level: eventheader.LevelInformation, Keyword: 1}
	ev, err := f.Register(tp.Command(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()

	out := filepath.Join(t.TempDir(), "eh.data")
	rec, recOut := background(t, "--backend", "daemon", "--socket", sock, "record", "-q", "-e", tp.String(), "-o", out)
	testutil.Wait(t, "the recording to enable "+tp.String(), ev.Enabled)

	var b eventheader.Builder
	b.Reset("Request", eventheader.Header{Level: eventheader.LevelInformation})
	b.AddUint32("status", 200, eventheader.FormatDefault, 0)
	b.AddString("path", "/index.html", eventheader.FormatDefault, 0)
	b.AddUint32("err", 2, eventheader.FormatErrno, 0)
	b.StructField("peer", 2, 0)
	b.AddIPv4("addr", [4]byte{10, 0, 0, 1}, 0)
	b.AddPort("port", 443, 0)
	payload, err := b.AppendEvent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Write(payload); err != nil {
		t.Fatal(err)
	}
	b.Reset("Job", eventheader.Header{Level: eventheader.LevelInformation, Opcode: eventheader.OpcodeActivityStart})
	if payload, err = b.AppendEvent(payload[:0]); err != nil {
		t.Fatal(err)
	}
	if err := ev.Write(payload); err != nil {
		t.Fatal(err)
	}
	b.Reset("Req", eventheader.Header{Level: eventheader.LevelInformation, Opcode: eventheader.OpcodeActivityStop})
	b.SetActivityID(&[16]byte{1}, nil)
	if payload, err = b.AppendEvent(payload[:0]); err != nil {
		t.Fatal(err)
	}
	if err := ev.Write(payload); err != nil {
		t.Fatal(err)
	}
	rec.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { rec.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		rec.Process.Kill()
		t.Fatalf("record still running a minute after SIGINT\n%s", recOut.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, err := exec.CommandContext(ctx, testutil.Uetrace(t), "report", "--format", "json", out).CombinedOutput()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, js)
	}
	const want = `"system":"user_events","name":"MyApp_L4K1","fields":{"status":200,"path":"/index.html","err":"ENOENT(2)","peer":{"addr":"10.0.0.1","port":443}},"event":"MyApp:Request","meta":{"level":4,"keyword":"0x1"}}`
	if !bytes.Contains(js, []byte(want)) {
		t.Errorf("report --format json:\n%s\nwant a line with\n%s\nrecord said:\n%s", js, want, recOut.String())
	}

	var stderr bytes.Buffer
	pf := exec.CommandContext(ctx, testutil.Uetrace(t), "report", "--format", "perfetto", "-o", filepath.Join(t.TempDir(), "eh.pftrace"), out)
	pf.Stderr = &stderr
	if err := pf.Run(); err != nil {
		t.Fatalf("report --format perfetto: %v\n%s", err, stderr.Bytes())
	}
	for _, w := range []string{
		"warning: 1 EventHeader ActivityStop events in " + out + " have no open ActivityStart to end",
		"warning: 1 EventHeader ActivityStart events in " + out + " are never stopped",
	} {
		if !bytes.Contains(stderr.Bytes(), []byte(w)) {
			t.Errorf("report --format perfetto: no %q on stderr:\n%s", w, stderr.Bytes())
		}
	}
}
