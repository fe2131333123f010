package record_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/tracefs"
)

// The uetrace command on each target, as perf's habits have it: record
// (and report) with --pid and --comm, short-lived tasks' names, top's plain
// output, trace -e with --comm, status.

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchServeEnv); spec != "" {
		benchServe(spec)
		return
	}
	os.Exit(testutil.Run(m))
}

// `uetrace record` runs while this process writes known events; Ctrl-C
// (SIGINT) stops it and the file holds them; `uetrace report --format
// json` shows exactly those values.
func TestRecordCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "cli", "u32 i; __rel_loc char[] s")
		backend := backendArgs(tg)
		data := filepath.Join(t.TempDir(), "cli.data")
		rec := startRecording(t, bin, append(backend, "record", "-e", name, "-o", data)...)
		if !ev.Enabled() {
			t.Fatal("recording, but the event is not enabled")
		}
		const n = 100
		for i := range n {
			s := fmt.Sprintf("value %d", i)
			payload := append(le32(uint32(i)), le32(uint32(len(s)+1)<<16)...)
			payload = append(append(payload, s...), 0)
			if err := ev.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond) // past the kernel's 100 ms poll
		summary := rec.stop(t)
		if !strings.Contains(summary, fmt.Sprintf("[ uetrace record: %d samples of 1 events", n)) ||
			!strings.Contains(summary, "user_events:"+name) {
			t.Errorf("summary:\n%s", summary)
		}

		out, err := exec.Command(bin, "report", data, "--format", "json").Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("report has %d lines, want %d:\n%s", len(lines), n, out)
		}
		for i, line := range lines {
			var s jsonSample
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("line %d %q: %v", i, line, err)
			}
			want := map[string]any{"i": float64(i), "s": fmt.Sprintf("value %d", i)}
			if s.Name != name || fmt.Sprint(s.Fields) != fmt.Sprint(want) {
				t.Fatalf("line %d: %s %v, want %s %v", i, s.Name, s.Fields, name, want)
			}
		}
		text, err := exec.Command(bin, "report", data).Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		if !strings.Contains(string(text), fmt.Sprintf("user_events:%s: i=7 s=value 7\n", name)) {
			t.Errorf("text report:\n%s", text)
		}
	})
}

// recording is a `uetrace record` process.
type recording struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	copied chan struct{}
}

// startRecording starts `uetrace args...` and returns once it says it is
// recording.
func startRecording(t *testing.T, bin string, args ...string) *recording {
	t.Helper()
	rec := &recording{cmd: exec.Command(bin, args...), copied: make(chan struct{})}
	pipe, err := rec.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The kernel sets the bit when the first CPU's perf event opens;
	// "recording" is said once every CPU's is enabled.
	attached := make(chan struct{})
	go func() {
		defer close(rec.copied)
		sc := bufio.NewScanner(pipe)
		said := false
		for sc.Scan() {
			rec.stderr.Write(append(sc.Bytes(), '\n'))
			if !said && strings.HasPrefix(sc.Text(), "uetrace record: recording ") {
				said = true
				close(attached)
			}
		}
	}()
	select {
	case <-attached:
	case <-time.After(waitLimit):
		rec.cmd.Process.Kill()
		<-rec.copied
		t.Fatalf("uetrace record did not say it was recording in %v:\n%s", waitLimit, rec.stderr.String())
	}
	return rec
}

// stop stops the recording as Ctrl-C does and returns what it printed.
func (rec *recording) stop(t *testing.T) string {
	t.Helper()
	rec.cmd.Process.Signal(syscall.SIGINT)
	<-rec.copied
	if err := rec.cmd.Wait(); err != nil {
		t.Fatalf("uetrace record: %v\n%s", err, rec.stderr.String())
	}
	return rec.stderr.String()
}

