package record_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/realtime"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// The end-to-end path of issue 15: one producer process writes 64-byte
// payloads through the daemon backend's ring transport as fast as it can;
// the daemon drains its ring into a session that delivers into the
// session's ring; a recording takes them from there into a perf.data
// file. Every record the producer wrote must be accounted for, exactly:
//
//	written = samples in the file + records lost
//
// written being the producer's successful Write calls, and lost the sum of
// every place that counts a drop:
//
//   - the producer's ring had no room (Event.Dropped in the producer: those
//     records never reach the daemon, and today nothing downstream counts
//     them; once the daemon reports them to sessions they are in the next
//     item instead, and check accepts that sum, exact too);
//   - the session had no room (PERF_RECORD_LOST records in the file, with
//     what the daemon handed over at the end — record's Stats.Lost, which
//     the test compares with the file's LOST records);
//   - the daemon refused a record (RingStats.Rejected: must be 0, the
//     producer validated) or found its event disabled (Disabled: must be
//     0, the session is attached throughout).

// e2eProduceEnv makes the test binary the producer: "socket,count,rate"
// (rate: events/s; 0: as fast as it can).
const e2eProduceEnv = "UETRACE_E2E_PRODUCE"

// e2eEvent is the producer's event: 34 bytes of fields, as the event of
// userevents' DaemonRingWrite benchmark and of benchmarks/lttng's LTTng-UST
// tracepoint (u32 u64 u32 char[16] u16), so that their rates compare
// records of one size; its u64 comes first, the sequence number.
const e2eEvent = "e2e_bench u64 seq; u32 a; u32 c; char d[16]; u16 e"

func init() {
	if spec := os.Getenv(e2eProduceEnv); spec != "" {
		os.Exit(e2eProduce(spec))
	}
	if sock := os.Getenv(e2eServeEnv); sock != "" {
		os.Exit(e2eServe(sock))
	}
}

// e2eProduce registers the event on the daemon at the socket with the ring
// transport, says "ready", waits for the recording to enable it, writes
// count records as fast as it can (or paced at rate) and says "done
// <written> <dropped> <nanoseconds> <cpu nanoseconds>" — its writing's
// wall and CPU time; it exits when stdin closes.
func e2eProduce(spec string) int {
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "producer: %q is not socket,count,rate\n", spec)
		return 2
	}
	sock := parts[0]
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		return 2
	}
	rate, err := strconv.ParseFloat(parts[2], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		return 2
	}
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock, Transport: userevents.RingTransport})
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		return 1
	}
	defer f.Close()
	if f.Transport() != userevents.RingTransport {
		fmt.Fprintln(os.Stderr, "producer: no ring:", f.RingError())
		return 1
	}
	ev, err := f.Register(e2eEvent, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		return 1
	}
	fmt.Println("ready")
	for !ev.Enabled() {
		time.Sleep(10 * time.Microsecond)
	}
	payload := make([]byte, 34)
	copy(payload[16:], "0123456789abcde")
	var written uint64
	start, cpu0 := time.Now(), testutil.CPUTime()
	for i := range n {
		binary.NativeEndian.PutUint64(payload, uint64(i))
		if err := ev.Write(payload); err != nil {
			fmt.Fprintln(os.Stderr, "producer: write:", err)
			return 1
		}
		written++
		if rate > 0 && i%1000 == 999 {
			if ahead := time.Duration(float64(i+1)/rate*1e9) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	elapsed, cpu := time.Since(start), testutil.CPUTime()-cpu0
	// Everything written is delivered, every drop told: the recording
	// that stops now has each write as a sample or a lost count.
	if err := f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "producer: sync:", err)
		return 1
	}
	fmt.Printf("done %d %d %d %d\n", written, ev.Dropped(), elapsed.Nanoseconds(), cpu.Nanoseconds())
	var b [1]byte
	os.Stdin.Read(b[:]) // until the test closes it
	return 0
}

