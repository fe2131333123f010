package export_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// The fleet's topology (docs/opentelemetry.md): each host runs the uetrace
// daemon, programs writing user events, and either `uetrace export` or a
// Collector with the userevents receiver, sending OTLP to one gateway
// Collector, which writes what it gets (here to a file).

const (
	fleetHosts   = 3    // a and b run uetrace export (gRPC, HTTP); c a Collector
	fleetPerHost = 6000 // events each host's writer writes
	fleetRate    = 2000 // a second, each
	fleetBatch   = 256  // records a request carries, at every sender
	fleetSenders = 2    // requests in flight at once, at every sender
	fleetEvent   = "fleet_ev u32 host; u64 seq"
	fleetWait    = 3 * time.Minute
)

// gatewayConfig is the gateway: the tests' Collector (collectorConfig),
// its file written without a buffer (rotation set): a record the gateway
// answered for is in the file, even if the gateway is killed the next
// moment.
var gatewayConfig = strings.Replace(collectorConfig, "    flush_interval: 50ms\n", "    rotation:\n      max_megabytes: 1024\n", 1)

// hostCollectorConfig is a host's Collector: the userevents receiver on
// the host's daemon, to the gateway over OTLP/gRPC, batched and retried.
const hostCollectorConfig = telemetryConfig + `  pipelines:
    logs:
      receivers: [userevents]
      exporters: [otlp_grpc]
receivers:
  userevents:
    source: daemon
    socket: %[2]s
    events: [fleet_ev]
    service_name: %[3]s
    batch_delay: 50ms
exporters:
  otlp_grpc:
    endpoint: 127.0.0.1:%[4]d
    tls:
      insecure: true
    sending_queue:
      num_consumers: %[5]d
      queue_size: 1000
      batch:
        flush_timeout: 50ms
        min_size: %[6]d
        max_size: %[6]d
    retry_on_failure:
      initial_interval: 50ms
      max_interval: 500ms
      max_elapsed_time: 5m
`

// fleetHost is one simulated host.
type fleetHost struct {
	name    string
	id      int
	sock    string
	write   func(seq uint64) error
	enabled func() bool
	written atomic.Int64
	// uetrace export's, or the host Collector's.
	export   *exec.Cmd
	stderr   *testutil.Buffer
	done     chan struct{} // closed when export exited, with err
	err      error
	col      *sink
	colStats map[string]uint64
}

