package fusewrite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/kernel/vmtest"
	"github.com/uetrace/uetrace/userevents"
)

// event is the C program's event, written by the Go producers too.
const event = "bench_fuse u32 a; u64 b"

// BenchmarkWrite is one event written as fast as a producer can, by four
// routes, in one run:
//
//   - fuse-enabled: the C program under `uetrace run --private`, where
//     /sys/kernel/tracing is uetrace's FUSE tree served by that uetrace
//     process: each writev(2) is a FUSE round trip, answered after reading
//     the caller's /proc/<tid>/{syscall,stat} and its iovecs;
//   - fuse-daemon: the same program under `uetrace run` with a daemon
//     running, whose tree it then is (the daemon serves the FUSE mount);
//   - fuse-disabled: the same program's enable-bit check with the event
//     disabled — what a well-behaved producer costs while nothing traces;
//   - socket and ring: a Go producer (package userevents) writing to a
//     daemon in another process through the socket transport (a round trip
//     per record) and the ring transport (shared memory, no system call);
//   - fuse-path/same-cpu and fuse-path/unpinned: the FUSE write path
//     against the bare round trip — the program's writes to the null FUSE
//     server (testdata/nullfuse.c), then under `uetrace run` with a daemon
//     and under `uetrace run --private`, three rounds of b.N writes each,
//     with every process on one CPU (a daemon of its own, started there) or
//     wherever the scheduler puts them. It reports the median time of one
//     write of each (null-ns, daemon-ns, private-ns: the median of the
//     rounds' medians) and each uetrace route's ratio to the null server's
//     (daemon/null, private/null: the median of the rounds' ratios).
//
// The C program times itself (an untimed warm-up first): ns/op is its time
// per write (or check), not including the start of uetrace run, which
// b.N's whole run does include. Every route's event is enabled into a trace
// buffer nobody reads. Needs root, /dev/fuse and gcc; skips without them.
func BenchmarkWrite(b *testing.B) {
	testutil.NeedFUSE(b, "uetrace run mounts FUSE")
	tmp := b.TempDir()
	prog := filepath.Join(tmp, "fusewrite")
	if err := Build(prog); err != nil {
		b.Skipf("no C toolchain: %v", err)
	}
	uetrace := filepath.Join(tmp, "uetrace")
	if err := vmtest.Build("github.com/uetrace/uetrace/cmd/uetrace", uetrace); err != nil {
		b.Fatal(err)
	}
	sock := vmtest.Serve(b, uetrace, tmp)

	b.Run("fuse-enabled", func(b *testing.B) {
		r := runProgram(b, tmp, b.N, 0, uetrace, "run", "--private", "--")
		b.ReportMetric(r.Enabled.NanosPerOp(), "ns/op")
		b.ReportMetric(r.Enabled.PerSecond(), "events/s")
	})
	b.Run("fuse-daemon", func(b *testing.B) {
		r := runProgram(b, tmp, b.N, 0, uetrace, "--socket", sock, "run", "--")
		b.ReportMetric(r.Enabled.NanosPerOp(), "ns/op")
		b.ReportMetric(r.Enabled.PerSecond(), "events/s")
	})
	b.Run("fuse-disabled", func(b *testing.B) {
		r := runProgram(b, tmp, 0, b.N, uetrace, "run", "--private", "--")
		b.ReportMetric(r.Disabled.NanosPerOp(), "ns/op")
		b.ReportMetric(r.Disabled.PerSecond(), "checks/s")
	})
	b.Run("fuse-path", func(b *testing.B) {
		null := filepath.Join(tmp, "nullfuse")
		if err := BuildNull(null); err != nil {
			b.Fatal(err)
		}
		b.Run("same-cpu", func(b *testing.B) {
			cpu, err := firstCPU()
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			var sock string
			onCPU(b, cpu, func() { sock = vmtest.Serve(b, uetrace, dir) })
			fusePath(b, tmp, null, uetrace, sock, &cpu)
		})
		b.Run("unpinned", func(b *testing.B) { fusePath(b, tmp, null, uetrace, sock, nil) })
	})
	for _, tr := range []struct {
		name string
		t    userevents.Transport
	}{{"socket", userevents.SocketTransport}, {"ring", userevents.RingTransport}} {
		b.Run(tr.name, func(b *testing.B) {
			o := userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: tr.t}
			ev := daemontest.EnabledEvent(b, o, event)
			payload := make([]byte, 12)
			b.ReportAllocs()
			for b.Loop() {
				if err := ev.Write(payload); err != nil {
					b.Fatal(err)
				}
			}
			// A write into the ring returns before the daemon has the
			// record, and one it had no room for is dropped (counted):
			// delivered/s is what reached the daemon, as every FUSE
			// and socket write does before it returns.
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "events/s")
			b.ReportMetric(float64(ev.Dropped())/float64(b.N), "dropped/op")
			b.ReportMetric(float64(uint64(b.N)-ev.Dropped())/sec, "delivered/s")
		})
	}
}

