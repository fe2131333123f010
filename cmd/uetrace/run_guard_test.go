package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/perfdata"
)

// helperEnv makes this test binary, started under uetrace run, the program
// TestHelperOpenTreeID describes.
const helperEnv = "UETRACE_TEST_HELPER"

// TestHelperOpenTreeID is not a test of its own: TestRunPerfEventOpenOfTreeID
// runs it under uetrace run, where it does what Microsoft's perf-collect
// does to collect a user event: create it, read its id from tracefs, open
// that id as a PERF_TYPE_TRACEPOINT. It prints the descriptor's file.
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
	file := "none"
	if err == nil {
		file, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		unix.Close(fd)
	}
	fmt.Printf("helper: id %d: perf_event_open: %v, file %s\n", id, errnoName(err), file)
}

func errnoName(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(unix.Errno); ok {
		if name := unix.ErrnoName(e); name != "" {
			return name
		}
		return "errno " + strconv.Itoa(int(e)) // one no program should see, such as ERESTARTSYS
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
// the tree gets uetrace's event of that id — a file of the tree — never a
// host tracepoint that happens to have the id (1024 was
// syscalls:sys_exit_sync), and the id is one no kernel hands out.
func TestRunPerfEventOpenOfTreeID(t *testing.T) {
	testutil.NeedRoot(t, "FUSE passthrough, which the events' rings need, needs CAP_SYS_ADMIN")
	out, m := runHelper(t, "open-tree-id", "TestHelperOpenTreeID", `helper: id (\d+): perf_event_open: (\S+), file (\S+)`)
	if id, _ := strconv.Atoi(m[1]); id < 16384 || m[2] != "ok" || !strings.HasPrefix(m[3], "/sys/kernel/tracing/.uetrace-perf/") {
		t.Errorf("the tree's id %s opened with %s, file %s: want an id above any a kernel hands out, opened as a file of the tree\n%s", m[1], m[2], m[3], out)
	}
}

// TestRunPerfEvents runs testdata/perfevents.c under uetrace run: one of
// the tree's events opened with perf_event_open(2) counts, reads, maps,
// polls, filters and loses records as Linux's do, answers wrong and
// hostile arguments with Linux's errno, leaves the kernel's own perf events
// alone, and takes its enable bit with it at close.
func TestRunPerfEvents(t *testing.T) {
	needFUSE(t)
	testutil.NeedRoot(t, "FUSE passthrough, which the events' rings need, needs CAP_SYS_ADMIN")
	bin := testutil.BuildC(t, "", "testdata/perfevents.c", "-O1", "-Wall")
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", bin)
	if code != 0 || !strings.Contains(out, "\nPASSED\n") {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	// What uetrace cannot do is said, once each.
	for _, want := range []string{
		"uetrace run: perf_event_open of user_events:my_ev (tracepoint id ",
		") refused (EOPNOTSUPP): uetrace cannot give sample_type CALLCHAIN (uetrace fills IP|TID|TIME|ADDR|ID|CPU|PERIOD|STREAM_ID|RAW|IDENTIFIER); record them with uetrace record\n",
		"uetrace run: mmap of a perf event's ring refused (EPERM): mmap of 268435456 data bytes: more than the 67108864 uetrace gives a ring\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run did not say %q:\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}

// TestRunLinuxPerf runs Linux's perf on a user event inside uetrace run,
// on a private tree and on a daemon's: perf record takes every write into
// perf.data — the samples' process, thread and raw payload as written —
// and perf stat counts them, and the command keeps its tree.
func TestRunLinuxPerf(t *testing.T) {
	needFUSE(t)
	testutil.NeedRoot(t, "FUSE passthrough, which the events' rings need, needs CAP_SYS_ADMIN")
	perf := testutil.NeedPerf(t)
	writer := testutil.BuildC(t, "", "testdata/perfwriter.c", "-O1", "-Wall")
	t.Run("private", func(t *testing.T) { linuxPerf(t, perf, writer, "run", "--private") })
	t.Run("daemon", func(t *testing.T) {
		sock, _, _ := startServe(t)
		linuxPerf(t, perf, writer, "--socket", sock, "run")
	})
}

func linuxPerf(t *testing.T, perf, writer string, run ...string) {
	data := t.TempDir() + "/perf.data"
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, append(run, "--", "sh", "-c", `echo 'u:my_ev u32 n' >> /sys/kernel/tracing/dynamic_events
`+perf+` record -e user_events:my_ev -o `+data+` -- `+writer+` 7 2>&1; echo "perf record: $?"
`+perf+` stat -x, -e user_events:my_ev -- `+writer+` 9 2>&1; echo "perf stat: $?"
grep -c '^my_ev' /sys/kernel/tracing/user_events_status
awk '$5 == "/sys/kernel/tracing" {top = $(NF-2)} END {print "fstype:", top}' /proc/self/mountinfo`)...)
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, out)
	}
	t.Logf("%s", out)
	if !strings.Contains(out, "perf record: 0\n") || !strings.Contains(out, "perf stat: 0\n") {
		t.Fatalf("perf failed:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^9,,user_events:my_ev,`).MatchString(out) {
		t.Errorf("perf stat did not count the 9 writes:\n%s", out)
	}
	if !strings.Contains(out, "\nfstype: fuse.uetrace\n") {
		t.Errorf("after perf, the tree is not the command's any more:\n%s", out)
	}
	pid := regexp.MustCompile(`writer (\d+) wrote 7 of 7`).FindStringSubmatch(out)
	if pid == nil {
		t.Fatalf("the writer under perf record did not write 7 records:\n%s", out)
	}
	r, err := perfdata.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// In time order: perf record writes each CPU's ring in turn, so a
	// writer that moved to another CPU has its samples out of order in
	// the file (n=1…6, then n=0 from the first CPU's ring, seen under load).
	type sample struct {
		time uint64
		text string
	}
	var samples []sample
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type != perfdata.RecordSample {
			continue
		}
		s := rec.Sample
		n := binary.NativeEndian.Uint32(s.Raw[8:])
		samples = append(samples, sample{s.Time, fmt.Sprintf("%d/%d n=%d", s.PID, s.TID, n)})
	}
	slices.SortStableFunc(samples, func(a, b sample) int { return cmp.Compare(a.time, b.time) })
	var got []string
	for _, s := range samples {
		got = append(got, s.text)
	}
	var want []string
	for i := range 7 {
		want = append(want, fmt.Sprintf("%s/%s n=%d", pid[1], pid[1], i))
	}
	if !slices.Equal(got, want) {
		t.Errorf("perf.data's samples:\n%q\nwant\n%q", got, want)
	}
	// perf script reads the file outside the tree: the event's format
	// travels in the file's tracing data, which perf record read from the
	// tree's events/user_events/my_ev/format, and names each field.
	script, err := exec.Command(perf, "script", "-i", data, "-F", "trace:pid,event,trace").Output()
	if err != nil {
		t.Fatalf("perf script: %v\n%s", err, script)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(script)), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	want = want[:0]
	for i := range 7 {
		want = append(want, fmt.Sprintf("%s user_events:my_ev: n=%d", pid[1], i))
	}
	if !slices.Equal(lines, want) {
		t.Errorf("perf script printed:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
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
