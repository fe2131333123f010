package record_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// BenchmarkRecordDaemon records a daemon's events into a perf.data file
// while a producer writes them at 1.25 M events/s (benchRate): one 5-field event, written
// in the daemon's process (the in-process backend on the Subsystem the
// daemon serves; a client's writes over the socket are a round trip each),
// recorded from another process over the daemon's socket, as `uetrace
// record` does. events/s is what was recorded per second of wall time from
// the recording's start to its last event; lost must be 0. Target (issue
// 6): ≥ 1 M events/s.
func BenchmarkRecordDaemon(b *testing.B) {
	const n = 2_000_000
	var total, lost uint64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		sock := filepath.Join(b.TempDir(), "uetrace.sock")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", benchServeEnv, sock, n))
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line := bufio.NewReader(stdout)
		if s, err := line.ReadString('\n'); err != nil || s != "ready\n" {
			b.Fatalf("daemon process: %q, %v", s, err)
		}
		c, err := client.Dial(sock, nil)
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(b.TempDir(), "perf.data"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		rec, err := record.Daemon(c, out, record.Options{Events: []string{"bench"}, NoFollow: true})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		for rec.Stats().Samples+rec.Stats().Lost < n {
			time.Sleep(100 * time.Microsecond)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		st := rec.Stats()
		total += st.Samples
		lost += st.Lost
		c.Close()
		out.Close()
		stdin.Close()
		cmd.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(lost), "lost")
	if lost != 0 {
		b.Errorf("%d of %d events lost", lost, total+lost)
	}
}

// benchRate is the producer's pace in BenchmarkRecordDaemon, events/s.
const benchRate = 1.25e6

// benchServeEnv makes the test binary a daemon whose own goroutine writes
// events: "socket,count".
const benchServeEnv = "UETRACE_BENCH_SERVE"

// benchServe serves a subsystem on sock and, once a recording enables the
// event, writes n events as fast as it can; it exits when stdin closes.
func benchServe(spec string) {
	sock, count, _ := strings.Cut(spec, ",")
	n, _ := strconv.Atoi(count)
	sys := subsys.New(subsys.Options{NumCPU: 2})
	ln, err := daemon.Listen(sock)
	if err != nil {
		panic(err)
	}
	srv := daemon.New(daemon.Config{
		Logger:    slog.New(slog.DiscardHandler),
		Subsystem: sys,
		Cred:      daemontest.Perfmon,
	})
	go srv.Serve(ln)
	ev, payload := benchEvent(sys)
	fmt.Println("ready")
	for !ev.Enabled() {
		time.Sleep(10 * time.Microsecond)
	}
	// Paced at benchRate: faster than any one producer of a real program,
	// and what the recording must keep up with.
	start := time.Now()
	for i := range n {
		if err := ev.Write(payload); err != nil {
			panic(err)
		}
		if i%1000 == 999 {
			ahead := time.Duration(float64(i+1)/benchRate*1e9) - time.Since(start)
			if ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}

// benchEvent registers the benchmarks' 5-field event on sys in this
// process and encodes one record of it.
func benchEvent(sys *subsys.Subsystem) (*userevents.Event, []byte) {
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		panic(err)
	}
	ev, err := f.Register("bench u32 status; s64 latency; char[16] method; __rel_loc char[] path; u8 retry", 0)
	if err != nil {
		panic(err)
	}
	var enc eventdef.Encoder
	enc.Reset(ev.Def(), nil)
	enc.Uint(200)
	enc.Int(1234567)
	enc.String("GET")
	enc.String("/api/v1/items")
	enc.Uint(0)
	payload, err := enc.Payload()
	if err != nil {
		panic(err)
	}
	return ev, payload
}

// BenchmarkRecordDaemonDrain is the recorder's own capacity: the session
// already holds the events when the recording starts reading, and the time
// is that of taking them from the daemon into the file.
func BenchmarkRecordDaemonDrain(b *testing.B) {
	const batch = 500_000
	var total, lost uint64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		ev, payload, rec := benchDaemon(b, 64<<10)
		for range batch {
			if err := ev.Write(payload); err != nil {
				b.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		b.StartTimer()
		start := time.Now()
		go func() { done <- rec.Run(ctx) }()
		for rec.Stats().Samples+rec.Stats().Lost < batch {
			time.Sleep(100 * time.Microsecond)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		st := rec.Stats()
		total += st.Samples
		lost += st.Lost
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(lost), "lost")
	if lost != 0 {
		b.Errorf("%d events lost", lost)
	}
}

// benchDaemon serves a subsystem with one 5-field event and starts a
// recording of it over the socket.
func benchDaemon(b *testing.B, bufferKB int) (*userevents.Event, []byte, *record.Recorder) {
	sys := subsys.New(subsys.Options{NumCPU: 2})
	sock := daemontest.Start(b, daemon.Config{Subsystem: sys, Cred: daemontest.Perfmon})

	ev, payload := benchEvent(sys)
	c, err := client.Dial(sock, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	out, err := os.Create(filepath.Join(b.TempDir(), "perf.data"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { out.Close() })
	rec, err := record.Daemon(c, out, record.Options{Events: []string{"bench"}, NoFollow: true, BufferKB: bufferKB})
	if err != nil {
		b.Fatal(err)
	}
	return ev, payload, rec
}