// runProgram runs the C program with n writes and m checks under the
// uetrace command line given, with a deadline, and returns what it
// measured. Only the program touches the FUSE mount.
func runProgram(b *testing.B, dir string, n, m int, uetrace string, args ...string) Result {
	return runOn(b, nil, dir, n, m, uetrace, args...)
}

// runOn is runProgram with the command started on CPU *cpu (with all it
// starts), when cpu is not nil. A command line starting with "-n" runs the
// program alone, on the null server's file that follows.
func runOn(b *testing.B, cpu *int, dir string, n, m int, uetrace string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prog := filepath.Join(dir, "fusewrite")
	args = append(args, prog, strconv.Itoa(n), strconv.Itoa(m))
	if args[0] == "-n" {
		uetrace, args = prog, append([]string{"-n", args[1]}, args[3:]...)
	}
	cmd := exec.CommandContext(ctx, uetrace, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var out []byte
	var err error
	if cpu != nil {
		var stdout strings.Builder
		cmd.Stdout = &stdout
		onCPU(b, *cpu, func() { err = cmd.Start() })
		if err == nil {
			err = cmd.Wait()
		}
		out = []byte(stdout.String())
	} else {
		out, err = cmd.Output()
	}
	if err != nil {
		b.Fatalf("%s %s: %v\n%s%s", filepath.Base(uetrace), strings.Join(args, " "), err, out, stderr.String())
	}
	r, err := Parse(out)
	if err != nil {
		b.Fatal(err)
	}
	if (n > 0 && r.Enabled.Count != uint64(n)) || (m > 0 && r.Disabled.Count != uint64(m)) {
		b.Fatalf("the program reported %+v; asked for %d writes and %d checks", r, n, m)
	}
	return r
}

// fusePath is fuse-path's measurement (see BenchmarkWrite): rounds of the
// program's b.N writes to the null server, through the daemon at sock, and
// through `uetrace run --private`, all on CPU *cpu when cpu is not nil.
func fusePath(b *testing.B, dir, null, uetrace, sock string, cpu *int) {
	mnt := filepath.Join(b.TempDir(), "null")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	startNull(b, null, mnt, cpu)
	routes := []struct {
		name string
		args []string
	}{
		{"null", []string{"-n", filepath.Join(mnt, "data")}},
		{"daemon", []string{"--socket", sock, "run", "--"}},
		{"private", []string{"run", "--private", "--"}},
	}
	const rounds = 3
	medians := make([][]float64, len(routes))
	ratios := make([][]float64, len(routes))
	for range rounds {
		var null float64
		for i, r := range routes {
			res := runOn(b, cpu, dir, b.N, 0, uetrace, r.args...)
			if res.Enabled.Count != uint64(b.N) {
				b.Fatalf("%s: the program reported %+v; asked for %d writes", r.name, res, b.N)
			}
			med := float64(res.Enabled.MedianNanos)
			if i == 0 {
				null = med
			}
			medians[i] = append(medians[i], med)
			ratios[i] = append(ratios[i], med/null)
		}
	}
	for i, r := range routes {
		b.ReportMetric(median(medians[i]), r.name+"-ns")
		if i > 0 {
			b.ReportMetric(median(ratios[i]), r.name+"/null")
		}
	}
	b.ReportMetric(median(medians[1]), "ns/op")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// startNull mounts the null FUSE server on mnt (on CPU *cpu when cpu is not
// nil) and returns once it serves; the benchmark's cleanup unmounts it,
// which ends it.
func startNull(b *testing.B, null, mnt string, cpu *int) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, null, mnt)
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	if cpu != nil {
		onCPU(b, *cpu, func() { err = cmd.Start() })
	} else {
		err = cmd.Start()
	}
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
		cancel()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		b.Fatalf("nullfuse %s: %q, %v\n%s", mnt, line, err, stderr.String())
	}
}

// firstCPU is the first CPU this process may run on.
func firstCPU() (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for cpu := range 1024 {
		if set.IsSet(cpu) {
			return cpu, nil
		}
	}
	return 0, fmt.Errorf("no CPU in this process's affinity: %w", unix.EINVAL)
}

// onCPU runs start on a thread that may run on cpu only: what start starts
// (exec.Cmd.Start forks from the calling thread) inherits that affinity,
// with all it starts in turn. The thread is given back to other goroutines
// with its affinity as it was.
func onCPU(b *testing.B, cpu int, start func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		b.Fatal(err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		b.Fatalf("sched_setaffinity CPU %d: %v", cpu, err)
	}
	defer unix.SchedSetaffinity(0, &old)
	start()
}