// A task that writes and exits before the recording could look it up in
// /proc is still named in the report: on the kernel by perf's COMM record
// of its exec, on the daemon by the session's record of the writer's name.
// The recording is stopped (SIGSTOP) while the task runs and is reaped.
func TestRecordShortLivedTask(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, _ := openEvent(t, tg, "short", "u32 i")
		command := name + " u32 i"
		backend := backendArgs(tg)
		data := filepath.Join(t.TempDir(), "short.data")
		rec := startRecording(t, bin, append(backend, "record", "-e", name, "-o", data)...)
		rec.cmd.Process.Signal(syscall.SIGSTOP)
		emit := exec.Command(bin, append(backend, "emit", command, "--field", "i=7")...)
		out, err := emit.CombinedOutput()
		rec.cmd.Process.Signal(syscall.SIGCONT)
		if err != nil {
			rec.stop(t)
			t.Fatalf("uetrace emit: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond) // past the kernel's 100 ms poll
		rec.stop(t)
		out, err = exec.Command(bin, "report", data, "--format", "json").Output()
		if err != nil {
			t.Fatalf("uetrace report: %v", err)
		}
		var s jsonSample
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("report %q: %v", out, err)
		}
		if s.Name != name || s.Fields["i"] != float64(7) || s.Comm != filepath.Base(bin)[:min(15, len(filepath.Base(bin)))] {
			t.Errorf("report: %s", out)
		}
	})
}

func le32(x uint32) []byte { return []byte{byte(x), byte(x >> 8), byte(x >> 16), byte(x >> 24)} }

// reportLines runs uetrace report --format json with args on data.
func reportLines(t *testing.T, bin, data string, args ...string) []jsonSample {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"report", data, "--format", "json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("uetrace report %v: %v", args, err)
	}
	var got []jsonSample
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		var s jsonSample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("report line %q: %v", line, err)
		}
		got = append(got, s)
	}
	return got
}

// `uetrace record --comm` records only the producer's samples and says how
// many it left out; `record --pid` only this process's; `report --pid` and
// `--comm` pick from a file holding both.
func TestRecordCommandFilters(t *testing.T) {
	bin := testutil.Uetrace(t)
	prod := producer(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "clifilt", "u32 i")
		cmd := name + " u32 i"
		me := os.Getpid()
		// record runs, this process writes 3 records, the producer 2.
		run := func(filter ...string) (data, summary string, pids []int) {
			data = filepath.Join(t.TempDir(), "filt.data")
			rec := startRecording(t, bin, append(append(backendArgs(tg), "record", "-e", name, "-o", data), filter...)...)
			for i := range 3 {
				if err := ev.Write(le32(uint32(i))); err != nil {
					t.Fatal(err)
				}
			}
			pids = []int{emit(t, prod, tg, cmd), emit(t, prod, tg, cmd)}
			return data, rec.stop(t), pids
		}

		data, summary, _ := run("--comm", "ueprodx")
		if !strings.Contains(summary, "2 samples of 1 events") || !strings.Contains(summary, "(3 samples of other tasks left out by --pid/--comm)") {
			t.Errorf("record --comm summary:\n%s", summary)
		}
		for _, s := range reportLines(t, bin, data) {
			if s.Comm != "ueprodx" {
				t.Errorf("record --comm ueprodx kept %+v", s)
			}
		}

		data, summary, _ = run("--pid", strconv.Itoa(me))
		got := reportLines(t, bin, data)
		if len(got) != 3 || !strings.Contains(summary, "(2 samples of other tasks left out") {
			t.Errorf("record --pid %d: %d samples:\n%s", me, len(got), summary)
		}
		for _, s := range got {
			if int(s.PID) != me {
				t.Errorf("record --pid %d kept %+v", me, s)
			}
		}

		data, _, pp := run()
		if all := reportLines(t, bin, data); len(all) != 5 {
			t.Fatalf("record without a filter: %d samples, want 5", len(all))
		}
		for _, c := range []struct {
			args []string
			keep func(jsonSample) bool
			n    int
		}{
			{[]string{"--pid", strconv.Itoa(pp[1])}, func(s jsonSample) bool { return int(s.PID) == pp[1] }, 1},
			{[]string{"--pid", fmt.Sprintf("%d,%d", me, pp[0])}, func(s jsonSample) bool { return int(s.PID) == me || int(s.PID) == pp[0] }, 4},
			{[]string{"--comm", "ueprodx"}, func(s jsonSample) bool { return s.Comm == "ueprodx" }, 2},
			{[]string{"--comm", "ueprodx", "--pid", strconv.Itoa(me)}, func(jsonSample) bool { return false }, 0},
		} {
			got := reportLines(t, bin, data, c.args...)
			if len(got) != c.n {
				t.Errorf("report %v: %d samples, want %d", c.args, len(got), c.n)
			}
			for _, s := range got {
				if !c.keep(s) {
					t.Errorf("report %v kept %+v", c.args, s)
				}
			}
		}
	})
}

