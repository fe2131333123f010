package main

import (
	"context"
	bin "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/fusefs"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/perfdata"
)

// traceCmd is Debian's trace-cmd, which these tests run unmodified.
func traceCmd(t *testing.T) string {
	t.Helper()
	tc, err := exec.LookPath("trace-cmd")
	if err != nil {
		t.Skip("no trace-cmd (Debian's trace-cmd package; .ci/run installs it)")
	}
	return tc
}

// The helper's events: what a program of the machine writes.
const (
	tcHello = "tc_hello u32 n; char[8] tag"
	tcOther = "tc_other u32 m"
)

// TestHelperTraceCmdWrites is not a test of its own: TestTraceCmd runs it
// under uetrace run (as trace-cmd record's command, and alone), where it
// writes $UETRACE_TEST_RECORDS records of tc_hello (n=1.., tag "p<n>"),
// and one of tc_other (m=n) after every tenth, through
// /sys/kernel/tracing/user_events_data — while each is enabled, as a
// program of the kernel's user_events does. As trace-cmd record's command
// ($UETRACE_TEST_RECORDER set), it first waits for the recorders.
func TestHelperTraceCmdWrites(t *testing.T) {
	if os.Getenv(helperEnv) != "tracecmd-writes" {
		t.Skip("run under uetrace run by TestTraceCmd")
	}
	if os.Getenv("UETRACE_TEST_RECORDER") != "" {
		waitRecorders(t)
	}
	n, err := strconv.Atoi(os.Getenv("UETRACE_TEST_RECORDS"))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open("/sys/kernel/tracing/user_events_data", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var enabled [2]uint32
	var index [2]uint32
	for i, cmd := range []string{tcHello, tcOther} {
		r := abi.UserReg{Size: abi.UserRegSize, EnableBit: 0, EnableSize: 4, EnableAddr: uint64(uintptr(unsafe.Pointer(&enabled[i])))}
		if err := abi.RegisterName(fd, &r, cmd); err != nil {
			t.Fatalf("register %q: %v", cmd, err)
		}
		index[i] = r.WriteIndex
	}
	written := [2]int{}
	for i := 1; i <= n; i++ {
		if atomic.LoadUint32(&enabled[0]) != 0 {
			rec := bin.NativeEndian.AppendUint32(nil, index[0])
			rec = bin.NativeEndian.AppendUint32(rec, uint32(i))
			var tag [8]byte
			copy(tag[:7], fmt.Sprintf("p%d", i))
			if _, err := unix.Write(fd, append(rec, tag[:]...)); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			written[0]++
		}
		if i%10 == 0 && atomic.LoadUint32(&enabled[1]) != 0 {
			rec := bin.NativeEndian.AppendUint32(bin.NativeEndian.AppendUint32(nil, index[1]), uint32(i))
			if _, err := unix.Write(fd, rec); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
			written[1]++
		}
	}
	runtime.KeepAlive(&enabled)
	fmt.Printf("writer: %d tc_hello, %d tc_other\n", written[0], written[1])
}

// recorderCalls are the system calls a trace-cmd recorder waits in for its
// CPU's trace_pipe_raw: select(2) (pselect6 in the kernel on some
// architectures), or splice(2) and read(2) themselves.
var recorderCalls = map[int]bool{unix.SYS_PSELECT6: true, unix.SYS_SPLICE: true, unix.SYS_READ: true}

// waitRecorders returns once trace-cmd record's recorders — a process for
// each CPU of the tree, holding its per_cpu/cpuN/trace_pipe_raw — all wait
// for it in a system call. trace-cmd tells a recorder to stop with a
// signal, and one told before it got there records nothing: a recorder
// still opening its files (which takes FUSE round trips here) when a
// command that writes for a few milliseconds ends. That is trace-cmd
// 3.1.6's own race; a test must not depend on winning it.
func waitRecorders(t *testing.T) {
	cpus, err := os.ReadDir("/sys/kernel/tracing/per_cpu")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, "trace-cmd's recorders to wait for each CPU's trace_pipe_raw", func() bool {
		waiting := map[string]bool{}
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
			for _, fd := range fds {
				target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
				if !strings.HasPrefix(target, "/sys/kernel/tracing/per_cpu/") || filepath.Base(target) != "trace_pipe_raw" {
					continue
				}
				if sc, err := procfs.ReadSyscall(pid); err == nil && recorderCalls[sc.Nr] {
					waiting[target] = true
				}
			}
		}
		return len(waiting) == len(cpus)
	})
}

