package export_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// The end-to-end benchmarks run once each (-benchtime 1x: each is a whole
// export) and report events/s and the CPU the processes took:
//
//	go test ./export -run '^$' -bench 'ExportFile|ExportLive' -benchtime 1x
//
// ExportFile sends a perf.data file of 100 000 events (a third plain user
// events, two thirds EventHeader events with a struct, an array and an
// activity id) to the local Collector; ExportLive writes them through the
// daemon while export runs — as fast as one writer can, then paced.

// cpuTicks is a process's user and system time so far, in clock ticks
// (100 a second), from /proc/<pid>/stat.
func cpuTicks(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the comm's closing parenthesis: state is field 3;
	// utime and stime are 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s
}

// countOutput counts the records in the Collector's file cheaply: each
// has one "seq" attribute.
func countOutput(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte(`{"key":"seq"`))
}

func waitCount(b *testing.B, path string, n int) {
	deadline := time.Now().Add(5 * time.Minute)
	for countOutput(path) < n {
		if time.Now().After(deadline) {
			b.Fatalf("the Collector wrote %d records in 5 minutes, want %d", countOutput(path), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkExportFile(b *testing.B) {
	const n = 100_000
	otelcol, uetrace := binaries(b)
	path, _ := testFile(b, n)
	for _, proto := range []string{"grpc", "http"} {
		b.Run(proto, func(b *testing.B) {
			for b.Loop() {
				out := filepath.Join(b.TempDir(), "logs.json")
				c := startCollector(b, otelcol, freePort(b), freePort(b), out)
				port := c.grpcPort
				if proto == "http" {
					port = c.httpPort
				}
				colStart := cpuTicks(c.cmd.Process.Pid)
				start := time.Now()
				cmd := exec.Command(uetrace, "export", "-q", "-i", path, "--protocol", proto,
					"--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port), "--service-name", "export-test")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					b.Fatalf("uetrace export: %v\n%s", err, stderr.String())
				}
				waitCount(b, out, n)
				el := time.Since(start)
				ps := cmd.ProcessState
				b.ReportMetric(n/el.Seconds(), "events/s")
				b.ReportMetric((ps.UserTime()+ps.SystemTime()).Seconds()/el.Seconds()*100, "export-cpu-%")
				b.ReportMetric(float64(cpuTicks(c.cmd.Process.Pid)-colStart)/100/el.Seconds()*100, "collector-cpu-%")
				b.Logf("%s", strings.TrimSpace(stderr.String()))
			}
		})
	}
}

func BenchmarkExportLive(b *testing.B) {
	const n = 100_000
	otelcol, uetrace := binaries(b)
	_, wants := testFile(b, n)
	for _, rate := range []int{0, 10_000} {
		name := "max"
		if rate > 0 {
			name = fmt.Sprintf("%d-per-s", rate)
		}
		for _, proto := range []string{"grpc", "http"} {
			b.Run(name+"/"+proto, func(b *testing.B) {
				for b.Loop() {
					count := n
					if rate > 0 {
						count = 5 * rate // five seconds
					}
					out := filepath.Join(b.TempDir(), "logs.json")
					c := startCollector(b, otelcol, freePort(b), freePort(b), out)
					port := c.grpcPort
					if proto == "http" {
						port = c.httpPort
					}
					sock, daemonPID := startDaemon(b, uetrace)
					f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
					if err != nil {
						b.Fatal(err)
					}
					write, enabled, dropped := liveEvents(b, f)
					cmd := exec.Command(uetrace, "--backend", "daemon", "--socket", sock, "export", "-q",
						"-e", "x", "-e", "UetraceTest_*", "--protocol", proto, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port),
						"--service-name", "export-test", "--queue", "1024", "--buffer-kb", "65536")
					var stderr testutil.Buffer
					cmd.Stderr = &stderr
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					exited := make(chan error, 1)
					go func() { exited <- cmd.Wait() }()
					testutil.Wait(b, "export to enable the events", enabled)
					dStart, cStart := cpuTicks(daemonPID), cpuTicks(c.cmd.Process.Pid)
					start := time.Now()
					for i := range count {
						if rate > 0 && i%100 == 0 {
							// Paced in bursts of 100.
							if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
								time.Sleep(d)
							}
						}
						write(wants[i%n])
					}
					writeEl := time.Since(start)
					lost := int(dropped())
					waitCount(b, out, count-lost)
					el := time.Since(start)
					dCPU, cCPU := cpuTicks(daemonPID)-dStart, cpuTicks(c.cmd.Process.Pid)-cStart
					eCPU := cpuTicks(cmd.Process.Pid)
					cmd.Process.Signal(syscall.SIGINT)
					if err := <-exited; err != nil {
						b.Fatalf("uetrace export: %v\n%s", err, stderr.String())
					}
					f.Close()
					b.ReportMetric(float64(count-lost)/el.Seconds(), "events/s")
					b.ReportMetric(float64(count)/writeEl.Seconds(), "written/s")
					b.ReportMetric(float64(lost), "writer-dropped")
					b.ReportMetric(float64(dCPU)/100/el.Seconds()*100, "daemon-cpu-%")
					b.ReportMetric(float64(eCPU)/100/el.Seconds()*100, "export-cpu-%")
					b.ReportMetric(float64(cCPU)/100/el.Seconds()*100, "collector-cpu-%")
					b.Logf("%s", strings.TrimSpace(stderr.String()))
				}
			})
		}
	}
}