var topEventLine = regexp.MustCompile(`(?m)^event (\S+) events/s=([0-9.]+) events=(\d+) lost=(\S+)$`)

// `uetrace top` without a terminal prints blocks of plain lines with this
// process's records, per event and per process; through perf's rings the
// kernel counts lost records per event, BPF and the daemon do not. SIGINT
// ends it.
func TestTopCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "top", "u32 i")
		cmd := exec.Command(bin, append(backendArgs(tg), "top", "-e", name, "-d", "200ms", "--by", "pid")...)
		var out, errs testutil.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint32(0); ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				if ev.Enabled() {
					ev.Write(le32(i))
				}
			}
		}()
		me := fmt.Sprintf("pid %d comm=", os.Getpid())
		wantLost := func(lost string) bool {
			if tg.name == "kernel" {
				// Counted in the kernel by BPF (top's default there),
				// which loses none per event: "-"; through perf's rings
				// (no BPF), each event's count.
				_, err := strconv.ParseUint(lost, 10, 64)
				return err == nil || lost == "-"
			}
			return lost == "-"
		}
		testutil.Wait(t, "a block with the event at a non-zero rate and this process", func() bool {
			for _, b := range strings.Split(out.String(), "\n\n") {
				m := topEventLine.FindStringSubmatch(b)
				if m != nil && m[1] == "user_events:"+name && m[2] != "0.0" && wantLost(m[4]) && strings.Contains(b, me) {
					return true
				}
			}
			return false
		})
		close(stop)
		wg.Wait()
		cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("top after SIGINT: %v\n%s", err, errs.String())
		}
	})
}

// `uetrace trace -e` enables the event for the trace only, and --comm
// keeps this process's lines, not the producer's.
//
// On the kernel a line's task name comes from ftrace's saved_cmdlines,
// which learns a task's name when it is scheduled out after writing a
// record: a line read from trace_pipe at once can show "<...>". So this
// process writes from one thread until a line shows its name.
func TestTraceCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	prod := producer(t)
	self, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	comm := strings.TrimSuffix(string(self), "\n")
	forEach(t, func(t *testing.T, tg target) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, name, ev := openEvent(t, tg, "trc", "u32 i")
		cmd := name + " u32 i"
		fs, err := tracefs.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		enable := func() string {
			b, err := fs.ReadFile("events/user_events/" + name + "/enable")
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if e := enable(); e != "0\n" {
			t.Fatalf("enable %q before the trace", e)
		}
		tr := exec.Command(bin, append(backendArgs(tg), "trace", "-e", name, "--comm", comm)...)
		var out, errs testutil.Buffer
		tr.Stdout, tr.Stderr = &out, &errs
		if err := tr.Start(); err != nil {
			t.Fatal(err)
		}
		defer tr.Process.Kill()
		testutil.Wait(t, "trace to enable the event", func() bool {
			return strings.Contains(errs.String(), "enabled user_events:"+name+" until the trace ends")
		})
		if e := enable(); e != "1\n" {
			t.Errorf("enable %q during the trace", e)
		}
		if err := ev.Write(le32(1)); err != nil {
			t.Fatal(err)
		}
		emit(t, prod, tg, cmd)
		mine := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(comm) + `-\d+\s.*\] .* ` + name + `: i=0x2 \(2\)$`)
		last := time.Now()
		testutil.Wait(t, "a line of this process", func() bool {
			if mine.MatchString(out.String()) {
				return true
			}
			if time.Since(last) > 50*time.Millisecond {
				last = time.Now()
				if err := ev.Write(le32(2)); err != nil {
					t.Fatal(err)
				}
			}
			return false
		})
		tr.Process.Signal(syscall.SIGTERM)
		if err := tr.Wait(); err != nil {
			t.Errorf("trace after SIGTERM: %v\n%s", err, errs.String())
		}
		// The producer's record came before this process's last: had the
		// filter let it through, it would be in the output.
		if strings.Contains(out.String(), "i=0x7") || strings.Contains(out.String(), "ueprodx") {
			t.Errorf("the producer's line is in trace --comm %s:\n%s", comm, out.String())
		}
		if !slices.Contains(strings.Split(errs.String(), "\n"), "uetrace trace: disabled user_events:"+name+" again") {
			t.Errorf("stderr:\n%s", errs.String())
		}
		if e := enable(); e != "0\n" {
			t.Errorf("enable %q after the trace", e)
		}
	})
}