// runLong runs uetrace with args and env, with the test's deadline, and
// returns its combined output and exit status.
func runLong(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-30*time.Second))
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Uetrace(t), args...)
	cmd.Env = append(append(os.Environ(), "UETRACE_SOCKET="), env...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("uetrace %s: %v\n%s", strings.Join(args, " "), ctx.Err(), out)
	}
	if cmd.ProcessState == nil {
		t.Fatalf("uetrace %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// A reportLine is an event of trace-cmd report or of the trace file: its
// name and fields, as "name=value" with the value as printed.
type reportLine struct {
	event  string
	fields []string
}

var (
	// trace-cmd report: "    comm-pid   [cpu]  secs.usecs: event:   fields".
	reportRE = regexp.MustCompile(`(?m)^\s*\S+-\d+\s+\[\d+\]\s+\d+\.\d+: (tc_\w+):\s+(.*)$`)
	// The trace file: "    comm-pid   [cpu] flags  secs.usecs: event: fields".
	traceRE = regexp.MustCompile(`(?m)^\s*\S+-\d+\s+\[\d+\] \S+\s+\d+\.\d+: (tc_\w+): (.*)$`)
	// A number the trace file prints as 0x1 (1): its value is the decimal.
	traceNum = regexp.MustCompile(`=0x[0-9a-f]+ \((-?\d+)\)`)
	lostRE   = regexp.MustCompile(`(?i)\[(?:LOST )?(\d+) EVENTS(?: DROPPED)?\]`)
)

func parseEvents(re *regexp.Regexp, text string) []reportLine {
	var out []reportLine
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		fields := strings.Fields(traceNum.ReplaceAllString(m[2], "=$1"))
		out = append(out, reportLine{m[1], fields})
	}
	return out
}

// lost sums what trace-cmd report says was lost.
func lost(text string) int {
	n := 0
	for _, m := range lostRE.FindAllStringSubmatch(text, -1) {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// TestTraceCmd runs Debian's trace-cmd, unmodified, under uetrace run on a
// daemon's events: it finds the tree as libtracefs finds tracefs (the
// guard answers its mount), records through per_cpu/cpuN/trace_pipe_raw
// by splice (the guard splices for it), with a 16 KiB buffer that the
// writer fills many times over, and with the default one for one event;
// trace-cmd report prints the records with the fields and values uetrace
// trace shows for the same writes; trace-cmd show prints the trace file as
// uetrace trace does; trace-cmd stat describes the tree.
func TestTraceCmd(t *testing.T) {
	needFUSE(t)
	tc := traceCmd(t)
	sock, _, _ := startServe(t)
	dir := t.TempDir()
	const (
		many = 3000 // tc_hello records through a 16 KiB buffer: about 18 pages of them
		few  = 300
	)
	helper := fmt.Sprintf(`%s -test.run='^TestHelperTraceCmdWrites$'`, os.Args[0])
	script := fmt.Sprintf(`set -e
T=/sys/kernel/tracing D=%[1]s TC=%[2]s
echo 'u:%[3]s' >> $T/dynamic_events
echo 'u:%[4]s' >> $T/dynamic_events
UETRACE_TEST_RECORDER=1 UETRACE_TEST_RECORDS=%[5]d $TC record -q -b 16 -o $D/all.dat -e user_events %[7]s > $D/all.out 2>&1
UETRACE_TEST_RECORDER=1 UETRACE_TEST_RECORDS=%[6]d $TC record -q -o $D/one.dat -e user_events:tc_hello %[7]s > $D/one.out 2>&1
$TC report -i $D/all.dat > $D/all.txt 2>&1
$TC report -i $D/one.dat > $D/one.txt 2>&1
$TC dump --head-page -i $D/one.dat > $D/head.txt 2>&1
$TC start -e user_events:tc_hello > $D/start.out 2>&1
UETRACE_TEST_RECORDS=%[6]d %[7]s > $D/show-writes.out 2>&1
$TC show > $D/show.txt
uetrace trace > $D/trace.txt
$TC stat > $D/stat.txt
$TC reset > $D/reset.out 2>&1
`, dir, tc, tcHello, tcOther, many, few, helper)
	env := []string{helperEnv + "=tracecmd-writes", "PATH=" + filepath.Dir(testutil.Uetrace(t)) + ":" + os.Getenv("PATH")}
	out, code := runLong(t, env, "--socket", sock, "run", "--", "sh", "-c", script)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v\nrun said:\n%s", name, err, out)
		}
		return string(b)
	}
	if code != 0 {
		t.Fatalf("uetrace run: exit %d\n%s\nall.out:\n%s\none.out:\n%s", code, out, read("all.out"), read("one.out"))
	}
	// Nothing the guard refused but debugfs, which trace-cmd mounts when
	// /proc/mounts lists none (for its KVM guests): refusing it changes
	// nothing. Nothing it spliced was lost.
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" && !strings.Contains(line, "mount of debugfs on /sys/kernel/debug refused") {
			t.Errorf("uetrace run said: %s", line)
		}
	}

	// Everything written is in the report, or counted as lost.
	all := read("all.txt")
	events := parseEvents(reportRE, all)
	var hello, other int
	last := 0
	for _, e := range events {
		switch e.event {
		case "tc_hello":
			hello++
			var n int
			if len(e.fields) != 2 || !strings.HasPrefix(e.fields[0], "n=") {
				t.Fatalf("report line %v", e)
			}
			n, _ = strconv.Atoi(strings.TrimPrefix(e.fields[0], "n="))
			if n <= last || e.fields[1] != "tag=p"+strconv.Itoa(n) {
				t.Errorf("report: tc_hello %v after n=%d", e.fields, last)
			}
			last = n
		case "tc_other":
			other++
		}
	}
	dropped := lost(all)
	t.Logf("trace-cmd record -b 16 -e user_events: %d tc_hello and %d tc_other records of %d and %d, %d lost", hello, other, many, many/10, dropped)
	if hello+other+dropped != many+many/10 || hello == 0 || other == 0 {
		t.Errorf("trace-cmd report of -e user_events: %d tc_hello + %d tc_other + %d lost, want %d written:\n%s", hello, other, dropped, many+many/10, read("all.out"))
	}

	// One event, a buffer that holds it all: each record, in order, with
	// the fields and values uetrace trace shows of the same writes.
	one := parseEvents(reportRE, read("one.txt"))
	traced := parseEvents(traceRE, read("trace.txt"))
	if len(one) != few || len(traced) != few {
		t.Fatalf("trace-cmd report of -e user_events:tc_hello has %d records, uetrace trace %d; want %d each\n%s", len(one), len(traced), few, read("one.out"))
	}
	for i := range one {
		want := reportLine{"tc_hello", []string{"n=" + strconv.Itoa(i+1), "tag=p" + strconv.Itoa(i+1)}}
		if one[i].event != want.event || !slices.Equal(one[i].fields, want.fields) || traced[i].event != want.event || !slices.Equal(traced[i].fields, want.fields) {
			t.Fatalf("record %d: trace-cmd report %v, uetrace trace %v; want %v", i, one[i], traced[i], want)
		}
	}
	// trace-cmd show prints the trace file, which uetrace trace prints.
	if show, trace := read("show.txt"), read("trace.txt"); show != trace {
		t.Errorf("trace-cmd show:\n%s\nuetrace trace:\n%s", show, trace)
	}
	stat := read("stat.txt")
	for _, want := range []string{"Events:\n Individual events:\n    user_events\n        tc_hello\n", "Tracing is enabled"} {
		if !strings.Contains(stat, want) {
			t.Errorf("trace-cmd stat has no %q:\n%s", want, stat)
		}
	}
	// The trace.dat's header_page is the tree's, the kernel's.
	if head := read("head.txt"); !strings.Contains(head, perfdata.HeaderPage) {
		t.Errorf("trace-cmd dump --head-page:\n%s\nwant the kernel's:\n%s", head, perfdata.HeaderPage)
	}
	if s := mustCLI(t, sock, "status"); !strings.Contains(s, "tc_hello") {
		t.Errorf("the daemon has no tc_hello:\n%s", s)
	}
}

