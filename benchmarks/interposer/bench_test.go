package interposer

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/kernel/vmtest"
	"github.com/uetrace/uetrace/userevents"
)

var (
	pacedRate = flag.Float64("paced-rate", 100000, "c-paced: writes a second")
	pacedSecs = flag.Float64("paced-seconds", 2, "c-paced: for how long")
	tpEvents  = flag.Int("tp-events", 3000000, "libtracepoint: events written")
	tpRate    = flag.Float64("tp-rate", 0, "libtracepoint: events a second (0: as fast as it can)")
	recWrites = flag.Int("record-writes", 2000000, "c-record: records written")
	recRate   = flag.Float64("record-rate", 0, "c-record: records a second (0: as fast as it can)")
	recRounds = flag.Int("record-rounds", 3, "c-record: rounds (each of this build and, with -before, of that one, alternately)")
	before    = flag.String("before", "", "c-record: another build of uetrace (main's) measured alternately with this one")
)

// event is ringbench's event, the one userevents' DaemonRingWrite writes.
const event = "bench_write u32 a; u64 b; u32 c; char[16] d; u16 e"

// BenchmarkInterposer is, in one run on one daemon (`uetrace serve`, in a
// child process):
//
//   - go-ring: the Go client's ring write (userevents, the daemon backend's
//     default transport), 34-byte payload: DaemonRingWrite;
//   - c-ring: ringbench under `uetrace run`, its writev of the same 34
//     bytes through the interposer into a ring of its own; ns/op is its
//     own timing of the writes, cpu-ns/op its thread's CPU time;
//   - c-paced: the same at -paced-rate writes a second for -paced-seconds
//     (once, whatever b.N): dropped is what the ring had no room for;
//   - foreign: the interposer's check on a descriptor not the tree's:
//     added-ns/op, write(2) through the interposer less the same call
//     straight to the write beneath it (a stub, so that only the check
//     is timed);
//   - c-record: ringbench's record mode under `uetrace run`, its event
//     enabled only by `uetrace record` recording it, so that the daemon
//     may hand the program's ring set to the recording: -record-writes
//     records at -record-rate a second (0: as fast as it can), written
//     once the hand-over is made (or 2 s passed, for a build without
//     it); writes/s, and lost beside it — the records written that are
//     not in the recording, of which dropped are the interposer's own
//     drops (its rings were full). With -before=UETRACE, another build
//     (main's, to compare) is measured in the same run, round for round
//     alternately, with its own daemon: before-writes/s, before-lost.
//     Medians of -record-rounds rounds;
//   - libtracepoint: Microsoft's libtracepoint (TPP_FUNCTION, 4 iovecs)
//     writing -tp-events events under `uetrace run` (at -tp-rate events a
//     second, or as fast as it can) while `uetrace record` records them
//     (once, whatever b.N): events/s, and the recording's count and loss
//     beside it. Needs
//     $UETRACE_LINUXTRACEPOINTS (see the package doc); skipped without.
//
// Every event is enabled into the daemon's trace buffer, which nobody
// reads (libtracepoint's into the recording). Needs root, /dev/fuse and
// gcc; skips without them.
func BenchmarkInterposer(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: uetrace run mounts FUSE")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skip("no /dev/fuse")
	}
	if preload.Library == nil {
		b.Skip("no interposer for this architecture")
	}
	tmp := b.TempDir()
	lt := os.Getenv("UETRACE_LINUXTRACEPOINTS")
	if err := Build(tmp, lt); err != nil {
		b.Skipf("%v", err)
	}
	uetrace := filepath.Join(tmp, "uetrace")
	if err := vmtest.Build("github.com/uetrace/uetrace/cmd/uetrace", uetrace); err != nil {
		b.Fatal(err)
	}
	lib := filepath.Join(tmp, preload.FileName)
	if err := os.WriteFile(lib, preload.Library, 0o644); err != nil {
		b.Fatal(err)
	}
	sock := vmtest.Serve(b, uetrace, tmp)

	b.Run("go-ring", func(b *testing.B) {
		o := userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport}
		ev := daemontest.EnabledEvent(b, o, event)
		payload := make([]byte, 34)
		b.ReportAllocs()
		cpu0 := testutil.CPUTime()
		for b.Loop() {
			if err := ev.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(testutil.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(ev.Dropped())/float64(b.N), "dropped/op")
	})
	b.Run("c-ring", func(b *testing.B) {
		v := run(b, tmp, nil, uetrace, "--socket", sock, "run", "--", filepath.Join(tmp, "ringbench"), "/sys/kernel/tracing", "ring", strconv.Itoa(b.N))
		b.ReportMetric(v["ns"]/v["writes"], "ns/op")
		b.ReportMetric(v["cpu_ns"]/v["writes"], "cpu-ns/op")
		b.ReportMetric(v["dropped"]/v["writes"], "dropped/op")
		b.ReportMetric(v["fallbacks"], "fallbacks")
	})
	b.Run("c-paced", func(b *testing.B) {
		v := run(b, tmp, nil, uetrace, "--socket", sock, "run", "--", filepath.Join(tmp, "ringbench"), "/sys/kernel/tracing", "paced",
			strconv.FormatFloat(*pacedRate, 'f', -1, 64), strconv.FormatFloat(*pacedSecs, 'f', -1, 64))
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(v["writes"]*1e9/v["ns"], "writes/s")
		b.ReportMetric(v["dropped"], "dropped")
		b.ReportMetric(v["fallbacks"], "fallbacks")
	})
	b.Run("foreign", func(b *testing.B) {
		env := []string{"LD_PRELOAD=" + lib + " " + filepath.Join(tmp, "stub.so")}
		v := run(b, tmp, env, filepath.Join(tmp, "ringbench"), "foreign", strconv.Itoa(max(b.N, 1000)))
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(v["added_ns"], "added-ns/op")
		b.ReportMetric(v["via_ns"], "via-ns/op")
		b.ReportMetric(v["direct_ns"], "direct-ns/op")
	})
	b.Run("c-record", func(b *testing.B) {
		prog := filepath.Join(tmp, "ringbench")
		builds := []*recordBench{{uetrace: uetrace, sock: sock}}
		if *before != "" {
			dir := filepath.Join(tmp, "before")
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			builds = append(builds, &recordBench{uetrace: *before, sock: vmtest.Serve(b, *before, dir), name: "before-"})
		}
		for range *recRounds {
			for _, r := range builds {
				r.round(b, prog, filepath.Join(tmp, "rec.data"))
			}
		}
		b.ReportMetric(0, "ns/op")
		for _, r := range builds {
			b.ReportMetric(median(r.rates), r.name+"writes/s")
			b.ReportMetric(median(r.lost), r.name+"lost")
			b.ReportMetric(median(r.dropped), r.name+"dropped")
			b.Logf("%suetrace: writes/s %.0f, lost %.0f (dropped by the interposer %.0f) of %d; hand-overs %.0f", r.name, r.rates, r.lost, r.dropped, *recWrites+1000, r.handed)
		}
	})
	b.Run("libtracepoint", func(b *testing.B) {
		if lt == "" {
			b.Skip("$UETRACE_LINUXTRACEPOINTS is not set: no libtracepoint build to measure")
		}
		data := filepath.Join(tmp, "tp.data")
		os.Remove(data)
		rec := startRecord(b, uetrace, sock, data)
		v := run(b, tmp, nil, uetrace, "--socket", sock, "run", "--", filepath.Join(tmp, "tpbench"),
			"-r", strconv.FormatFloat(*tpRate, 'f', -1, 64), "tpp", strconv.Itoa(*tpEvents))
		summary := rec.stop(b)
		recorded := countRecords(b, uetrace, data, "bench_tpp")
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(v["events/s"], "events/s")
		b.ReportMetric(float64(recorded), "recorded")
		b.ReportMetric(v["written"]-float64(recorded), "lost")
		b.Logf("uetrace record: %s", strings.TrimSpace(summary))
	})
}

