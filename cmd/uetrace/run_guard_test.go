package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
)

// helperEnv makes this test binary, started under uetrace run, the program
// TestHelperOpenTreeID describes.
const helperEnv = "UETRACE_TEST_HELPER"

// TestHelperOpenTreeID is not a test of its own: TestRunPerfEventOpenOfTreeID
// runs it under uetrace run, where it does what Microsoft's perf-collect
// does to collect a user event: create it, read its id from tracefs, open
// that id as a PERF_TYPE_TRACEPOINT.
func TestHelperOpenTreeID(t *testing.T) {
	if os.Getenv(helperEnv) != "open-tree-id" {
		t.Skip("run under uetrace run by TestRunPerfEventOpenOfTreeID")
	}
	const tracefs = "/sys/kernel/tracing/"
	if err := os.WriteFile(tracefs+"dynamic_events", []byte("u:my_ev u32 n"), 0); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tracefs + "events/user_events/my_ev/id")
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config:      id,
		Sample_type: unix.PERF_SAMPLE_RAW | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME,
		Sample:      1,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	fmt.Printf("helper: id %d: perf_event_open: %v\n", id, errnoName(err))
}

func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

// runHelper runs this test binary's helper test under uetrace run --private,
// with helperEnv set to what, and returns the output and the submatches of
// the line pattern matches, which the helper must have printed.
func runHelper(t *testing.T, what, helper, pattern string) (string, []string) {
	t.Helper()
	needFUSE(t)
	t.Setenv(helperEnv, what)
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", os.Args[0], "-test.run=^"+helper+"$")
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the helper %s printed no line like %q:\n%s", helper, pattern, out)
	}
	return out, m
}

// TestRunPerfEventOpenOfTreeID: a collector that opens the id it read from
// the tree gets EOPNOTSUPP and run's words naming uetrace record, never a
// host tracepoint that happens to have the id (1024 was
// syscalls:sys_exit_sync); the id is one no kernel hands out.
func TestRunPerfEventOpenOfTreeID(t *testing.T) {
	out, m := runHelper(t, "open-tree-id", "TestHelperOpenTreeID", `helper: id (\d+): perf_event_open: (\S+)`)
	if id, _ := strconv.Atoi(m[1]); id < 32768 || m[2] != unix.ErrnoName(unix.EOPNOTSUPP) {
		t.Errorf("the tree's id %s opened with %s: want an id above any a kernel hands out, refused with EOPNOTSUPP\n%s", m[1], m[2], out)
	}
	want := "uetrace run: perf_event_open of user_events:my_ev (tracepoint id " + m[1] + ") refused (EOPNOTSUPP): the kernel's perf events know none of uetrace's events; record them with uetrace record"
	if !strings.Contains(out, want) {
		t.Errorf("run did not say %q:\n%s", want, out)
	}
}

// TestRunLinuxPerfRecord runs Linux's perf record on a user event inside
// uetrace run. Where the host has no tracefs at /sys/kernel/tracing, perf
// finds none in /proc/mounts (the tree is fuse.uetrace) and tries to mount
// one over the tree; where the host has one (under the tree), perf takes
// the tree's files and opens the event's id. Either way it must fail with
// run's words naming uetrace record, and the command must keep its tree:
// the mount on top at /sys/kernel/tracing is still the tree.
func TestRunLinuxPerfRecord(t *testing.T) {
	needFUSE(t)
	perf := testutil.NeedPerf(t)
	data := t.TempDir() + "/perf.data"
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c", `echo 'u:my_ev u32 n' >> /sys/kernel/tracing/dynamic_events
`+perf+` record -e user_events:my_ev -o `+data+` -- true >/dev/null 2>&1; echo "perf: $?"
grep -c '^my_ev' /sys/kernel/tracing/user_events_status
awk '$5 == "/sys/kernel/tracing" {top = $(NF-2)} END {print "fstype:", top}' /proc/self/mountinfo`)
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	if strings.Contains(out, "perf: 0\n") {
		t.Errorf("perf record succeeded: it recorded something else than user_events:my_ev\n%s", out)
	}
	refused := strings.Contains(out, "uetrace run: mount of tracefs on /sys/kernel/tracing refused (EPERM)") ||
		strings.Contains(out, "uetrace run: perf_event_open of user_events:my_ev")
	if !refused || !strings.Contains(out, "uetrace record") {
		t.Errorf("run did not say what it refused and what to use:\n%s", out)
	}
	if !strings.Contains(out, "\n1\nfstype: fuse.uetrace\n") {
		t.Errorf("after perf, the tree is not the command's any more:\n%s", out)
	}
}

// TestHelperSendfileTree is not a test of its own: TestRunSendfileFromTree
// runs it under uetrace run, where it copies user_events_status with
// sendfile(2), as busybox's cat and Python's shutil.copyfile do, and
// compares the copy with what read(2) gives.
func TestHelperSendfileTree(t *testing.T) {
	if os.Getenv(helperEnv) != "sendfile-tree" {
		t.Skip("run under uetrace run by TestRunSendfileFromTree")
	}
	const status = "/sys/kernel/tracing/user_events_status"
	if err := os.WriteFile("/sys/kernel/tracing/dynamic_events", []byte("u:my_ev u32 n"), 0); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(status)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.CreateTemp("", "sendfile")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	n, err := unix.Sendfile(int(out.Fd()), int(in.Fd()), nil, 1<<20)
	got, _ := os.ReadFile(out.Name())
	fmt.Printf("helper: read %d bytes; sendfile: %d %s; same: %v\n", len(want), n, errnoName(err), bytes.Equal(got, want))
}

// TestRunSendfileFromTree: sendfile(2) and splice(2) from a file of the
// tree either copy what read(2) gives or fail, never copy nothing and
// succeed. Linux's FUSE splices a FOPEN_DIRECT_IO file through the page
// cache up to the file's size since 6.5 (2cb1e08985e3), and tracefs files
// have size 0, so busybox's cat printed nothing under uetrace run.
func TestRunSendfileFromTree(t *testing.T) {
	out, m := runHelper(t, "sendfile-tree", "TestHelperSendfileTree", `helper: read (\d+) bytes; sendfile: (-?\d+) (\S+); same: (\w+)`)
	if m[1] == "0" {
		t.Fatalf("user_events_status read empty:\n%s", out)
	}
	switch {
	case m[3] == "ok" && m[4] == "true": // a kernel whose FUSE splices by read
	case m[3] == unix.ErrnoName(unix.EINVAL): // the guard's answer: read it
	default:
		t.Errorf("sendfile of user_events_status (%s bytes) copied %s bytes (%s), a copy equal to read's: %s; want the bytes or EINVAL\n%s", m[1], m[2], m[3], m[4], out)
	}
}

// TestRunBusyboxCat: busybox's cat, which copies by sendfile(2) and reads
// when that fails, prints the tree's files as cat(1) does.
func TestRunBusyboxCat(t *testing.T) {
	needFUSE(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox (Debian's busybox-static)")
	}
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c", `echo 'u:my_ev u32 n' >> /sys/kernel/tracing/dynamic_events
echo "busybox:"; `+busybox+` cat /sys/kernel/tracing/user_events_status
echo "read:"; while IFS= read -r line; do echo "$line"; done < /sys/kernel/tracing/user_events_status`)
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	bb, rd, ok := strings.Cut(strings.TrimPrefix(out, "busybox:\n"), "read:\n")
	if !ok || !strings.Contains(rd, "my_ev") || bb != rd {
		t.Errorf("busybox cat printed\n%q\nwhile read gives\n%q", bb, rd)
	}
}