// TestFleet runs the usual topology on loopback — three hosts, each a
// uetrace daemon with a writer of its own and a sender to one gateway
// Collector (uetrace export over gRPC, over HTTP, and a Collector with the
// userevents receiver and the OTLP exporter) — and kills the gateway
// (SIGKILL) a third of the way through and starts it again two thirds of
// the way. The senders batch and retry: at the end every event written is
// in the gateway's file or counted as not delivered where it was dropped
// (by the writer's ring, export, the receiver or the Collector's
// exporter). A batch the gateway wrote but had not answered for when it
// was killed is sent again — OTLP is at-least-once — so a record may be
// there twice; at most the batches in flight then: a batch of each sender
// of each host.
func TestFleet(t *testing.T) {
	otelcol, uetrace := binaries(t)
	if !strings.Contains(gatewayConfig, "rotation:") {
		t.Fatal("collectorConfig's file exporter has no flush_interval of 50ms to replace: gatewayConfig is not the gateway's")
	}
	// The gateway's file, and its file once started again.
	dir := t.TempDir()
	out := []string{filepath.Join(dir, "gateway.json"), filepath.Join(dir, "gateway-again.json")}
	gp, hp := freePort(t), freePort(t)
	gateway := runCollector(t, otelcol, fmt.Sprintf(gatewayConfig, gp, hp, out[0]), gp, hp)

	hosts := make([]*fleetHost, fleetHosts)
	for i := range hosts {
		h := &fleetHost{name: fmt.Sprintf("host-%c", 'a'+i), id: i}
		hosts[i] = h
		h.sock, _ = startDaemon(t, uetrace)
		f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: h.sock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		ev, err := f.Register(fleetEvent, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ev.Close() })
		payload := make([]byte, 12)
		ne.PutUint32(payload, uint32(i))
		h.write = func(seq uint64) error {
			ne.PutUint64(payload[4:], seq)
			return ev.Write(payload)
		}
		h.enabled = ev.Enabled
		switch i {
		case 0, 1:
			proto, port := "grpc", gp
			if i == 1 {
				proto, port = "http", hp
			}
			h.stderr = &testutil.Buffer{}
			h.export = exec.Command(uetrace, "--backend", "daemon", "--socket", h.sock, "export", "-e", "fleet_ev",
				"--protocol", proto, "--endpoint", fmt.Sprintf("http://127.0.0.1:%d", port), "--service-name", h.name,
				"--batch-size", strconv.Itoa(fleetBatch), "--batch-delay", "50ms", "--senders", strconv.Itoa(fleetSenders),
				"--queue", "1000", "--initial-backoff", "50ms", "--max-backoff", "500ms", "--retry-for", "5m", "--shutdown-timeout", "2m")
			h.export.Stderr = h.stderr
			if err := h.export.Start(); err != nil {
				t.Fatal(err)
			}
			h.done = make(chan struct{})
			go func() { h.err = h.export.Wait(); close(h.done) }()
			t.Cleanup(func() {
				select {
				case <-h.done:
				default:
					h.export.Process.Kill()
					<-h.done
				}
			})
		default:
			mp := freePort(t)
			cfg := fmt.Sprintf(hostCollectorConfig, mp, h.sock, h.name, gp, fleetSenders, fleetBatch)
			h.col = &sink{collector: runCollector(t, otelcol, cfg, mp), metricsPort: mp}
		}
	}
	for _, h := range hosts {
		testutil.Wait(t, h.name+"'s sender to enable the event", h.enabled)
	}

	// The writers, paced; the gateway killed and started again by their
	// progress.
	var writers sync.WaitGroup
	for _, h := range hosts {
		writers.Go(func() {
			start := time.Now()
			for seq := range fleetPerHost {
				if d := time.Until(start.Add(time.Duration(seq) * time.Second / fleetRate)); d > 0 {
					time.Sleep(d)
				}
				if err := h.write(uint64(seq)); err != nil {
					t.Errorf("%s: write %d: %v", h.name, seq, err)
					return
				}
				h.written.Store(int64(seq + 1))
			}
		})
	}
	writtenAll := func(n int64) func() bool {
		return func() bool {
			for _, h := range hosts {
				if h.written.Load() < n {
					return false
				}
			}
			return true
		}
	}
	testutil.Wait(t, "a third of the events to be written", writtenAll(fleetPerHost/3))
	gateway.cmd.Process.Kill()
	<-gateway.exited
	t.Logf("gateway killed with %d hosts' records in its file", len(readFleet(t, out...)))
	testutil.Wait(t, "two thirds of the events to be written", writtenAll(2*fleetPerHost/3))
	waitFree(t, gp, hp)
	runCollector(t, otelcol, fmt.Sprintf(gatewayConfig, gp, hp, out[1]), gp, hp)
	writers.Wait()

	// Every host's sender has sent everything or given up on it: the
	// gateway has every record of the host, or has stopped getting any.
	waitSettled(t, "the gateway to have every record", out, func(got map[int]map[uint64]int) bool {
		for _, h := range hosts {
			if int64(len(got[h.id])) < h.written.Load() {
				return false
			}
		}
		return true
	})
	for _, h := range hosts {
		if h.export != nil {
			h.export.Process.Signal(syscall.SIGINT)
			<-h.done
			if h.err != nil {
				t.Logf("%s: uetrace export: %v", h.name, h.err)
			}
		} else {
			accepted, refused := h.col.counts(t)
			h.colStats = telemetry(t, h.col.metricsPort)
			h.colStats["accepted"], h.colStats["refused"] = accepted, refused
			h.col.stop(t)
			h.colStats["lost"] = receiverLost(h.col.log.String())
		}
	}

	got := readFleet(t, out...)
	// What each host wrote while the gateway was down went to the gateway
	// started again: queued and retried, not lost.
	again := readFleet(t, out[1])
	for _, h := range hosts {
		held := 0
		for seq := range again[h.id] {
			if seq < 2*fleetPerHost/3 {
				held++
			}
		}
		if held == 0 {
			t.Errorf("%s: the gateway started again has none of what was written before: nothing was held through the outage", h.name)
		}
	}
	dups := 0
	for _, h := range hosts {
		seen := got[h.id]
		missing := 0
		written := int(h.written.Load())
		for seq := range written {
			switch n := seen[uint64(seq)]; {
			case n == 0:
				missing++
			case n > 1:
				dups += n - 1
			}
		}
		for seq := range seen {
			if seq >= uint64(written) {
				t.Errorf("%s: the gateway has seq %d, which was not written", h.name, seq)
			}
		}
		// What the host's sender says it did not deliver: export's
		// summary, or the Collector's receiver and exporter counts.
		var notDelivered, lost uint64
		if h.export != nil {
			s := parseSummary(t, h.stderr.String())
			lost = exportLost(h.stderr.String())
			notDelivered = uint64(s.rejected+s.dropped) + lost
			if uint64(s.events)+lost != uint64(written) || s.delivered+s.rejected+s.dropped != s.events {
				t.Errorf("%s: %d written; export's summary %+v, %d lost before it:\n%s", h.name, written, s, lost, h.stderr.String())
			}
			if uint64(len(seen)) < uint64(s.delivered) {
				t.Errorf("%s: export delivered %d, the gateway has %d of them", h.name, s.delivered, len(seen))
			}
			t.Logf("%s: %d written, %d delivered, %d dropped, %d lost; the gateway has %d (%d missing)",
				h.name, written, s.delivered, s.dropped, lost, len(seen), missing)
		} else {
			st := h.colStats
			lost = st["lost"]
			failed := st["otelcol_exporter_send_failed_log_records"] + st["otelcol_exporter_enqueue_failed_log_records"]
			notDelivered = st["refused"] + lost + failed
			if st["accepted"]+st["refused"]+lost != uint64(written) {
				t.Errorf("%s: %d written; the receiver accepted %d, refused %d, lost %d", h.name, written, st["accepted"], st["refused"], lost)
			}
			if st["otelcol_exporter_sent_log_records"]+failed != st["accepted"] {
				t.Errorf("%s: the receiver accepted %d; the exporter sent %d and failed %d", h.name, st["accepted"], st["otelcol_exporter_sent_log_records"], failed)
			}
			t.Logf("%s: %d written, %d sent, %d failed, %d lost; the gateway has %d (%d missing)",
				h.name, written, st["otelcol_exporter_sent_log_records"], failed, lost, len(seen), missing)
		}
		if uint64(missing) > notDelivered || uint64(missing) < lost {
			t.Errorf("%s: %d records are not in the gateway's file; %d were counted not delivered, %d of them lost before the sender", h.name, missing, notDelivered, lost)
		}
	}
	if bound := fleetHosts * fleetSenders * fleetBatch; dups > bound {
		t.Errorf("%d records are in the gateway's file twice: more than the %d of the batches in flight when it was killed", dups, bound)
	}
	t.Logf("%d records twice (sent again after the gateway was killed before it answered)", dups)
}

