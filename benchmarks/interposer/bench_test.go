package interposer

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
