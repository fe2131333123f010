package export_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// The end-to-end benchmarks run once each (-benchtime 1x: each is a whole
// export) into the real Collector, whose pipelines keep nothing (the nop
// exporter: what is measured is what feeds it and its receiver), counting
// what its receiver accepted and refused by its own telemetry:
//
//	go test ./internal/export -run '^$' -bench 'E2E' -benchtime 1x -count 5
//
// E2EExportFile sends a perf.data file of the tests' mix (a third plain
// user events, two thirds EventHeader events with a struct, an array and
// an activity id); E2EExportLive writes the same events through a daemon
// while `uetrace export` takes them from its session; E2EReceiver has the
// Collector's userevents receiver take them from the daemon; E2ESDK, the
// anchor, has the OpenTelemetry Go SDK's own OTLP log exporter send records
// of the same shape (otelcol/distribution/sdklogs) to the same Collector.
//
// Each reports events/s (wall-clock, from the first event sent to the last
// accepted), the CPU each process took per event (its user and system time
// over the events accepted: what perf stat -e task-clock counts), and what
// was not delivered, by where it was counted: nothing is lost silently —
// written = accepted + refused + dropped by export + lost before the
// session's reader took them, checked. (The daemon counts the records a
// writer's ring had no room for as lost to the sessions: writer-dropped
// are among the lost.)

// e2eEvents is how many events a run sends.
const e2eEvents = 200_000

// sink is a Collector that accepts everything and keeps nothing, its own
// telemetry's counts served by Prometheus.
type sink struct {
	*collector
	metricsPort int
}

// telemetryConfig has a Collector serve its own metrics (the counts of
// what its receivers and exporters took, sent, refused, dropped) on
// 127.0.0.1 at the port of its first argument, for Prometheus.
const telemetryConfig = `service:
  telemetry:
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[1]d
    logs:
      level: warn
`

// sinkConfig: the telemetry's port, the receivers, the receiver's name.
const sinkConfig = telemetryConfig + `  pipelines:
    logs:
      receivers: [%[3]s]
      exporters: [nop]
    traces:
      receivers: [%[3]s]
      exporters: [nop]
    metrics:
      receivers: [%[3]s]
      exporters: [nop]
receivers:
%[2]s
exporters:
  nop:
`

// startSink starts a sink with the OTLP receiver.
func startSink(tb testing.TB, otelcol string) *sink {
	tb.Helper()
	gp, hp, mp := freePort(tb), freePort(tb), freePort(tb)
	recv := fmt.Sprintf("  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%d\n      http:\n        endpoint: 127.0.0.1:%d", gp, hp)
	s := &sink{collector: runCollector(tb, otelcol, fmt.Sprintf(sinkConfig, mp, recv, "otlp"), gp, hp, mp), metricsPort: mp}
	s.grpcPort, s.httpPort = gp, hp
	return s
}

// startReceiverSink starts a sink with the userevents receiver taking the
// events from the daemon at sock.
func startReceiverSink(tb testing.TB, otelcol, sock string, events ...string) *sink {
	tb.Helper()
	mp := freePort(tb)
	recv := fmt.Sprintf("  userevents:\n    source: daemon\n    socket: %s\n    events: [%s]\n    buffer_kb: 65536", sock, strings.Join(events, ", "))
	return &sink{collector: runCollector(tb, otelcol, fmt.Sprintf(sinkConfig, mp, recv, "userevents"), mp), metricsPort: mp}
}

// port is where the sink's OTLP receiver takes proto, "grpc" or "http".
func (s *sink) port(proto string) int {
	if proto == "http" {
		return s.httpPort
	}
	return s.grpcPort
}

// counts are the items the sink's receiver accepted and refused (log
// records, spans and metric points), from its telemetry.
func (s *sink) counts(tb testing.TB) (accepted, refused uint64) {
	tb.Helper()
	m := telemetry(tb, s.metricsPort)
	for _, item := range []string{"log_records", "spans", "metric_points"} {
		accepted += m["otelcol_receiver_accepted_"+item]
		refused += m["otelcol_receiver_refused_"+item]
	}
	return accepted, refused
}

// telemetry reads a Collector's own metrics from its Prometheus endpoint:
// each counter's value, summed over its labels.
func telemetry(tb testing.TB, port int) map[string]uint64 {
	tb.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		tb.Fatalf("the Collector's telemetry: %v", err)
	}
	defer resp.Body.Close()
	m := map[string]uint64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), "{")
		_, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			m[name] += uint64(v)
		}
	}
	return m
}