// treeEvent makes event "name u32 n; char[8] pad" in the tree of a
// helper under uetrace run, enabled in the trace buffer after the tracefs
// writes given (file, text), and registers it through user_events_data:
// the descriptor and the registration, whose write index a record of 20
// bytes (24 in the buffer, 170 to a page) starts with.
func treeEvent(t *testing.T, name string, settings ...[2]string) (int, abi.UserReg) {
	t.Helper()
	const T = "/sys/kernel/tracing/"
	for _, w := range append([][2]string{{"dynamic_events", "u:" + name + " u32 n; char[8] pad"}, {"events/user_events/" + name + "/enable", "1"}}, settings...) {
		if err := os.WriteFile(T+w[0], []byte(w[1]), 0); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(T+"user_events_data", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The enable word lives as long as the helper: it never unregisters.
	enabled := new(uint32)
	r := abi.UserReg{Size: abi.UserRegSize, EnableSize: 4, EnableAddr: uint64(uintptr(unsafe.Pointer(enabled)))}
	if err := abi.RegisterName(fd, &r, name+" u32 n; char[8] pad"); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, enabled)
	return fd, r
}

// rawAndPipe opens the tree's per_cpu/cpu0/trace_pipe_raw and a pipe to
// splice it into, as trace-cmd's recorder does.
func rawAndPipe(t *testing.T) (raw int, p [2]int) {
	t.Helper()
	raw, err := unix.Open("/sys/kernel/tracing/per_cpu/cpu0/trace_pipe_raw", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	return raw, p
}

// keep holds the helpers' enable words, which the tree writes until they
// exit.
var keep []*uint32

// TestHelperSpliceRaw is not a test of its own: TestRunSpliceRaw runs it
// under uetrace run --private, where it fills CPU 0's buffer of an event
// (records of 20 bytes, in events of 24: 170 to a page) and splices
// per_cpu/cpu0/trace_pipe_raw into a pipe as trace-cmd record does, timing
// it against read(2) of the same pages and against splice of a regular
// file (the guard's round trip alone).
func TestHelperSpliceRaw(t *testing.T) {
	if os.Getenv(helperEnv) != "splice-raw" {
		t.Skip("run under uetrace run by TestRunSpliceRaw")
	}
	runtime.LockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		t.Fatal(err)
	}
	fd, r := treeEvent(t, "sp")
	fill := func(pages int) {
		rec := bin.NativeEndian.AppendUint32(nil, r.WriteIndex)
		rec = append(rec, make([]byte, 12)...)
		for i := range pages*170 + 1 { // and one on the next page, which the writer is then on
			bin.NativeEndian.PutUint32(rec[4:], uint32(i))
			if _, err := unix.Write(fd, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw, p := rawAndPipe(t)
	drain := make([]byte, 1<<17)
	const pages = 128
	// splice, as trace-cmd's recorder does: 64 KiB at a time into its
	// pipe, which it empties.
	fill(pages)
	start, spliced, calls, commits := time.Now(), 0, 0, 0
	for {
		n, err := unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		calls++
		if err != nil {
			fmt.Printf("helper: splice at the end: %s\n", errnoName(err))
			break
		}
		for got := 0; got < int(n); {
			k, err := unix.Read(p[0], drain[got:n])
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
		for off := 0; off+16 <= int(n); off += 4096 {
			if bin.LittleEndian.Uint64(drain[off+8:])&(1<<27-1) == 4080 {
				commits++
			}
		}
		spliced += int(n)
	}
	spliceTime := time.Since(start)
	fmt.Printf("helper: spliced %d bytes (%d full pages) in %d calls\n", spliced, commits, calls)
	// read(2) of the same pages, one a call, as trace-cmd --nosplice.
	unix.FcntlInt(uintptr(raw), unix.F_SETFL, unix.O_NONBLOCK)
	for { // what the splices left: the writer's page
		if _, err := unix.Read(raw, drain[:4096]); err != nil {
			break
		}
	}
	fill(pages)
	start, reads := time.Now(), 0
	for {
		if _, err := unix.Read(raw, drain[:4096]); err != nil {
			break
		}
		reads++
	}
	readTime := time.Since(start)
	// The tree's ioctl alone, from this process.
	fill(pages)
	start, ioctls := time.Now(), 0
	for {
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(raw), fusefs.IoctlSplicePage, uintptr(unsafe.Pointer(&drain[0]))); e != 0 {
			break
		}
		ioctls++
	}
	ioctlTime := time.Since(start)
	fmt.Printf("helper: ioctl %.1f µs a page (%d)\n", float64(ioctlTime.Microseconds())/float64(max(ioctls, 1)), ioctls)
	// The guard's round trip alone: splice of a regular file, 1 byte.
	f, err := os.CreateTemp("", "splice")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	f.Write([]byte{1})
	const trips = 200
	start = time.Now()
	for range trips {
		off := int64(0)
		if _, err := unix.Splice(int(f.Fd()), &off, p[1], nil, 1, 0); err != nil {
			t.Fatal(err)
		}
		unix.Read(p[0], drain[:1])
	}
	tripTime := time.Since(start)
	fmt.Printf("helper: splice %.1f µs a page, %.1f µs a call; read %.1f µs a page (%d pages); a guarded splice of a regular file %.1f µs\n",
		float64(spliceTime.Microseconds())/float64(max(commits, 1)), float64(spliceTime.Microseconds())/float64(calls),
		float64(readTime.Microseconds())/float64(max(reads, 1)), reads, float64(tripTime.Microseconds())/trips)
}

// TestRunSpliceRaw: under uetrace run, splice(2) of trace_pipe_raw takes
// the full pages of the CPU's buffer, 16 to a 64 KiB pipe, and not the
// page the writer is on: with SPLICE_F_NONBLOCK, EAGAIN then — as the
// kernel's splice does. Its cost, and that of read(2), is logged.
func TestRunSpliceRaw(t *testing.T) {
	out, m := runHelper(t, "splice-raw", "TestHelperSpliceRaw", `helper: spliced (\d+) bytes \((\d+) full pages\) in (\d+) calls`)
	if m[1] != strconv.Itoa(128*4096) || m[2] != "128" || m[3] != "9" {
		t.Errorf("spliced %s bytes, %s full pages, in %s calls; want the 128 pages the writer left, 16 a call, then EAGAIN\n%s", m[1], m[2], m[3], out)
	}
	if !strings.Contains(out, "helper: splice at the end: EAGAIN\n") {
		t.Errorf("the last splice, with only the writer's page left, did not fail with EAGAIN:\n%s", out)
	}
	if m := regexp.MustCompile(`helper: splice [0-9].*`).FindString(out); m != "" {
		t.Log(m)
	}
}

// TestHelperSpliceSignal is not a test of its own: TestRunSpliceSignal
// runs it under uetrace run --private, where it splices
// per_cpu/cpu0/trace_pipe_raw into a pipe while it takes signals, and
// reports how the splices ended and whether any pages were left in the
// pipe beyond what a splice said it moved.
func TestHelperSpliceSignal(t *testing.T) {
	if os.Getenv(helperEnv) != "splice-signal" {
		t.Skip("run under uetrace run by TestRunSpliceSignal")
	}
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	onCPU0 := func() {
		runtime.LockOSThread()
		if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
			t.Error(err)
		}
	}
	onCPU0()
	// buffer_percent 0: a splice's wait ends at the first record, not
	// when half the buffer is full.
	fd, r := treeEvent(t, "sg", [2]string{"buffer_percent", "0"})
	// write writes records of 24 bytes on CPU 0 (170 to a page) until
	// stop is closed, or n of them.
	write := func(n int, stop <-chan struct{}) {
		rec := bin.NativeEndian.AppendUint32(nil, r.WriteIndex)
		rec = append(rec, make([]byte, 12)...)
		for i := 0; i != n; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bin.NativeEndian.PutUint32(rec[4:], uint32(i))
			if _, err := unix.Write(fd, rec); err != nil {
				t.Error(err)
				return
			}
		}
	}
	raw, p := rawAndPipe(t)
	// Should a splice never end, the test says so rather than wait for
	// its time-out.
	watchdog := time.AfterFunc(time.Minute, func() {
		fmt.Println("helper: a splice did not end within a minute")
		os.Exit(1)
	})
	defer watchdog.Stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, unix.SIGUSR1)
	pid, tid := unix.Getpid(), unix.Gettid()
	inSplice := func() bool {
		b, _ := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/syscall")
		f := strings.Fields(string(b))
		return len(f) > 0 && f[0] == strconv.Itoa(unix.SYS_SPLICE)
	}

	// A splice that waits for a record takes a signal meanwhile: Go's
	// handler, SA_RESTART, runs and the splice goes on, until a record
	// comes — on a page the writer is still on, so that it takes nothing
	// (0), as the kernel's does once woken.
	taken := make(chan bool, 1)
	go func() {
		onCPU0()
		for !inSplice() {
			time.Sleep(time.Millisecond)
		}
		unix.Tgkill(pid, tid, unix.SIGUSR1)
		select {
		case <-sigs:
			taken <- true
		case <-time.After(time.Minute):
			taken <- false
		}
		write(1, nil)
	}()
	n, err := unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE)
	fmt.Printf("helper: signal taken while a splice waited: %v; the splice: %d %s\n", <-taken, n, errnoName(err))
	drain := make([]byte, 1<<16)

	// The record left (no full page): a splice does not wait with
	// something to read at buffer_percent 0, it takes what there is — no
	// page — and returns 0 at once.
	n, err = unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE)
	fmt.Printf("helper: a splice with a record and no page to take: %d %s\n", n, errnoName(err))

	// The same with a signal for the process, which Linux gives to a
	// thread that does not block it: perhaps the splicing one, which the
	// guard then answers EINTR. Either way the signal is taken while the
	// splice waits. The record the first splice left (no full page) is
	// cleared first: with it, the kernel's splice does not wait
	// (buffer_percent 0: something to read), it returns 0 at once.
	if err := os.WriteFile("/sys/kernel/tracing/trace", nil, 0); err != nil {
		t.Fatal(err)
	}
	procSigs := make(chan os.Signal, 1)
	signal.Notify(procSigs, unix.SIGUSR2)
	go func() {
		onCPU0()
		for !inSplice() {
			time.Sleep(time.Millisecond)
		}
		unix.Kill(pid, unix.SIGUSR2)
		select {
		case <-procSigs:
			taken <- true
		case <-time.After(time.Minute):
			taken <- false
		}
		write(1, nil)
	}()
	n, err = unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE)
	fmt.Printf("helper: process signal taken while a splice waited: %v; the splice: %d %s\n", <-taken, n, errnoName(err))

	// Pages flow while signals come every 100 µs: every page a splice
	// puts in the pipe is in its count.
	stop := make(chan struct{})
	done := make(chan struct{}, 2)
	go func() { onCPU0(); write(-1, stop); done <- struct{}{} }()
	go func() {
		for {
			select {
			case <-stop:
				done <- struct{}{}
				return
			case <-time.After(100 * time.Microsecond):
				unix.Tgkill(pid, tid, unix.SIGUSR1)
			}
		}
	}()
	go func() {
		for range sigs {
		}
	}()
	calls, pages, stray := 0, 0, 0
	errs := map[string]int{}
	for start := time.Now(); pages < 200 && time.Since(start) < 3*time.Second; calls++ {
		n, err := unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE)
		if err != nil {
			errs[errnoName(err)]++
			continue
		}
		for got := 0; got < int(n); {
			k, err := unix.Read(p[0], drain[got:n])
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
		pages += int(n) / 4096
		if left, _ := unix.IoctlGetInt(p[0], unix.TIOCINQ); left > 0 { // FIONREAD
			stray += left
			unix.Read(p[0], drain[:left])
		}
	}
	close(stop)
	<-done
	<-done
	fmt.Printf("helper: %d splices took %d pages; failed %v; bytes in the pipe beyond the splices' counts: %d\n", calls, pages, errs, stray)
}

