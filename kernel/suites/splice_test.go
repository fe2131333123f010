package suites_test

import (
	"regexp"
	"testing"
)

// TestSpliceSignalOnKernel runs, on the 6.12 kernel, the program that
// cmd/uetrace's TestRunSpliceSignal runs under uetrace run, whose guard
// splices trace_pipe_raw for it: a splice(2) of per_cpu/cpu0/trace_pipe_raw
// that waits for a record takes a signal (Go's handler, SA_RESTART) and
// goes on, then returns 0 when a record comes on the page the writer is
// still on; with that record in the buffer, a splice returns 0 at once
// (buffer_percent 0: something to read, no page to take); a signal for
// the process is taken too; and splices under a
// signal every 100 µs take pages with no failure, every byte they put in
// the pipe in their counts. The guard's answers (ERESTARTSYS, which the
// kernel turns into a restart of an SA_RESTART handler's call) were
// written from the kernel's source (ring_buffer_wait waits
// interruptibly): this is the kernel saying the same.
func TestSpliceSignalOnKernel(t *testing.T) {
	out := cmdHelper(t, "splice-signal", "./uetrace.test", "-test.run=^TestHelperSpliceSignal$", "-test.v")
	m := regexp.MustCompile(`(?s)helper: signal taken while a splice waited: (\w+); the splice: (-?\d+) (\S+)\n` +
		`helper: a splice with a record and no page to take: 0 ok\n` +
		`helper: process signal taken while a splice waited: (\w+); the splice: (-?\d+ \S+)\n.*helper: (\d+) splices took (\d+) pages; failed (.*); bytes in the pipe beyond the splices' counts: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the helper did not say what its splices did:\n%s", out)
	}
	if m[1] != "true" || m[2] != "0" || m[3] != "ok" {
		t.Errorf("a waiting splice: signal taken %s, then %s bytes (%s); TestRunSpliceSignal wants the signal taken and 0 bytes (ok) once the record comes\n%s", m[1], m[2], m[3], out)
	}
	if m[4] != "true" || (m[5] != "0 ok" && m[5] != "-1 EINTR") {
		t.Errorf("a waiting splice: a signal for the process taken %s, then %s; TestRunSpliceSignal wants it taken, then 0 bytes, or EINTR\n%s", m[4], m[5], out)
	}
	if m[9] != "0" || m[6] == "0" || m[7] == "0" || m[8] != "map[]" {
		t.Errorf("%s splices under signals took %s pages, failed %s, and left %s bytes in the pipe they did not count; TestRunSpliceSignal wants pages, no failure and nothing left\n%s", m[6], m[7], m[8], m[9], out)
	}
	t.Log(m[0])
}
