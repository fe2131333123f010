package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/internal/export"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/perfdata"
)

// The binaries the tests run: the Collector distribution of otelcol/distribution
// (a module of its own, built as its builder would), built once per test
// binary, on first use, into binDir; and uetrace (testutil.Uetrace).
var (
	binDir     string
	buildOnce  sync.Once
	buildErr   error
	noGo       bool
	otelcolBin string
)

func TestMain(m *testing.M) {
	code := testutil.Run(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds the Collector and uetrace, or skips when there is no go
// command to build them with. $UETRACE_BIN and $UETRACE_OTELCOL name
// binaries built already: what the VM run (kernel/suites) passes in.
func binaries(t testing.TB) (otelcol, uetrace string) {
	t.Helper()
	if u, o := os.Getenv("UETRACE_BIN"), os.Getenv("UETRACE_OTELCOL"); u != "" && o != "" {
		return o, u
	}
	buildOnce.Do(func() {
		if _, err := exec.LookPath("go"); err != nil {
			noGo = true
			return
		}
		binDir, buildErr = os.MkdirTemp("", "uetrace-export-test")
		if buildErr != nil {
			return
		}
		otelcolBin = filepath.Join(binDir, "otelcol")
		// The first build downloads the Collector's modules: minutes.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-C", "../../otelcol/distribution", "-o", otelcolBin, ".")
		cmd.WaitDelay = 10 * time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -C ../../otelcol/distribution: %v\n%s", err, out)
		}
	})
	if noGo {
		t.Skip("no go command to build the Collector (export/otelcol) with")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return otelcolBin, testutil.Uetrace(t)
}

// freePort is a port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// collector is a running Collector: OTLP gRPC and HTTP receivers on
// 127.0.0.1, its logs written as JSON lines to out.
type collector struct {
	grpcPort, httpPort int
	out                string
	cmd                *exec.Cmd
	log                *testutil.Buffer
	exited             chan struct{}
}

const collectorConfig = `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
`

// startCollector starts the Collector and waits until both receivers
// accept connections.
func startCollector(t testing.TB, bin string, grpcPort, httpPort int, out string) *collector {
	t.Helper()
	c := runCollector(t, bin, fmt.Sprintf(collectorConfig, grpcPort, httpPort, out), grpcPort, httpPort)
	c.grpcPort, c.httpPort, c.out = grpcPort, httpPort, out
	return c
}

// runCollector starts the Collector with a config and waits until it
// accepts connections on the ports.
func runCollector(t testing.TB, bin, config string, ports ...int) *collector {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &collector{log: &testutil.Buffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, "--config="+cfg)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { c.stop(t) })
	deadline := time.Now().Add(2 * time.Minute)
	for _, port := range ports {
		for {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case <-c.exited:
				t.Fatalf("the Collector exited before it listened on %d:\n%s", port, c.log.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Collector does not listen on %d after 2 minutes:\n%s", port, c.log.String())
			}
		}
	}
	return c
}

// stop ends the Collector as its operator would (SIGTERM: it shuts its
// receivers down and flushes the file), and kills it if it takes longer
// than a minute.
func (c *collector) stop(t testing.TB) {
	select {
	case <-c.exited:
		return
	default:
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		c.cmd.Process.Kill()
		<-c.exited
		t.Errorf("the Collector did not stop within a minute of SIGTERM:\n%s", c.log.String())
	}
}

// The file exporter's JSON: ExportLogsServiceRequest in OTLP/JSON.
type jsonRequest struct {
	ResourceLogs []struct {
		Resource struct {
			Attributes []jsonKV `json:"attributes"`
		} `json:"resource"`
		ScopeLogs []struct {
			Scope struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"scope"`
			LogRecords []jsonRecord `json:"logRecords"`
		} `json:"scopeLogs"`
	} `json:"resourceLogs"`
}

type jsonRecord struct {
	TimeUnixNano         string   `json:"timeUnixNano"`
	ObservedTimeUnixNano string   `json:"observedTimeUnixNano"`
	SeverityNumber       int32    `json:"severityNumber"`
	SeverityText         string   `json:"severityText"`
	EventName            string   `json:"eventName"`
	Attributes           []jsonKV `json:"attributes"`
}

type jsonKV struct {
	Key   string  `json:"key"`
	Value jsonAny `json:"value"`
}

type jsonAny struct {
	StringValue *string  `json:"stringValue"`
	BoolValue   *bool    `json:"boolValue"`
	IntValue    *string  `json:"intValue"`
	DoubleValue *float64 `json:"doubleValue"`
	BytesValue  *string  `json:"bytesValue"`
	ArrayValue  *struct {
		Values []jsonAny `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []jsonKV `json:"values"`
	} `json:"kvlistValue"`
}

func (a jsonAny) value() otlp.Value {
	switch {
	case a.StringValue != nil:
		return otlp.StringValue(*a.StringValue)
	case a.BoolValue != nil:
		return otlp.BoolValue(*a.BoolValue)
	case a.IntValue != nil:
		n, _ := strconv.ParseInt(*a.IntValue, 10, 64)
		return otlp.IntValue(n)
	case a.DoubleValue != nil:
		return otlp.DoubleValue(*a.DoubleValue)
	case a.BytesValue != nil:
		b, _ := base64.StdEncoding.DecodeString(*a.BytesValue)
		return otlp.BytesValue(b)
	case a.ArrayValue != nil:
		vs := []otlp.Value{}
		for _, v := range a.ArrayValue.Values {
			vs = append(vs, v.value())
		}
		return otlp.ArrayValue(vs)
	case a.KvlistValue != nil:
		kvs := []otlp.KeyValue{}
		for _, kv := range a.KvlistValue.Values {
			kvs = append(kvs, otlp.KeyValue{Key: kv.Key, Value: kv.Value.value()})
		}
		return otlp.MapValue(kvs)
	}
	// The Collector writes an empty string value as {}.
	return otlp.StringValue("")
}

// got is one record as the Collector wrote it.
type got struct {
	resource map[string]otlp.Value
	scope    string
	rec      jsonRecord
	attrs    map[string]otlp.Value
}

// readOutput reads the complete lines of the Collector's file.
func readOutput(t *testing.T, path string) []got {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var all []got
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 256<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var req jsonRequest
		if err := json.Unmarshal(line, &req); err != nil {
			if !bytes.HasSuffix(data, []byte("\n")) && bytes.HasSuffix(data, line) {
				break // a line being written
			}
			t.Fatalf("the Collector's output: %v\n%s", err, line)
		}
		for _, rl := range req.ResourceLogs {
			res := map[string]otlp.Value{}
			for _, kv := range rl.Resource.Attributes {
				res[kv.Key] = kv.Value.value()
			}
			for _, sl := range rl.ScopeLogs {
				for _, r := range sl.LogRecords {
					g := got{resource: res, scope: sl.Scope.Name, rec: r, attrs: map[string]otlp.Value{}}
					for _, kv := range r.Attributes {
						g.attrs[kv.Key] = kv.Value.value()
					}
					all = append(all, g)
				}
			}
		}
	}
	return all
}

// waitOutput waits until the Collector's files hold n records.
func waitOutput(t *testing.T, n int, paths ...string) []got {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var all []got
		for _, p := range paths {
			all = append(all, readOutput(t, p)...)
		}
		if len(all) >= n {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Collector wrote %d records in a minute, want %d", len(all), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// source says what the records of a source must show beyond wants: the
// resource (process) and how their times are checked.
type source struct {
	pid  int64
	comm string
	// time checks a record's time; nil: it must be want.time.
	time func(seq int64, t uint64) bool
}

var fileSource = source{pid: testPID, comm: testComm}

// checkRecords checks that every record is one of wants, each at most
// once, with its fields and time intact; it returns the seqs seen.
func checkRecords(t *testing.T, all []got, wants []want, src source) map[int64]bool {
	t.Helper()
	seen := map[int64]bool{}
	host, _ := os.Hostname()
	for _, g := range all {
		seq := g.attrs["seq"].AsInt()
		if seq < 0 || seq >= int64(len(wants)) {
			t.Fatalf("a record with seq %d: %+v", seq, g.rec)
		}
		if seen[seq] {
			t.Errorf("seq %d delivered twice", seq)
		}
		seen[seq] = true
		w := wants[seq]
		ts, _ := strconv.ParseUint(g.rec.TimeUnixNano, 10, 64)
		timeOK := ts == w.time
		if src.time != nil {
			timeOK = src.time(seq, ts)
		}
		if g.rec.EventName != w.eventName || !timeOK || g.rec.SeverityNumber != w.severity || g.rec.SeverityText != w.sevText {
			t.Errorf("seq %d: event %q time %s severity %d %q; want %q %d %d %q", seq, g.rec.EventName, g.rec.TimeUnixNano,
				g.rec.SeverityNumber, g.rec.SeverityText, w.eventName, w.time, w.severity, w.sevText)
		}
		if g.rec.ObservedTimeUnixNano == "" {
			t.Errorf("seq %d: no observed time", seq)
		}
		for k, v := range w.attrs {
			if diff := cmp.Diff(v, g.attrs[k]); diff != "" {
				t.Errorf("seq %d: attribute %s (-want +got):\n%s", seq, k, diff)
			}
		}
		wantRes := map[string]otlp.Value{
			"host.name": otlp.StringValue(host), "process.pid": otlp.IntValue(src.pid),
			"process.executable.name": otlp.StringValue(src.comm), "service.name": otlp.StringValue("export-test"),
		}
		if diff := cmp.Diff(wantRes, g.resource); diff != "" {
			t.Errorf("seq %d: resource (-want +got):\n%s", seq, diff)
		}
		if t.Failed() {
			t.FailNow() // one record's differences are enough to read
		}
	}
	return seen
}

// summary is uetrace export's summary line.
type summary struct{ events, delivered, rejected, dropped int }

func parseSummary(t testing.TB, stderr string) summary {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(line, "[ uetrace export: ") {
			continue
		}
		var s summary
		i := strings.Index(line, " events in ")
		s.events, _ = strconv.Atoi(strings.TrimPrefix(line[:i], "[ uetrace export: "))
		rest := line[strings.Index(line, "): ")+3:]
		if _, err := fmt.Sscanf(rest, "%d delivered, %d rejected, %d dropped", &s.delivered, &s.rejected, &s.dropped); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		return s
	}
	t.Fatalf("no summary line in:\n%s", stderr)
	return summary{}
}

// TestCollectorFile sends a perf.data file with uetrace export to a real
// Collector, over gRPC and over HTTP, and finds every event in the
// Collector's file output, fields and times intact.
func TestCollectorFile(t *testing.T) {
	otelcol, uetrace := binaries(t)
	const n = 3000
	path, wants := testFile(t, n)
	for _, tc := range []struct{ proto, compression string }{{"grpc", "none"}, {"http", "none"}, {"grpc", "gzip"}, {"http", "gzip"}} {
		proto := tc.proto
		t.Run(proto+"-"+tc.compression, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "logs.json")
			c := startCollector(t, otelcol, freePort(t), freePort(t), out)
			port := c.grpcPort
			if proto == "http" {
				port = c.httpPort
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, uetrace, "export", "-i", path, "--protocol", proto, "--compression", tc.compression,
				"--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port), "--service-name", "export-test", "--batch-size", "256")
			cmd.WaitDelay = 5 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("uetrace export: %v\n%s\nCollector:\n%s", err, stderr.String(), c.log.String())
			}
			s := parseSummary(t, stderr.String())
			if s != (summary{events: n, delivered: n}) {
				t.Fatalf("summary %+v, want %d delivered of %d:\n%s", s, n, n, stderr.String())
			}
			all := waitOutput(t, n, out)
			seen := checkRecords(t, all, wants, fileSource)
			if len(all) != n || len(seen) != n {
				t.Errorf("the Collector wrote %d records (%d distinct), want %d", len(all), len(seen), n)
			}
		})
	}
}