// waitAccepted waits until the sink has accepted or refused n items, or
// nothing more comes for a minute.
func (s *sink) waitAccepted(tb testing.TB, n uint64) (accepted, refused uint64) {
	tb.Helper()
	last, since := uint64(0), time.Now()
	for {
		accepted, refused = s.counts(tb)
		if accepted+refused >= n {
			return accepted, refused
		}
		if accepted+refused != last {
			last, since = accepted+refused, time.Now()
		}
		if time.Since(since) > time.Minute {
			return accepted, refused
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cpuTime is a running process's user and system time so far, from
// /proc/<pid>/stat (in clock ticks: 100 a second).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the comm's closing parenthesis: state is field 3;
	// utime and stime are 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// usPerEvent reports a process's CPU per accepted event.
func usPerEvent(b *testing.B, cpu time.Duration, n uint64, unit string) {
	if n > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(n), unit)
	}
}

// sdkBinary builds the SDK anchor (otelcol/distribution/sdklogs), once.
var sdkOnce = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "sdklogs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-C", "../../otelcol/distribution", "-o", bin, "./sdklogs")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build sdklogs: %v\n%s", err, out)
	}
	return bin, nil
})

// sdkBinary is the SDK anchor: $UETRACE_SDKLOGS, or built beside the
// Collector.
func sdkBinary(b *testing.B) string {
	if bin := os.Getenv("UETRACE_SDKLOGS"); bin != "" {
		return bin
	}
	binaries(b) // the go command, and binDir
	if binDir == "" {
		b.Skip("the SDK anchor is built from otelcol/distribution beside the Collector; with $UETRACE_OTELCOL, $UETRACE_SDKLOGS names it")
	}
	bin, err := sdkOnce()
	if err != nil {
		b.Fatal(err)
	}
	return bin
}

// sent is a sender's run to a sink: what the sink accepted and refused,
// how long until it had, the sender's process and its output, and the
// sink's CPU meanwhile.
type sent struct {
	accepted, refused uint64
	elapsed           time.Duration
	sender            *os.ProcessState
	stderr            string
	collectorCPU      time.Duration
}

// sendToSink starts a sink and runs the command command makes for its port
// of proto to the end, then waits for the sink to have accepted or refused
// what want, given the command's output, says it sent.
func sendToSink(b *testing.B, otelcol, proto string, command func(port int) *exec.Cmd, want func(stderr string) uint64) sent {
	s := startSink(b, otelcol)
	colStart := cpuTime(s.cmd.Process.Pid)
	start := time.Now()
	cmd := command(s.port(proto))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	r := sent{sender: cmd.ProcessState, stderr: stderr.String()}
	r.accepted, r.refused = s.waitAccepted(b, want(r.stderr))
	r.elapsed = time.Since(start)
	r.collectorCPU = cpuTime(s.cmd.Process.Pid) - colStart
	return r
}

func BenchmarkE2EExportFile(b *testing.B) {
	otelcol, uetrace := binaries(b)
	path, _ := testFile(b, e2eEvents)
	for _, proto := range []string{"grpc", "http"} {
		b.Run(proto, func(b *testing.B) {
			for b.Loop() {
				var sum summary
				r := sendToSink(b, otelcol, proto, func(port int) *exec.Cmd {
					return exec.Command(uetrace, "export", "-q", "-i", path, "--protocol", proto,
						"--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port), "--service-name", "export-test")
				}, func(stderr string) uint64 {
					sum = parseSummary(b, stderr)
					return uint64(sum.delivered + sum.rejected)
				})
				checkDelivered(b, e2eEvents, r.accepted, r.refused, uint64(sum.delivered), uint64(sum.rejected), uint64(sum.dropped), 0)
				b.ReportMetric(float64(r.accepted)/r.elapsed.Seconds(), "events/s")
				usPerEvent(b, r.sender.UserTime()+r.sender.SystemTime(), r.accepted, "export-us/event")
				usPerEvent(b, r.collectorCPU, r.accepted, "collector-us/event")
				b.ReportMetric(float64(sum.dropped+sum.rejected), "lost")
			}
		})
	}
}

// checkDelivered fails the benchmark unless every event written is
// accounted for: accepted or refused by the Collector as the sender
// counted it delivered or rejected, or counted dropped by the sender,
// lost at the session or dropped by the writer.
func checkDelivered(b *testing.B, written int, accepted, refused, delivered, rejected, dropped, lost uint64) {
	b.Helper()
	if accepted != delivered || refused != rejected {
		b.Fatalf("the Collector accepted %d and refused %d; the sender counted %d delivered, %d rejected", accepted, refused, delivered, rejected)
	}
	if got := delivered + rejected + dropped + lost; got != uint64(written) {
		b.Fatalf("%d written; %d delivered + %d rejected + %d dropped + %d lost = %d", written, delivered, rejected, dropped, lost, got)
	}
}

// liveRun is a daemon with the tests' three events registered by a
// writer in this process.
type liveRun struct {
	sock      string
	daemonPID int
	write     func(w want) error
	enabled   func() bool
	dropped   func() uint64
	file      *userevents.File
}

func startLive(b *testing.B, uetrace string) *liveRun {
	r := &liveRun{}
	r.sock, r.daemonPID = startDaemon(b, uetrace)
	var err error
	r.file, err = userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: r.sock})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.file.Close() })
	r.write, r.enabled, r.dropped = liveEvents(b, r.file)
	return r
}