// `uetrace status` counts each event's records on the daemon; the kernel
// keeps no such count, and status says so rather than show a number.
func TestStatusCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "stat", "u32 i")
		uetrace := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(bin, append(backendArgs(tg), args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("uetrace %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		uetrace("enable", name)
		defer uetrace("disable", name)
		for i := range 2 {
			if err := ev.Write(le32(uint32(i))); err != nil {
				t.Fatal(err)
			}
		}
		out := uetrace("status")
		row := regexp.MustCompile(`(?m)^` + name + `\s+user_events\s+\d+\s+ftrace\s+(\S+)\s+(\S+)\s+u32 i$`).FindStringSubmatch(out)
		const note = "RECORDS, DROPPED: - the kernel keeps no per-event count of user_events records"
		switch {
		case row == nil:
			t.Errorf("no row for %s:\n%s", name, out)
		case tg.name == "kernel" && (row[1] != "-" || row[2] != "-" || !strings.Contains(out, note)):
			t.Errorf("kernel status: %q %q\n%s", row[1], row[2], out)
		case tg.name == "daemon" && (row[1] != "2" || row[2] != "0" || strings.Contains(out, note)):
			t.Errorf("daemon status: %q %q\n%s", row[1], row[2], out)
		}
	})
}

// On the kernel, with the tgid column (options/record-tgid), trace --pid
// keeps every thread of a process: the producer, a Go program, writes from
// any of its threads.
func TestTracePIDThreads(t *testing.T) {
	bin := testutil.Uetrace(t)
	prod := producer(t)
	forEach(t, func(t *testing.T, tg target) {
		if tg.name != "kernel" {
			t.Skip("the daemon's trace has no tgid column (no options/)")
		}
		_, name, ev := openEvent(t, tg, "trpid", "u32 i")
		cmd := name + " u32 i"
		fs, err := tracefs.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		old, err := fs.ReadFile("options/record-tgid")
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile("options/record-tgid", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		defer fs.WriteFile("options/record-tgid", old, 0)

		uetrace := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(bin, append(backendArgs(tg), args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("uetrace %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		uetrace("enable", name)
		defer uetrace("disable", name)
		if err := ev.Write(le32(1)); err != nil {
			t.Fatal(err)
		}
		pp := emit(t, prod, tg, cmd)
		// The whole buffer, for the failure message: it can hold records
		// of earlier tests' events under this event's name, as the kernel
		// reuses a deleted event's id and decodes by the id.
		all := uetrace("trace")
		// Filtered by the producer's pid: only its line, whichever thread
		// wrote it.
		var lines []string
		for _, l := range strings.Split(uetrace("trace", "--pid", strconv.Itoa(pp)), "\n") {
			if strings.Contains(l, name+":") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("(%7d)", pp)) || !strings.Contains(lines[0], "i=0x7 (7)") {
			t.Errorf("trace --pid %d: %q\nall:\n%s", pp, lines, all)
		}
	})
}
