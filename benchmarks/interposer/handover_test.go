package interposer

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestHandOverSameRecording: a C program under `uetrace run` — ringbench's
// record mode, whose event only `uetrace record` consumes — publishes into
// the interposer's ring set, which the daemon hands to the recording's
// reader (uetrace status: handovers_now), so that no daemon goroutine
// touches its records; what the recording holds is, after Normalize, byte
// for byte what the same program gives through FUSE alone (--no-preload:
// each write the daemon's answer, as the kernel's write path gives it),
// each record delivered or counted dropped by the interposer.
func TestHandOverSameRecording(t *testing.T) {
	uetrace := vmtest.Uetrace(t)
	if preload.Library == nil {
		t.Skip("no interposer for this architecture: run writes through FUSE alone")
	}
	tmp := t.TempDir()
	if err := Build(tmp, ""); err != nil {
		t.Skip(err)
	}
	d := &daemon{uetrace: uetrace, sock: vmtest.Serve(t, uetrace, tmp), data: filepath.Join(tmp, "perf.data")}
	// 20 000 records at 20 000 a second: FUSE alone keeps up, and a
	// reader that takes over a ring a quarter full at a time drops none
	// unless it stalls for a third of a second.
	const n = 20000
	with := d.recordRun(t, filepath.Join(tmp, "ringbench"), true, n, 20000)
	without := d.recordRun(t, filepath.Join(tmp, "ringbench"), false, n, 20000)
	if with.handed == 0 {
		t.Errorf("with the interposer: no ring set was handed to the recording (uetrace status: handovers %d)", with.handed)
	}
	if without.handed != 0 || without.dropped != 0 {
		t.Errorf("with --no-preload: %d hand-overs, %d dropped; want none", without.handed, without.dropped)
	}
	a, b := Normalize(with.report), Normalize(without.report)
	if want := 1000 + n; records(b) != want {
		t.Fatalf("through FUSE: %d records in the recording, want %d", records(b), want)
	}
	// Every record is in the recording or counted dropped.
	if got := records(a) + with.dropped; got != records(b) {
		t.Errorf("with the interposer: %d records recorded and %d dropped, want %d written", records(a), with.dropped, records(b))
	}
	if with.dropped == 0 {
		if diff := firstDifference(a, b); diff != "" {
			t.Errorf("the recording differs with the interposer and without (normalized): %s", diff)
		}
	} else if !subsequence(a, b) {
		// Dropped records aside, the same bytes in the same order.
		t.Errorf("with the interposer, %d records dropped, the others are not the FUSE recording's", with.dropped)
	}
	t.Logf("%d records, %d dropped; handed over %d times; the last, normalized: %s; uetrace record said: %s",
		records(a), with.dropped, with.handed, bytes.TrimSpace(a[bytes.LastIndexByte(bytes.TrimSpace(a), '\n')+1:]), with.summary)
}

// subsequence says whether the lines of a are, in order, among b's.
func subsequence(a, b []byte) bool {
	lb := bytes.SplitAfter(b, []byte("\n"))
	j := 0
	for _, l := range bytes.SplitAfter(a, []byte("\n")) {
		for j < len(lb) && !bytes.Equal(lb[j], l) {
			j++
		}
		if j == len(lb) {
			return false
		}
		j++
	}
	return true
}

// recorded is what one recordRun gave.
type recorded struct {
	report  []byte // uetrace report's text of the recording
	summary string // uetrace record's own words
	handed  int    // hand-overs the daemon made meanwhile
	dropped int    // records the interposer's rings had no room for
	values  map[string]float64
}

// recordRun records user_events:* while ringbench (prog) writes n records
// at rate a second under `uetrace run`, with the interposer or without.
// With it, the records are written once the daemon has handed the
// program's ring set to the recording.
func (d *daemon) recordRun(t *testing.T, prog string, interposer bool, n int, rate float64) recorded {
	t.Helper()
	handed0 := d.stat(t, "handovers")
	os.Remove(d.data)
	rec := exec.Command(d.uetrace, "--socket", d.sock, "record", "-e", "user_events:*", "-o", d.data)
	var recErr bytes.Buffer
	rec.Stderr = &recErr
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	defer rec.Process.Kill() // a no-op once it has been waited for
	args := []string{"--socket", d.sock, "run"}
	if !interposer {
		args = append(args, "--no-preload")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.uetrace, append(args, "--", prog, "/sys/kernel/tracing", "record", strconv.Itoa(n), strconv.FormatFloat(rate, 'f', -1, 64))...)
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// It says "ready" once the recording enabled its event and its share
	// is set up.
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("ringbench: %q, %v\n%s\nuetrace record: %s", line, err, stderr.Bytes(), recErr.Bytes())
	}
	if interposer {
		for deadline := time.Now().Add(time.Minute); d.stat(t, "handovers_now") == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the program's ring set was not handed to the recording within a minute")
			}
		}
	}
	stdin.Write([]byte("go\n"))
	var rest bytes.Buffer
	rest.ReadFrom(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("uetrace %s: %v\n%s%s", strings.Join(args, " "), err, rest.Bytes(), stderr.Bytes())
	}
	_, v, err := Parse(rest.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	rec.Process.Signal(os.Interrupt)
	if err := rec.Wait(); err != nil {
		t.Fatalf("uetrace record: %v\n%s", err, recErr.Bytes())
	}
	report, err := exec.Command(d.uetrace, "report", "-i", d.data).Output()
	if err != nil {
		t.Fatalf("uetrace report: %v", err)
	}
	return recorded{report: report, summary: strings.TrimSpace(recErr.String()), handed: d.stat(t, "handovers") - handed0,
		dropped: int(v["dropped"]), values: v}
}

// stat is one count of uetrace status's daemon section.
func (d *daemon) stat(t *testing.T, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(d.run(t, "status"))
	if m == nil {
		t.Fatalf("no %s in uetrace status", name)
	}
	k, _ := strconv.Atoi(string(m[1]))
	return k
}