// writeAll writes n of the events, paced to rate a second (0: as fast as
// one writer can), and returns how long it took.
func (r *liveRun) writeAll(b *testing.B, wants []want, n, rate int) time.Duration {
	start := time.Now()
	for i := range n {
		if rate > 0 && i%100 == 0 {
			// Paced in bursts of 100.
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
		}
		if err := r.write(wants[i%len(wants)]); err != nil {
			b.Fatalf("write %d: %v", i, err)
		}
	}
	return time.Since(start)
}

// liveRates are the writer's paces: as fast as it can (its own ring
// drops what the daemon cannot take, counted), and 100 000 a second.
var liveRates = []int{0, 100_000}

func rateName(rate int) string {
	if rate == 0 {
		return "max"
	}
	return fmt.Sprintf("%d-per-s", rate)
}

func BenchmarkE2EExportLive(b *testing.B) {
	otelcol, uetrace := binaries(b)
	_, wants := testFile(b, 3000)
	for _, rate := range liveRates {
		for _, proto := range []string{"grpc", "http"} {
			b.Run(rateName(rate)+"/"+proto, func(b *testing.B) {
				for b.Loop() {
					s := startSink(b, otelcol)
					port := s.port(proto)
					r := startLive(b, uetrace)
					cmd := exec.Command(uetrace, "--backend", "daemon", "--socket", r.sock, "export", "-q",
						"-e", "x", "-e", "UetraceTest_*", "--protocol", proto, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port),
						"--service-name", "export-test", "--queue", "1024", "--buffer-kb", "65536")
					var stderr testutil.Buffer
					cmd.Stderr = &stderr
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					exited := make(chan error, 1)
					go func() { exited <- cmd.Wait() }()
					testutil.Wait(b, "export to enable the events", r.enabled)
					dStart, cStart, eStart := cpuTime(r.daemonPID), cpuTime(s.cmd.Process.Pid), cpuTime(cmd.Process.Pid)
					start := time.Now()
					writeEl := r.writeAll(b, wants, e2eEvents, rate)
					writerDropped := r.dropped()
					// What the Collector accepts stops growing once export
					// has sent all it took; then export stops and counts.
					s.waitAccepted(b, uint64(e2eEvents)-writerDropped)
					el := time.Since(start)
					dCPU, cCPU, eCPU := cpuTime(r.daemonPID)-dStart, cpuTime(s.cmd.Process.Pid)-cStart, cpuTime(cmd.Process.Pid)-eStart
					cmd.Process.Signal(syscall.SIGINT)
					if err := <-exited; err != nil {
						b.Fatalf("uetrace export: %v\n%s", err, stderr.String())
					}
					sum := parseSummary(b, stderr.String())
					accepted, refused := s.counts(b)
					lost := exportLost(stderr.String())
					checkDelivered(b, e2eEvents, accepted, refused, uint64(sum.delivered), uint64(sum.rejected), uint64(sum.dropped), lost)
					if writerDropped > lost {
						b.Fatalf("the writer dropped %d records, and export counted %d lost", writerDropped, lost)
					}
					b.ReportMetric(float64(accepted)/el.Seconds(), "events/s")
					b.ReportMetric(float64(e2eEvents)/writeEl.Seconds(), "written/s")
					b.ReportMetric(float64(writerDropped), "writer-dropped")
					b.ReportMetric(float64(lost), "lost")
					b.ReportMetric(float64(sum.dropped+sum.rejected), "export-lost")
					usPerEvent(b, eCPU, accepted, "export-us/event")
					usPerEvent(b, dCPU, accepted, "daemon-us/event")
					usPerEvent(b, cCPU, accepted, "collector-us/event")
				}
			})
		}
	}
}