// TestRunSpliceSignal: under uetrace run, a splice(2) of trace_pipe_raw
// that waits for a record lets the caller take a signal and goes on, as
// the kernel's does for a handler with SA_RESTART (Go's); a signal for
// the process is taken too; and a signal never costs pages: what a splice
// puts in the pipe is what it says it did.
// Before the guard's filter had WAIT_KILLABLE_RECV, a signal between the
// guard's write into the pipe and its answer left those pages in the
// pipe with the caller never told, and trace-cmd record lost them.
func TestRunSpliceSignal(t *testing.T) {
	out, m := runHelper(t, "splice-signal", "TestHelperSpliceSignal",
		`(?s)helper: signal taken while a splice waited: (\w+); the splice: (-?\d+) (\S+)\n`+
			`helper: a splice with a record and no page to take: 0 ok\n`+
			`helper: process signal taken while a splice waited: (\w+); the splice: (-?\d+ \S+)\n.*helper: (\d+) splices took (\d+) pages; failed (.*); bytes in the pipe beyond the splices' counts: (\d+)`)
	if m[1] != "true" || m[2] != "0" || m[3] != "ok" {
		t.Errorf("a waiting splice: signal taken %s, then %s bytes (%s); want the signal taken and the splice to go on until the record written, then 0 bytes (no full page)\n%s", m[1], m[2], m[3], out)
	}
	if m[4] != "true" || (m[5] != "0 ok" && m[5] != "-1 EINTR") {
		t.Errorf("a waiting splice: a signal for the process taken %s, then %s; want it taken, then 0 bytes, or EINTR if the splicing thread took it\n%s", m[4], m[5], out)
	}
	if m[9] != "0" || m[6] == "0" || m[7] == "0" || m[8] != "map[]" {
		t.Errorf("%s splices under signals took %s pages, failed %s, and left %s bytes in the pipe they did not count; want pages, no failure (SA_RESTART) and nothing left\n%s", m[6], m[7], m[8], m[9], out)
	}
	t.Log(strings.TrimSpace(m[0]))
}

