package interposer

import (
	"bytes"
	"os/exec"
	"path/filepath"
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
	d, prog := ringbenchDaemon(t)
	// 20 000 records at 20 000 a second: FUSE alone keeps up, and a
	// reader that takes over a ring a quarter full at a time drops none
	// unless it stalls for a third of a second.
	const n = 20000
	with := recordRound(t, d.uetrace, d.sock, prog, d.data, nil, n, 20000, time.Minute)
	withReport := d.report(t)
	without := recordRound(t, d.uetrace, d.sock, prog, d.data, []string{"--no-preload"}, n, 20000, 0)
	withDropped, withoutDropped := int(with.values["dropped"]), int(without.values["dropped"])
	if with.handed == 0 {
		t.Errorf("with the interposer: no ring set was handed to the recording")
	}
	if l := with.values["wakes_lost"]; l != 0 {
		t.Errorf("with the interposer: %v wake-ups went through FUSE: the library's eventfd check (kcmp) failed", l)
	}
	if without.handed != 0 || withoutDropped != 0 {
		t.Errorf("with --no-preload: %d hand-overs, %d dropped; want none", without.handed, withoutDropped)
	}
	a, b := Normalize(withReport), Normalize(d.report(t))
	if want := 1000 + n; records(b) != want || without.samples != want {
		t.Fatalf("through FUSE: %d records in the recording (%d samples), want %d", records(b), without.samples, want)
	}
	// Every record is in the recording or counted dropped.
	if got := records(a) + withDropped; got != records(b) || with.samples != records(a) {
		t.Errorf("with the interposer: %d records recorded (%d samples) and %d dropped, want %d written", records(a), with.samples, withDropped, records(b))
	}
	if withDropped == 0 {
		if diff := firstDifference(a, b); diff != "" {
			t.Errorf("the recording differs with the interposer and without (normalized): %s", diff)
		}
	} else if !subsequence(a, b) {
		// Dropped records aside, the same bytes in the same order.
		t.Errorf("with the interposer, %d records dropped, the others are not the FUSE recording's", withDropped)
	}
	t.Logf("%d records, %d dropped; handed over %d times; the last, normalized: %s; uetrace record said: %s",
		records(a), withDropped, with.handed, bytes.TrimSpace(a[bytes.LastIndexByte(bytes.TrimSpace(a), '\n')+1:]), with.summary)
}

// ringbenchDaemon is a daemon of uetrace built from this tree, serving in
// a directory of the test's with ringbench built there (its path, prog),
// and the recording's file: what the hand-over tests run ringbench
// against. It skips without the interposer, root, FUSE or gcc.
func ringbenchDaemon(t *testing.T) (d *daemon, prog string) {
	t.Helper()
	uetrace := vmtest.Uetrace(t)
	if preload.Library == nil {
		t.Skip("no interposer for this architecture: run writes through FUSE alone")
	}
	tmp := t.TempDir()
	if err := Build(tmp, ""); err != nil {
		t.Skip(err)
	}
	d = &daemon{uetrace: uetrace, sock: vmtest.Serve(t, uetrace, tmp), data: filepath.Join(tmp, "perf.data")}
	return d, filepath.Join(tmp, "ringbench")
}

// report is uetrace report's text of the recording.
func (d *daemon) report(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command(d.uetrace, "report", "-i", d.data).Output()
	if err != nil {
		t.Fatalf("uetrace report: %v", err)
	}
	return out
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

// TestHandOverForked: a C program that forks under `uetrace run` —
// ringbench's record mode with fork: the child shares the parent's open
// user_events_data and sets up a ring set of its own — has both sets
// handed to the recording, one hand-over each, not one of them alone;
// every record of both processes is in the recording or counted dropped
// by the interposer.
func TestHandOverForked(t *testing.T) {
	d, prog := ringbenchDaemon(t)
	const n = 20000
	r := recordRound(t, d.uetrace, d.sock, prog, d.data, nil, n, 20000, time.Minute, "fork")
	dropped := int(r.values["dropped"])
	if got := int(r.values["writes"]); got != 2*n {
		t.Fatalf("ringbench wrote %d records, want %d", got, 2*n)
	}
	// Each process's warm-up is recorded too.
	if want := 2 * (1000 + n); r.samples+dropped != want {
		t.Errorf("%d records recorded and %d dropped, want %d written", r.samples, dropped, want)
	}
	if r.handed < 2 {
		t.Errorf("%d hand-overs: the second process's set stayed with the daemon's drainers", r.handed)
	}
	pids := map[string]bool{}
	for line := range bytes.Lines(d.report(t)) {
		if m := reportContext.FindSubmatch(line); m != nil {
			pids[string(m[2])] = true
		}
	}
	if len(pids) != 2 {
		t.Errorf("records of %d processes in the recording, want 2: %v", len(pids), pids)
	}
	t.Logf("%d records, %d dropped, %d hand-overs; uetrace record said: %s", r.samples, dropped, r.handed, r.summary)
}