// fleetRecord finds a fleet_ev record's host and seq in the file
// exporter's JSON: its fields are attributes in the event's order.
var fleetRecord = regexp.MustCompile(`\{"key":"host","value":\{"intValue":"(\d+)"\}\},\{"key":"seq","value":\{"intValue":"(\d+)"\}\}`)

// readFleet counts the gateway's records of each host by seq.
func readFleet(t *testing.T, paths ...string) map[int]map[uint64]int {
	t.Helper()
	got := map[int]map[uint64]int{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, m := range fleetRecord.FindAllSubmatch(b, -1) {
			host, _ := strconv.Atoi(string(m[1]))
			seq, _ := strconv.ParseUint(string(m[2]), 10, 64)
			if got[host] == nil {
				got[host] = map[uint64]int{}
			}
			got[host][seq]++
		}
	}
	return got
}

// waitSettled waits until cond holds of the gateway's records, or they
// stop changing for 30 s — what a sender dropped is counted, not waited
// for — or fleetWait has passed.
func waitSettled(t *testing.T, what string, paths []string, cond func(map[int]map[uint64]int) bool) {
	t.Helper()
	deadline := time.Now().Add(fleetWait)
	last, since := -1, time.Now()
	for {
		got := readFleet(t, paths...)
		if cond(got) {
			return
		}
		n := 0
		for _, seqs := range got {
			for _, c := range seqs {
				n += c
			}
		}
		if n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) > 30*time.Second || time.Now().After(deadline) {
			t.Logf("gave up waiting for %s: %d records in the file", what, n)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFree waits until nothing listens on the ports: a killed Collector's
// sockets are closed by the kernel as it exits.
func waitFree(t *testing.T, ports ...int) {
	t.Helper()
	for _, p := range ports {
		testutil.Wait(t, fmt.Sprintf("port %d to be free", p), func() bool {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second)
			if err == nil {
				c.Close()
				return false
			}
			return true
		})
	}
}