// TestCollectorOutage stops the Collector in the middle of an export
// (SIGTERM: it shuts down cleanly) and starts it again on the same ports:
// the exporter retries, and in the end every record was either delivered
// — found once in the Collector's files, intact — or counted as dropped.
func TestCollectorOutage(t *testing.T) {
	otelcol, _ := binaries(t)
	const n = 3000
	_, wants := testFile(t, n)
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			out1, out2 := filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")
			gp, hp := freePort(t), freePort(t)
			c := startCollector(t, otelcol, gp, hp, out1)
			port := gp
			if p == otlp.HTTP {
				port = hp
			}
			var notes testutil.Buffer
			e, err := export.New(export.Options{
				Protocol: p, Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), ServiceName: "export-test",
				BatchSize: 100, QueueSize: 4, Senders: 1, BatchDelay: time.Hour,
				InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, RetryFor: 5 * time.Minute,
				Notify: func(msg string) { fmt.Fprintln(&notes, msg) },
			})
			if err != nil {
				t.Fatal(err)
			}
			// A third while the Collector runs, a batch at a time: all
			// delivered.
			for i := 0; i < n/3; i += 100 {
				addAll(t, e, wants[i:i+100])
				testutil.Wait(t, "a batch to be delivered", func() bool { return e.Stats().Delivered == uint64(i+100) })
			}
			c.stop(t)
			// A third while it is down: a batch retried, four queued, the
			// rest dropped for the full queue.
			addAll(t, e, wants[n/3:2*n/3])
			testutil.Wait(t, "retries", func() bool { return e.Stats().Retries >= 3 })
			startCollector(t, otelcol, gp, hp, out2)
			// A third after it is back.
			addAll(t, e, wants[2*n/3:])
			st := closeAndCheck(t, e, 2*time.Minute)
			t.Logf("%+v", st)
			if st.Received != n || st.Rejected != 0 {
				t.Errorf("stats %+v, want %d received, none rejected", st, n)
			}
			all := waitOutput(t, int(st.Delivered), out1, out2)
			seen := checkRecords(t, all, wants, fileSource)
			if uint64(len(all)) != st.Delivered || len(seen) != len(all) {
				t.Errorf("the Collector wrote %d records (%d distinct); the exporter counted %d delivered", len(all), len(seen), st.Delivered)
			}
			for i := range n / 3 {
				if !seen[int64(i)] {
					t.Fatalf("seq %d, sent before the outage, is not in the Collector's output", i)
				}
			}
			if !strings.Contains(notes.String(), "retrying") || !strings.Contains(notes.String(), "again") {
				t.Errorf("the exporter's notices do not tell of the outage and its end:\n%s", notes.String())
			}
		})
	}
}