// TestHelperSpliceWait is not a test of its own: TestRunKilledWhileSplicing
// runs it under uetrace run --private, where it says the tree's device
// and waits in a splice of per_cpu/cpu0/trace_pipe_raw that nothing ends.
func TestHelperSpliceWait(t *testing.T) {
	if os.Getenv(helperEnv) != "splice-wait" {
		t.Skip("run under uetrace run by TestRunKilledWhileSplicing")
	}
	const T = "/sys/kernel/tracing/"
	var st unix.Stat_t
	if err := unix.Stat(T+"trace", &st); err != nil {
		t.Fatal(err)
	}
	raw, p := rawAndPipe(t)
	fmt.Printf("helper: tree %d:%d, splicing\n", unix.Major(st.Dev), unix.Minor(st.Dev))
	n, err := unix.Splice(raw, nil, p[1], nil, 1<<16, unix.SPLICE_F_MOVE)
	fmt.Printf("helper: the splice: %d %s\n", n, errnoName(err))
}

// TestRunKilledWhileSplicing: uetrace run killed with SIGKILL while its
// guard splices for the command exits, and the command's splice fails.
// The guard holds the command's trace_pipe_raw then, a file of the tree
// uetrace run serves; its close as uetrace run exited was a FLUSH to
// uetrace run itself, which waited forever: uetrace run stayed a zombie
// and the command in its splice until the FUSE connection was aborted by
// hand. Files whose close the tree need not hear of are opened
// FOPEN_NOFLUSH now.
func TestRunKilledWhileSplicing(t *testing.T) {
	needFUSE(t)
	cmd := exec.Command(testutil.Uetrace(t), "run", "--private", "--", os.Args[0], "-test.run=^TestHelperSpliceWait$", "-test.v")
	cmd.Env = append(os.Environ(), "UETRACE_SOCKET=", helperEnv+"=splice-wait")
	var out testutil.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	treeDev := regexp.MustCompile(`helper: tree (\d+):(\d+), splicing`)
	splicing := func() bool {
		for _, task := range descendantTasks(cmd.Process.Pid) {
			if b, _ := os.ReadFile(task + "/syscall"); strings.HasPrefix(string(b), strconv.Itoa(unix.SYS_SPLICE)+" ") {
				return true
			}
		}
		return false
	}
	testutil.Wait(t, "the helper to wait in its splice", func() bool { return treeDev.MatchString(out.String()) && splicing() })
	cmd.Process.Kill()
	if !testutil.Eventually(func() bool {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}) {
		// Free the machine: abort the connection, as one would by hand.
		m := treeDev.FindStringSubmatch(out.String())
		os.WriteFile("/sys/fs/fuse/connections/"+m[2]+"/abort", []byte("1"), 0)
		t.Fatalf("uetrace run, killed while its guard spliced, did not exit within %v\n%s", testutil.Timeout, out.String())
	}
	testutil.Wait(t, "the helper to end", func() bool { return strings.Contains(out.String(), "helper: the splice: ") || !splicing() })
	t.Log(strings.TrimSpace(out.String()))
}

