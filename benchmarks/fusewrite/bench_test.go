package fusewrite

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/kernel/vmtest"
	"github.com/uetrace/uetrace/tracefs"
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
//     per record) and the ring transport (shared memory, no system call).
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
	sock := startDaemon(b, uetrace, tmp)

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
	for _, tr := range []struct {
		name string
		t    userevents.Transport
	}{{"socket", userevents.SocketTransport}, {"ring", userevents.RingTransport}} {
		b.Run(tr.name, func(b *testing.B) {
			o := userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: tr.t}
			ev := goEvent(b, o)
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

// startDaemon starts `uetrace serve` on a socket in dir and returns the
// socket once the daemon answers; the benchmark's cleanup ends it.
func startDaemon(b *testing.B, uetrace, dir string) string {
	sock := filepath.Join(dir, "uetrace.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, uetrace, "serve", "--socket", sock)
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); cmd.Wait() })
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.Dial(sock, nil)
		if err == nil {
			c.Close()
			return sock
		}
		if time.Now().After(deadline) {
			b.Fatalf("uetrace serve did not answer on %s within a minute: %v\n%s", sock, err, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runProgram runs the C program with n writes and m checks under the
// uetrace command line given, with a deadline, and returns what it
// measured. Only the program touches the FUSE mount.
func runProgram(b *testing.B, dir string, n, m int, uetrace string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args = append(args, filepath.Join(dir, "fusewrite"), strconv.Itoa(n), strconv.Itoa(m))
	cmd := exec.CommandContext(ctx, uetrace, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("uetrace %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
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

// goEvent opens a File on the daemon with o, registers the event and
// enables it.
func goEvent(b *testing.B, o userevents.Options) *userevents.Event {
	f, err := userevents.Open(&o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if f.Transport() != o.Transport {
		b.Fatalf("transport %v, asked for %v: %v", f.Transport(), o.Transport, f.RingError())
	}
	ev, err := f.Register(event, 0)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := tracefs.Open(&o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	if err := fs.WriteFile("events/user_events/bench_fuse/enable", []byte("1"), 0); err != nil {
		b.Fatal(err)
	}
	if !ev.Enabled() {
		b.Fatal("the event is not enabled after writing its enable file")
	}
	return ev
}