// TestCLIInterruptCounts: uetrace export of a file to a Collector that is
// not there retries; Ctrl-C then stops it within --shutdown-timeout, every
// event counted as dropped, and the exit status says so.
func TestCLIInterruptCounts(t *testing.T) {
	_, uetrace := binaries(t)
	const n = 500
	path, _ := testFile(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "export", "-i", path, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		"--batch-size", "100", "--queue", "2", "--shutdown-timeout", "200ms")
	cmd.WaitDelay = 5 * time.Second
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	testutil.Wait(t, "export to retry", func() bool { return strings.Contains(stderr.String(), "retrying") })
	cmd.Process.Signal(syscall.SIGINT)
	err := <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("uetrace export: %v, want exit status 1\n%s", err, stderr.String())
	}
	s := parseSummary(t, stderr.String())
	if s.events == 0 || s.delivered != 0 || s.dropped != s.events {
		t.Errorf("summary %+v: want every event read counted as dropped\n%s", s, stderr.String())
	}
}

// TestCollectorPipe sends a pipe-mode stream of Linux's perf record (a
// kernel tracepoint, sched:sched_switch, with clock data) on standard
// input: every sample arrives, named, its fields typed, its wall-clock
// time the one perf script -F tod computes.
func TestCollectorPipe(t *testing.T) {
	otelcol, uetrace := binaries(t)
	const path = "../../perfdata/testdata/sched_switch_pipe.data"
	r, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	clock, ok := r.ClockData()
	if !ok {
		t.Fatal("the stream has no clock data")
	}
	var times []string
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if rec.Type == perfdata.RecordSample {
			times = append(times, strconv.FormatInt(clock.Wall(rec.Sample.Time), 10))
		}
	}
	r.Close()
	out := filepath.Join(t.TempDir(), "logs.json")
	c := startCollector(t, otelcol, freePort(t), freePort(t), out)
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "export", "-i", "-", "--protocol", "http",
		"--endpoint", fmt.Sprintf("http://127.0.0.1:%d", c.httpPort))
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("uetrace export: %v\n%s", err, stderr.String())
	}
	all := waitOutput(t, len(times), out)
	if len(all) != len(times) {
		t.Fatalf("the Collector wrote %d records, the stream has %d samples", len(all), len(times))
	}
	var got []string
	for _, g := range all {
		got = append(got, g.rec.TimeUnixNano)
		if g.rec.EventName != "sched:sched_switch" || g.attrs["prev_comm"].Kind != otlp.String || g.attrs["next_pid"].Kind != otlp.Int {
			t.Fatalf("record %+v: want sched:sched_switch with a string prev_comm and an int next_pid", g)
		}
	}
	slices.Sort(times)
	slices.Sort(got)
	if !slices.Equal(times, got) {
		t.Errorf("times differ from the stream's wall-clock times")
	}
}