// descendantTasks are the /proc directories of the threads of pid's
// descendants.
func descendantTasks(pid int) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	parent := map[int]int{}
	for _, dir := range procs {
		b, err := os.ReadFile(dir + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b[i+1:]))
		p, _ := strconv.Atoi(filepath.Base(dir))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var tasks []string
	for p := range parent {
		for q, depth := parent[p], 0; q > 1 && depth < 1000; q, depth = parent[q], depth+1 {
			if q == pid {
				ts, _ := filepath.Glob("/proc/" + strconv.Itoa(p) + "/task/[0-9]*")
				tasks = append(tasks, ts...)
				break
			}
		}
	}
	return tasks
}

// TestRunFtraceEnabled: /proc/sys/kernel/ftrace_enabled, which trace-cmd
// record writes "1" to (and dies if it cannot), is the command's own under
// uetrace run: it reads what the host's says, takes writes — even where
// the host's may not be written (a user namespace) — and the host's does
// not change.
func TestRunFtraceEnabled(t *testing.T) {
	needFUSE(t)
	host, err := os.ReadFile(ftraceEnabled)
	if err != nil {
		t.Skipf("this kernel has no %s (no function tracer): nothing to keep: %v", ftraceEnabled, err)
	}
	flip := "0"
	if strings.TrimSpace(string(host)) == "0" {
		flip = "1"
	}
	out, code, _ := runCmd(t, testutil.Uetrace(t), nil, "run", "--private", "--", "sh", "-c",
		fmt.Sprintf(`cat %[1]s; echo %[2]s > %[1]s && echo written; cat %[1]s`, ftraceEnabled, flip))
	if want := string(host) + "written\n" + flip + "\n"; code != 0 || out != want {
		t.Errorf("under uetrace run: exit %d\n%s\nwant:\n%s", code, out, want)
	}
	if after, _ := os.ReadFile(ftraceEnabled); string(after) != string(host) {
		t.Errorf("the host's %s went from %q to %q", ftraceEnabled, host, after)
	}
}