func BenchmarkE2EReceiver(b *testing.B) {
	otelcol, uetrace := binaries(b)
	_, wants := testFile(b, 3000)
	for _, rate := range liveRates {
		b.Run(rateName(rate), func(b *testing.B) {
			for b.Loop() {
				r := startLive(b, uetrace)
				s := startReceiverSink(b, otelcol, r.sock, "x", "UetraceTest_*")
				testutil.Wait(b, "the receiver to enable the events", r.enabled)
				dStart, cStart := cpuTime(r.daemonPID), cpuTime(s.cmd.Process.Pid)
				start := time.Now()
				writeEl := r.writeAll(b, wants, e2eEvents, rate)
				writerDropped := r.dropped()
				accepted, refused := s.waitAccepted(b, uint64(e2eEvents)-writerDropped)
				el := time.Since(start)
				dCPU, cCPU := cpuTime(r.daemonPID)-dStart, cpuTime(s.cmd.Process.Pid)-cStart
				// The receiver logs what its source lost; the rest is
				// accepted or refused.
				s.stop(b)
				lost := receiverLost(s.log.String())
				if got := accepted + refused + lost; got != e2eEvents || writerDropped > lost {
					b.Fatalf("%d written; %d accepted + %d refused + %d lost = %d; of them %d dropped by the writer\n%s",
						e2eEvents, accepted, refused, lost, got, writerDropped, s.log.String())
				}
				b.ReportMetric(float64(accepted)/el.Seconds(), "events/s")
				b.ReportMetric(float64(e2eEvents)/writeEl.Seconds(), "written/s")
				b.ReportMetric(float64(writerDropped), "writer-dropped")
				b.ReportMetric(float64(lost), "lost")
				b.ReportMetric(float64(refused), "refused")
				usPerEvent(b, cCPU, accepted, "collector-us/event")
				usPerEvent(b, dCPU, accepted, "daemon-us/event")
			}
		})
	}
}

// exportLost is what export's summary says was lost before it took the
// records.
func exportLost(stderr string) uint64 {
	var n uint64
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "warning: ") && strings.Contains(line, " records were lost before export took them") {
			fmt.Sscanf(line, "warning: %d records", &n)
		}
	}
	return n
}

// receiverLost is the last lost_total the userevents receiver logged: the
// records its source lost.
func receiverLost(log string) uint64 {
	var n uint64
	for _, line := range strings.Split(log, "\n") {
		if i := strings.Index(line, `"lost_total": `); i >= 0 {
			f := strings.FieldsFunc(line[i+len(`"lost_total": `):], func(r rune) bool { return r < '0' || r > '9' })
			if len(f) > 0 {
				n, _ = strconv.ParseUint(f[0], 10, 64)
			}
		}
	}
	return n
}

func BenchmarkE2ESDK(b *testing.B) {
	otelcol, _ := binaries(b)
	sdk := sdkBinary(b)
	for _, proto := range []string{"grpc", "http"} {
		b.Run(proto, func(b *testing.B) {
			for b.Loop() {
				r := sendToSink(b, otelcol, proto, func(port int) *exec.Cmd {
					return exec.Command(sdk, "-n", strconv.Itoa(e2eEvents), "-protocol", proto, "-endpoint", fmt.Sprintf("127.0.0.1:%d", port))
				}, func(string) uint64 { return e2eEvents })
				if r.accepted != e2eEvents || r.refused != 0 {
					b.Fatalf("the Collector accepted %d and refused %d of the SDK's %d", r.accepted, r.refused, e2eEvents)
				}
				b.ReportMetric(float64(r.accepted)/r.elapsed.Seconds(), "events/s")
				usPerEvent(b, r.sender.UserTime()+r.sender.SystemTime(), r.accepted, "sdk-us/event")
				usPerEvent(b, r.collectorCPU, r.accepted, "collector-us/event")
			}
		})
	}
}