// e2eResult is one end-to-end run.
type e2eResult struct {
	written, producerDropped uint64 // the producers' counts, summed
	samples, lost, tooLarge  uint64 // the recording's Stats
	fileSamples, fileLost    uint64 // what the file holds
	handOvers, handed        uint64 // ring sets handed to the recording, records read from them
	rings                    daemon.RingStats
	elapsed                  time.Duration // from the recording's start to its end
	produce                  time.Duration // the producers' writing: the longest
	producerCPU              time.Duration // the producers' CPU while writing, summed
	// cpu is the CPU time the daemon and the recording spent from the
	// recording's start to its end (a daemon process: from its start of
	// serving to its close): on a machine shared with other work, the
	// cost per record that the wall clock hides. daemonCPU is the daemon
	// process's part, with daemonProcess.
	cpu, daemonCPU time.Duration
}

// e2eServeEnv makes the test binary the daemon: the socket's path. It
// says "ready", serves until stdin closes, then closes and says the ring
// counts: "rings <delivered> <rejected> <disabled> <torn> <discarded>".
const e2eServeEnv = "UETRACE_E2E_SERVE"

func e2eServe(sock string) int {
	ln, err := daemon.Listen(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "daemon:", err)
		return 1
	}
	srv := daemon.New(daemon.Config{
		Logger:    slog.New(slog.DiscardHandler),
		Subsystem: subsys.New(subsys.Options{}),
		Cred:      daemontest.Perfmon,
	})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// Its CPU from here to its close: what serving costs, its start-up
	// left out. $UETRACE_E2E_DAEMON_PROFILE names a file for its CPU
	// profile meanwhile.
	cpu0 := testutil.CPUTime()
	if path := os.Getenv("UETRACE_E2E_DAEMON_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer func() {
				pprof.StopCPUProfile()
				f.Close()
			}()
		}
	}
	fmt.Println("ready")
	var b [1]byte
	os.Stdin.Read(b[:])
	srv.Close()
	<-served
	st := srv.RingStats()
	fmt.Printf("rings %d %d %d %d %d %d %d %d %d\n", st.Delivered, st.Rejected, st.Disabled, st.Torn, st.Discarded,
		(testutil.CPUTime() - cpu0).Nanoseconds(), st.Sleeps, st.Woken, st.Timeouts)
	return 0
}

// e2eConfig is one end-to-end setup.
type e2eConfig struct {
	count    int // records the producers write, together
	bufferKB int // the session's streams (or ring, or buffer), together
	// producers is how many producer processes write, each count/producers
	// records at rate/producers (0: one).
	producers int
	// ringKB is each of a producer's rings' KiB (UETRACE_RING_KB; 0: the
	// default share).
	ringKB int
	socket bool // read the session over the socket, as before session rings
	// noHandOver keeps every record on the daemon's path: no producer's
	// ring set is handed to the recording (record.Options.NoHandOver).
	noHandOver bool
	// daemonProcess runs the daemon in a process of its own, as `uetrace
	// serve`; otherwise it runs in this one, beside the recording.
	daemonProcess bool
	// rate paces the producer, events/s (0: as fast as it can): what the
	// rest of the pipeline sustains when the producer does not take a
	// core of the two for itself.
	rate float64
}