// TestTraceCmdOnMountedTree follows docs/trace-cmd.md for a tree mounted
// with uetrace mount, where there is no guard: in a mount namespace of its
// own, the daemon's tree mounted over the kernel's tracefs at
// /sys/kernel/tracing — libtracefs takes the first tracefs of /proc/mounts,
// whose directory is now the tree's — and trace-cmd record --nosplice, as
// splice reads nothing through FUSE. Where /proc/sys/kernel/ftrace_enabled
// cannot be written (a container), a file is bound over it first, as the
// doc says.
func TestTraceCmdOnMountedTree(t *testing.T) {
	needFUSE(t)
	tc := traceCmd(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare (util-linux)")
	}
	sock, _, _ := startServe(t)
	dir := t.TempDir()
	const records = 400
	script := fmt.Sprintf(`set -e
T=/sys/kernel/tracing
grep -q " $T tracefs " /proc/mounts || mount -t tracefs nodev $T
if ! (echo 1 > /proc/sys/kernel/ftrace_enabled) 2>/dev/null; then
	mkdir %[1]s/sysctl && mount -t tmpfs none %[1]s/sysctl && echo 1 > %[1]s/sysctl/ftrace_enabled
	mount --bind %[1]s/sysctl/ftrace_enabled /proc/sys/kernel/ftrace_enabled
fi
%[2]s --socket %[3]s mount $T
echo 'u:%[4]s' >> $T/dynamic_events
echo 'u:%[5]s' >> $T/dynamic_events
UETRACE_TEST_RECORDER=1 UETRACE_TEST_RECORDS=%[6]d %[7]s record -q --nosplice -o %[1]s/m.dat -e user_events:tc_hello %[8]s -test.run='^TestHelperTraceCmdWrites$' > %[1]s/record.out 2>&1
%[7]s report -i %[1]s/m.dat
`, dir, testutil.Uetrace(t), sock, tcHello, tcOther, records, tc, os.Args[0])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), helperEnv+"=tracecmd-writes")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		rec, _ := os.ReadFile(filepath.Join(dir, "record.out"))
		t.Fatalf("%v\n%s\nrecord:\n%s", err, out, rec)
	}
	events := parseEvents(reportRE, string(out))
	if len(events) != records {
		t.Fatalf("trace-cmd report has %d records, want %d:\n%s", len(events), records, out)
	}
	for i, e := range events {
		if want := []string{"n=" + strconv.Itoa(i+1), "tag=p" + strconv.Itoa(i+1)}; e.event != "tc_hello" || !slices.Equal(e.fields, want) {
			t.Fatalf("record %d: %v, want tc_hello %v", i, e, want)
		}
	}
}