// run runs a program (under uetrace run, or with env) with a deadline and
// returns the values of its result line.
func run(b *testing.B, dir string, env []string, name string, args ...string) map[string]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	_, v, err := Parse(out)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// recording is a `uetrace record` running.
type recording struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

// startRecord starts `uetrace record` of every user event into data and
// returns once it records (a second's grace: it says nothing before).
func startRecord(b *testing.B, uetrace, sock, data string) *recording {
	cmd := exec.Command(uetrace, "--socket", sock, "record", "-e", "user_events:*", "-o", data)
	r := &recording{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(time.Second)
	return r
}

// stop ends the recording as ^C does and returns what it said.
func (r *recording) stop(b *testing.B) string {
	time.Sleep(time.Second) // the daemon's rings drained into the session
	r.cmd.Process.Signal(os.Interrupt)
	if err := r.cmd.Wait(); err != nil {
		b.Fatalf("uetrace record: %v\n%s", err, r.stderr)
	}
	return r.stderr.String()
}

// countRecords counts the records of event in a recording.
func countRecords(b *testing.B, uetrace, data, event string) int {
	out, err := exec.Command(uetrace, "report", "-i", data, "--format", "json").Output()
	if err != nil {
		b.Fatalf("uetrace report: %v", err)
	}
	return bytes.Count(out, []byte(`"`+event))
}

// recordBench is c-record's measure of one build of uetrace, on its daemon.
type recordBench struct {
	uetrace, sock, name          string
	rates, lost, dropped, handed []float64
}

// round runs ringbench's record mode once under the build's uetrace run
// while its uetrace record records into data.
func (r *recordBench) round(b *testing.B, prog, data string) {
	res := recordRound(b, r.uetrace, r.sock, prog, data, nil, *recWrites, *recRate, 2*time.Second)
	r.rates = append(r.rates, res.values["writes"]*1e9/res.values["ns"])
	r.lost = append(r.lost, float64(*recWrites+1000-res.samples))
	r.dropped = append(r.dropped, res.values["dropped"])
	r.handed = append(r.handed, float64(res.handed))
}

// A recordResult is what one recordRound gave.
type recordResult struct {
	values  map[string]float64 // ringbench's result line
	samples int                // in the recording, as uetrace record counted them
	summary string             // uetrace record's own words
	handed  int                // hand-overs the daemon made meanwhile
}

// recordRound records user_events:* into data while ringbench (prog)
// writes n records at rate a second (0: as fast as it can) under `uetrace
// run` (with runFlags; ringbench's own arguments after its N and RATE
// progArgs) on the daemon at sock. The records are written
// once the daemon has handed the program's ring set to the recording, or
// once handOver has passed without. It returns once the daemon has let the
// program's share go — every record is then the recording's — and the
// recording has ended.
func recordRound(tb testing.TB, uetrace, sock, prog, data string, runFlags []string, n int, rate float64, handOver time.Duration, progArgs ...string) recordResult {
	tb.Helper()
	handed0 := statCount(tb, uetrace, sock, "handovers")
	os.Remove(data)
	rec := exec.Command(uetrace, "--socket", sock, "record", "-q", "-e", "user_events:*", "-o", data)
	var recErr bytes.Buffer
	rec.Stderr = &recErr
	if err := rec.Start(); err != nil {
		tb.Fatal(err)
	}
	defer rec.Process.Kill() // a no-op once it has been waited for
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append(append([]string{"--socket", sock, "run"}, runFlags...), "--", prog, "/sys/kernel/tracing", "record",
		strconv.Itoa(n), strconv.FormatFloat(rate, 'f', -1, 64))
	args = append(args, progArgs...)
	cmd := exec.CommandContext(ctx, uetrace, args...)
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	// It says "ready" once the recording has enabled its event and its
	// share is set up.
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		tb.Fatalf("ringbench: %q, %v\n%s\nuetrace record: %s", line, err, stderr.Bytes(), recErr.Bytes())
	}
	for deadline := time.Now().Add(handOver); time.Now().Before(deadline) && statCount(tb, uetrace, sock, "handovers_now") == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	stdin.Write([]byte("go\n"))
	var rest bytes.Buffer
	rest.ReadFrom(out)
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("uetrace %s: %v\n%s%s", strings.Join(args, " "), err, rest.Bytes(), stderr.Bytes())
	}
	_, v, err := Parse(rest.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	// The daemon lets the share go when it sees the program gone, having
	// delivered its records (or taken its set back from the recording).
	for deadline := time.Now().Add(time.Minute); statCount(tb, uetrace, sock, "interposer_shares_open") > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatal("the program's share was not released within a minute of its exit")
		}
	}
	rec.Process.Signal(os.Interrupt)
	if err := rec.Wait(); err != nil {
		tb.Fatalf("uetrace record: %v\n%s", err, recErr.Bytes())
	}
	m := regexp.MustCompile(`(\d+) samples of`).FindSubmatch(recErr.Bytes())
	if m == nil {
		tb.Fatalf("uetrace record said no sample count: %s", recErr.Bytes())
	}
	samples, _ := strconv.Atoi(string(m[1]))
	return recordResult{values: v, samples: samples, summary: strings.TrimSpace(recErr.String()), handed: statCount(tb, uetrace, sock, "handovers") - handed0}
}

// statCount is one count of uetrace status's daemon section.
func statCount(tb testing.TB, uetrace, sock, name string) int {
	tb.Helper()
	out, err := exec.Command(uetrace, "--socket", sock, "status").Output()
	if err != nil {
		tb.Fatalf("uetrace status: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("no %s in uetrace status", name)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// median is the middle of v.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Sorted(slices.Values(v))
	return v[len(v)/2]
}