// TestDocsCollectorConfig runs the Collector with the configuration
// docs/record-report.md gives a newcomer without one — built as that page
// builds it — and sends it a perf.data file as the page does: every event
// is delivered and in the file the configuration names. Only its port and
// its file are moved, to a free port and a temporary directory.
func TestDocsCollectorConfig(t *testing.T) {
	otelcol, uetrace := binaries(t)
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "record-report.md"))
	if err != nil {
		t.Fatal(err)
	}
	config := regexp.MustCompile("(?ms)^```yaml\n(# otelcol.yaml:.*?)^```$").FindSubmatch(page)
	if config == nil {
		t.Fatal("docs/record-report.md has no ```yaml block starting # otelcol.yaml:")
	}
	for _, want := range []string{`go build -C otelcol/distribution -o "$PWD/otelcol" .`, "./otelcol --config otelcol.yaml &",
		"uetrace export -i perf.data --endpoint http://localhost:4317"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("docs/record-report.md no longer says %q: this test runs what it says", want)
		}
	}
	port := freePort(t)
	out := filepath.Join(t.TempDir(), "logs.json")
	cfg := string(config[1])
	for old, new := range map[string]string{"127.0.0.1:4317": fmt.Sprintf("127.0.0.1:%d", port), "{path: logs.json}": fmt.Sprintf("{path: %q}", out)} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("the configuration has no %q to move:\n%s", old, cfg)
		}
		cfg = strings.ReplaceAll(cfg, old, new)
	}
	runCollector(t, otelcol, cfg, port)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, uetrace, "export", "-i", filepath.Join("..", "..", "perfdata", "testdata", "sched_switch.data"),
		"--endpoint", fmt.Sprintf("http://localhost:%d", port))
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("uetrace export: %v\n%s", err, stderr.String())
	}
	s := parseSummary(t, stderr.String())
	if s.events == 0 || s.delivered != s.events {
		t.Fatalf("summary %+v, want every event delivered:\n%s", s, stderr.String())
	}
	testutil.Wait(t, "the Collector to write every record to its file", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte(`"observedTimeUnixNano"`)) == s.events
	})
}