// child starts the test binary with env set and returns its stdin and
// stdout, having read its "ready".
func child(tb testing.TB, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	// Normal, when the recording runs real-time (-zl.realtime): the
	// daemon and the producers are other programs.
	start := cmd.Start
	if *zlRealtime > 0 {
		start = func() error { return realtime.StartNormal(cmd) }
	}
	if err := start(); err != nil {
		tb.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	if s, err := lines.ReadString('\n'); err != nil || s != "ready\n" {
		stdin.Close()
		cmd.Wait()
		tb.Fatalf("%s: %q, %v", env, s, err)
	}
	return cmd, stdin, lines
}

// e2eRun runs the pipeline once, the recording into a file in a temporary
// directory.
func e2eRun(tb testing.TB, cfg e2eConfig) e2eResult {
	tb.Helper()
	dir := tb.TempDir()
	sock := filepath.Join(dir, "uetrace.sock")
	var srv *daemon.Server
	var dcmd *exec.Cmd
	var dstdin io.WriteCloser
	var dout *bufio.Reader
	if cfg.daemonProcess {
		dcmd, dstdin, dout = child(tb, e2eServeEnv+"="+sock)
		defer func() {
			dstdin.Close()
			dcmd.Wait()
		}()
	} else {
		ln, err := daemon.Listen(sock)
		if err != nil {
			tb.Fatal(err)
		}
		srv = daemon.New(daemon.Config{
			Logger:    slog.New(slog.DiscardHandler),
			Subsystem: subsys.New(subsys.Options{}),
			Cred:      daemontest.Perfmon,
		})
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			srv.Close()
			<-served
		}()
	}

	np := max(cfg.producers, 1)
	type producer struct {
		stdin io.WriteCloser
		lines *bufio.Reader
	}
	var prods []producer
	for range np {
		env := []string{fmt.Sprintf("%s=%s,%d,%g", e2eProduceEnv, sock, cfg.count/np, cfg.rate/float64(np))}
		if cfg.ringKB > 0 {
			env = append(env, fmt.Sprintf("%s=%d", userevents.RingKBEnv, cfg.ringKB))
		}
		cmd, stdin, lines := child(tb, env...)
		defer func() {
			stdin.Close()
			cmd.Wait()
		}()
		prods = append(prods, producer{stdin, lines})
	}

	c, err := client.Dial(sock, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(dir, "perf.data")
	out, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()

	start, cpu0 := time.Now(), testutil.CPUTime()
	rec, err := record.Daemon(c, out, record.Options{Events: []string{"e2e_bench"}, NoFollow: true, BufferKB: cfg.bufferKB, SessionSocket: cfg.socket, NoHandOver: cfg.noHandOver})
	if err != nil {
		tb.Fatal(err)
	}
	if ok, err := rec.SharedMemory(); ok == cfg.socket {
		tb.Fatalf("SharedMemory() = %v, %v", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()

	var res e2eResult
	for _, p := range prods {
		s, err := p.lines.ReadString('\n')
		if err != nil {
			cancel()
			tb.Fatalf("producer: %v", err)
		}
		var written, dropped uint64
		var ns, cpuNs int64
		if _, err := fmt.Sscanf(s, "done %d %d %d %d", &written, &dropped, &ns, &cpuNs); err != nil {
			cancel()
			tb.Fatalf("producer said %q: %v", s, err)
		}
		res.written += written
		res.producerDropped += dropped
		res.produce = max(res.produce, time.Duration(ns))
		res.producerCPU += time.Duration(cpuNs)
	}
	// Stopping syncs with the daemon: everything the producer published
	// is delivered to the session first, then taken into the file.
	cancel()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	res.elapsed, res.cpu = time.Since(start), testutil.CPUTime()-cpu0
	st := rec.Stats()
	res.samples, res.lost, res.tooLarge = st.Samples, st.Lost, st.TooLarge
	res.handOvers, res.handed = st.HandOvers, st.HandedRecords
	if srv != nil {
		res.rings = srv.RingStats()
	} else {
		// The daemon closes every connection, releasing the producer's
		// ring, and says the counts.
		dstdin.Close()
		s, err := dout.ReadString('\n')
		r := &res.rings
		var dns int64
		if _, serr := fmt.Sscanf(s, "rings %d %d %d %d %d %d %d %d %d", &r.Delivered, &r.Rejected, &r.Disabled, &r.Torn, &r.Discarded,
			&dns, &r.Sleeps, &r.Woken, &r.Timeouts); err != nil || serr != nil {
			tb.Fatalf("daemon said %q: %v, %v", s, err, serr)
		}
		if err := dcmd.Wait(); err != nil {
			tb.Fatalf("daemon: %v", err)
		}
		res.daemonCPU = time.Duration(dns)
		res.cpu += res.daemonCPU
	}

	f, err := perfdata.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	// No sequence number comes twice.
	seen := map[uint32][]uint64{} // by pid: a bit per sequence number
	for {
		r, err := f.Next()
		if err != nil {
			break
		}
		switch r.Type {
		case perfdata.RecordSample:
			res.fileSamples++
			raw := r.Sample.Raw
			if len(raw) < 16 {
				tb.Fatalf("sample at %d: raw data of %d bytes", r.Offset, len(raw))
			}
			seq := binary.NativeEndian.Uint64(raw[8:])
			bits := seen[r.Sample.PID]
			for uint64(len(bits)) <= seq/64 {
				bits = append(bits, 0)
			}
			if bits[seq/64]&(1<<(seq%64)) != 0 {
				tb.Fatalf("sample at %d: seq %d of pid %d twice", r.Offset, seq, r.Sample.PID)
			}
			bits[seq/64] |= 1 << (seq % 64)
			seen[r.Sample.PID] = bits
		case perfdata.RecordLost:
			res.fileLost += r.Lost
		}
	}
	// Read as perf's readers read it — in time order, round by round
	// (PERF_RECORD_FINISHED_ROUND) — each producer's sequence numbers
	// increase: its one writing thread stamps each record after the one
	// before. (The file's own order is not time order: the streams, and
	// the outputs of the readers of handed ring sets, are taken a run at
	// a time, and a record lies in the ring of the CPU its producer read
	// before reserving while its CPU field is read again when it is
	// stamped.)
	checkTimeOrder(tb, path)
	return res
}

// checkTimeOrder reads the file at path as perf's readers do — in time
// order, round by round (perfdata.Session) — and fails tb unless each
// process's sequence numbers (a sample's u64 after its 8-byte common
// fields) come in the order they were written: its one writing thread
// stamps each record after the one before.
func checkTimeOrder(tb testing.TB, path string) {
	tb.Helper()
	sf, err := perfdata.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer sf.Close()
	sess, err := perfdata.NewSession(sf, nil)
	if err != nil {
		tb.Fatal(err)
	}
	next := map[uint32]uint64{} // by pid
	for {
		smp, err := sess.Next()
		if err != nil {
			break
		}
		if len(smp.Raw) < 16 {
			continue
		}
		seq := binary.NativeEndian.Uint64(smp.Raw[8:])
		if seq < next[smp.PID] {
			tb.Fatalf("in time order, pid %d's seq %d (time %d, CPU %d) after %d", smp.PID, seq, smp.Time, smp.CPU, next[smp.PID]-1)
		}
		next[smp.PID] = seq + 1
	}
}

// check is the exact accounting; it returns the lost counts it added up.
func (r e2eResult) check(tb testing.TB) {
	tb.Helper()
	if r.fileSamples != r.samples || r.fileLost != r.lost {
		tb.Errorf("the file holds %d samples and %d lost; the recording counted %d and %d", r.fileSamples, r.fileLost, r.samples, r.lost)
	}
	if r.rings.Rejected != 0 || r.rings.Disabled != 0 || r.rings.Torn != 0 || r.rings.Discarded != 0 {
		tb.Errorf("the daemon refused records the producer wrote: %+v", r.rings)
	}
	if r.tooLarge != 0 {
		tb.Errorf("%d records too large: the payload is 64 bytes", r.tooLarge)
	}
	// The producer ring's drops reach the session in band (loss records,
	// wire.LostIndex): they are in the recording's lost count, with the
	// session's own.
	if r.samples+r.lost != r.written || r.lost < r.producerDropped {
		tb.Errorf("written %d != recorded %d + lost %d (of which the producer's ring dropped %d)",
			r.written, r.samples, r.lost, r.producerDropped)
	}
	// What the daemon took from the producer's ring went to the session:
	// recorded, or lost there.
	delivered := r.samples + r.lost - r.producerDropped
	if r.rings.Delivered != delivered {
		tb.Errorf("the daemon delivered %d records from the producer's ring; the recording has %d recorded or lost in the session",
			r.rings.Delivered, delivered)
	}
}

// TestEndToEndAccounting is the benchmark's check at a modest count: a
// producer process, the daemon, a recording through the session's ring;
// every record written is in the file or counted lost. The session's ring
// is small, so that it does overflow on a busy machine, and the losses must
// add up all the same.
func TestEndToEndAccounting(t *testing.T) {
	for _, cfg := range []e2eConfig{
		{count: 200_000, bufferKB: 16 << 10},
		{count: 200_000, bufferKB: 16},
		{count: 200_000, bufferKB: 16 << 10, daemonProcess: true},
		{count: 200_000, bufferKB: 16 << 10, daemonProcess: true, producers: 2},
	} {
		name := fmt.Sprintf("ring=%dKiB", cfg.bufferKB)
		if cfg.daemonProcess {
			name += "/daemon=process"
		}
		if cfg.producers > 1 {
			name += fmt.Sprintf("/producers=%d", cfg.producers)
		}
		t.Run(name, func(t *testing.T) {
			r := e2eRun(t, cfg)
			r.check(t)
			t.Logf("written %d: recorded %d, lost in the session %d, dropped in the producer's ring %d; %v, %v CPU",
				r.written, r.samples, r.lost, r.producerDropped, r.elapsed, r.cpu)
		})
	}
}

// BenchmarkEndToEnd is issue 15's end-to-end figure: producer processes
// writing 64-byte payloads through the ring transport as fast as they can
// (or paced) → the daemon (this process, or one of its own) → a recording
// through the session's streams (this process) → perf.data. events/s is
// samples in the file per second from the recording's start to its end
// (written/s: the producers' writes per second of their own loops);
// lost/op and dropped/op are per record written, in the session and in
// the producers' rings; cpu-ns/delivered is the daemon's and the
// recording's CPU per record the daemon took from the producers' rings,
// daemon-ns/delivered the daemon process's part, producer-ns/write the
// producers'. The accounting is exact in every run. The zero-loss rate,
// the figure, is BenchmarkZeroLoss's.
func BenchmarkEndToEnd(b *testing.B) {
	for _, cfg := range []struct {
		name string
		e2eConfig
	}{
		{"session=streams", e2eConfig{}},
		{"session=streams/daemon=process", e2eConfig{daemonProcess: true}},
		{"session=streams/daemon=process/producers=2", e2eConfig{daemonProcess: true, producers: 2}},
		{"session=socket", e2eConfig{socket: true}}, // the path before session rings, for comparison
		{"session=streams/daemon=process/paced=1M", e2eConfig{daemonProcess: true, rate: 1e6}},
		{"session=streams/daemon=process/paced=2M", e2eConfig{daemonProcess: true, rate: 2e6}},
		{"session=streams/daemon=process/producers=2/paced=2M", e2eConfig{daemonProcess: true, producers: 2, rate: 2e6}},
	} {
		cfg.count, cfg.bufferKB = 2_000_000, 16<<10
		b.Run(cfg.name, func(b *testing.B) { benchEndToEnd(b, cfg.e2eConfig) })
	}
}

func benchEndToEnd(b *testing.B, cfg e2eConfig) {
	var samples, written, lost, dropped uint64
	var elapsed, produce, cpu, daemonCPU, producerCPU time.Duration
	var sleeps, woken uint64
	b.ReportAllocs()
	for b.Loop() {
		r := e2eRun(b, cfg)
		r.check(b)
		samples += r.samples
		written += r.written
		lost += r.lost
		dropped += r.producerDropped
		elapsed += r.elapsed
		produce += r.produce
		cpu += r.cpu
		daemonCPU += r.daemonCPU
		producerCPU += r.producerCPU
		sleeps += r.rings.Sleeps
		woken += r.rings.Woken
	}
	b.ReportMetric(float64(samples)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(written)/produce.Seconds(), "written/s")
	b.ReportMetric(float64(lost)/float64(written), "lost/op")
	b.ReportMetric(float64(dropped)/float64(written), "dropped/op")
	// Per record the daemon took from the producer's ring: the producer
	// ring's drops, in the lost count, cost the daemon nothing.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(samples+lost-dropped), "cpu-ns/delivered")
	b.ReportMetric(float64(producerCPU.Nanoseconds())/float64(written), "producer-ns/write")
	if cfg.daemonProcess {
		b.ReportMetric(float64(daemonCPU.Nanoseconds())/float64(samples+lost-dropped), "daemon-ns/delivered")
		b.ReportMetric(float64(sleeps)/float64(b.N), "sleeps/run")
		b.ReportMetric(float64(woken)/float64(b.N), "woken/run")
	}
}
