package ehotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// newExporter is NewExporter on e's File, shut down when the test ends.
func newExporter(t testing.TB, e *env, name string) *ehotel.Exporter {
	t.Helper()
	x, err := ehotel.NewExporter(name, &ehotel.Options{File: e.f})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Shutdown(context.Background()) })
	return x
}

// records makes n SDK records of severity INFO with attributes g and i.
func records(t testing.TB, g, n int) []sdklog.Record {
	t.Helper()
	out := make([]sdklog.Record, n)
	for i := range out {
		var lr log.Record
		lr.SetSeverity(log.SeverityInfo)
		lr.SetBody(attribute.StringValue("concurrent"))
		lr.AddAttributes(attribute.Int("g", g), attribute.Int("i", i))
		out[i] = sdkRecord(t, context.Background(), lr)
	}
	return out
}

// partC returns the g and i attributes of a decoded event.
func partC(t testing.TB, js string) (g, i int) {
	t.Helper()
	var ev struct {
		PartC struct{ G, I int }
	}
	if err := json.Unmarshal([]byte(js), &ev); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	return ev.PartC.G, ev.PartC.I
}

// TestExporterConcurrent exports from many goroutines at once — more than
// the SDK asks (it never calls Export concurrently) — with ForceFlush
// alongside, and reads back every record exactly once (run it with -race).
func TestExporterConcurrent(t *testing.T) {
	const goroutines, batches, perBatch = 8, 25, 4
	e := newEnv(t)
	x := newExporter(t, e, "ConcProv")
	ss := e.attach(t, "user_events:ConcProv_*", x.Tracepoint(log.SeverityInfo))
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*(batches+1))
	for g := range goroutines {
		recs := records(t, g, batches*perBatch)
		wg.Go(func() {
			for b := range batches {
				if err := x.Export(context.Background(), recs[b*perBatch:(b+1)*perBatch]); err != nil {
					errs <- err
				}
			}
		})
		wg.Go(func() {
			if err := x.ForceFlush(context.Background()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[[2]int]int{}
	for _, r := range readBack(t, ss, goroutines*batches*perBatch) {
		g, i := partC(t, r.json)
		seen[[2]int{g, i}]++
	}
	for g := range goroutines {
		for i := range batches * perBatch {
			if n := seen[[2]int{g, i}]; n != 1 {
				t.Errorf("record g=%d i=%d read %d times", g, i, n)
			}
		}
	}
	if lost := ss.Lost(); lost != 0 {
		t.Errorf("the session lost %d records", lost)
	}
}

// marker writes a record through another provider and returns the next
// record read: the in-process backend delivers in order, so a record the
// exporter under test wrote would come first.
func marker(t *testing.T, e *env, ss *subsys.Session) got {
	t.Helper()
	m := newExporter(t, e, "MarkerProv")
	if _, err := ss.AttachMatching("user_events:MarkerProv_*", true); err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, "the INFO tracepoint to be enabled", m.Tracepoint(log.SeverityInfo).Enabled)
	var lr log.Record
	lr.SetSeverity(log.SeverityInfo)
	lr.SetBody(attribute.StringValue("marker"))
	if err := m.Export(context.Background(), []sdklog.Record{sdkRecord(t, context.Background(), lr)}); err != nil {
		t.Fatal(err)
	}
	return readBack(t, ss, 1)[0]
}

func checkMarker(t *testing.T, g got) {
	t.Helper()
	if g.tracepoint != "MarkerProv_L4K1" {
		t.Errorf("a record was written before the marker: %s %s", g.tracepoint, g.json)
	}
}

// TestExporterShutdown: Shutdown is idempotent and safe concurrently;
// after it Export returns ErrExporterShutdown and writes nothing, and
// ForceFlush and Shutdown return nil.
func TestExporterShutdown(t *testing.T) {
	e := newEnv(t)
	x := newExporter(t, e, "ShutProv")
	ss := e.attach(t, "user_events:ShutProv_*", x.Tracepoint(log.SeverityInfo))
	recs := records(t, 0, 3)
	if err := x.Export(context.Background(), recs[:1]); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; g.tracepoint != "ShutProv_L4K1" {
		t.Fatalf("read %s", g.tracepoint)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := x.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
	wg.Wait()
	if err := x.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown again: %v", err)
	}
	if err := x.Export(context.Background(), recs); !errors.Is(err, sdklog.ErrExporterShutdown) {
		t.Errorf("Export after Shutdown: %v, want ErrExporterShutdown", err)
	}
	if err := x.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush after Shutdown: %v", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Shutdown(canceled); err != nil {
		t.Errorf("Shutdown after Shutdown, canceled context: %v", err)
	}
	if x.Tracepoint(log.SeverityInfo).Enabled() {
		t.Error("the tracepoint is still enabled after Shutdown: not unregistered")
	}
	checkMarker(t, marker(t, e, ss))
}

// TestExporterContext: Export honours its context — done before it starts,
// it writes nothing and returns the context's error — and so does
// ForceFlush.
func TestExporterContext(t *testing.T) {
	e := newEnv(t)
	x := newExporter(t, e, "CtxProv")
	ss := e.attach(t, "user_events:CtxProv_*", x.Tracepoint(log.SeverityInfo))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	recs := records(t, 0, 2)
	if err := x.Export(canceled, recs); !errors.Is(err, context.Canceled) {
		t.Errorf("Export, canceled: %v", err)
	}
	if err := x.Export(expired, recs); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Export, deadline passed: %v", err)
	}
	if err := x.ForceFlush(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("ForceFlush, canceled: %v", err)
	}
	if err := x.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	checkMarker(t, marker(t, e, ss))
}

// TestExporterDisabled: records of a severity nobody listens to are
// skipped without error, the others written.
func TestExporterDisabled(t *testing.T) {
	e := newEnv(t)
	x := newExporter(t, e, "DisProv")
	ss := e.attach(t, "user_events:DisProv_L2K1", x.Tracepoint(log.SeverityError))
	var info, errRec log.Record
	info.SetSeverity(log.SeverityInfo)
	errRec.SetSeverity(log.SeverityError)
	recs := []sdklog.Record{sdkRecord(t, context.Background(), info), sdkRecord(t, context.Background(), errRec)}
	if err := x.Export(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if g := readBack(t, ss, 1)[0]; g.tracepoint != "DisProv_L2K1" {
		t.Errorf("read %s %s", g.tracepoint, g.json)
	}
}

// TestProcessorEnabled: Enabled is the enable bit of the severity's
// tracepoint, for the processor and through the SDK's Logger.Enabled.
func TestProcessorEnabled(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "EnProv")
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(p))
	logger := lp.Logger("enabled")
	ctx := context.Background()
	check := func(when string, want map[log.Severity]bool) {
		t.Helper()
		for s, w := range want {
			if got := p.Enabled(ctx, sdklog.EnabledParameters{Severity: s}); got != w {
				t.Errorf("%s: Enabled(%v) = %v, want %v", when, s, got, w)
			}
			if got := logger.Enabled(ctx, log.EnabledParameters{Severity: s}); got != w {
				t.Errorf("%s: Logger.Enabled(%v) = %v, want %v", when, s, got, w)
			}
		}
	}
	check("nothing attached", map[log.Severity]bool{
		log.SeverityTrace: false, log.SeverityInfo: false, log.SeverityError: false, log.SeverityFatal4: false, 0: false,
	})
	ss := e.attach(t, "user_events:EnProv_L2K1", p.Exporter().Tracepoint(log.SeverityError))
	check("L2K1 attached", map[log.Severity]bool{
		log.SeverityTrace: false, log.SeverityInfo: false, log.SeverityWarn4: false,
		log.SeverityError1: true, log.SeverityError4: true, log.SeverityFatal: false,
		0:  true, // undefined: any tracepoint enabled
		25: false, -1: false,
	})
	ss.Close()
	testutil.Wait(t, "the ERROR tracepoint to be disabled", func() bool { return !p.Exporter().Tracepoint(log.SeverityError).Enabled() })
	check("detached", map[log.Severity]bool{log.SeverityError: false, 0: false})

	e.attach(t, "user_events:EnProv_*", p.Exporter().Tracepoint(log.SeverityError))
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Enabled(ctx, sdklog.EnabledParameters{Severity: log.SeverityError}) {
		t.Error("enabled after Shutdown")
	}
}

// TestProcessorOnEmit: OnEmit writes only enabled severities, whatever its
// context, and nothing after Shutdown.
func TestProcessorOnEmit(t *testing.T) {
	e := newEnv(t)
	p := newProcessor(t, e, "EmitProv")
	ss := e.attach(t, "user_events:EmitProv_L2K1", p.Exporter().Tracepoint(log.SeverityError))
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, s := range []log.Severity{log.SeverityInfo, log.SeverityError} {
		var lr log.Record
		lr.SetSeverity(s)
		lr.SetBody(attribute.StringValue(s.String()))
		r := sdkRecord(t, context.Background(), lr)
		if err := p.OnEmit(canceled, &r); err != nil {
			t.Fatal(err)
		}
	}
	if g := readBack(t, ss, 1)[0]; g.tracepoint != "EmitProv_L2K1" || !strings.Contains(g.json, `"body": "ERROR"`) {
		t.Errorf("read %s %s", g.tracepoint, g.json)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var lr log.Record
	lr.SetSeverity(log.SeverityError)
	r := sdkRecord(t, context.Background(), lr)
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Errorf("OnEmit after Shutdown: %v", err)
	}
	r.SetSeverity(0)
	if err := p.OnEmit(context.Background(), &r); err != nil {
		t.Errorf("OnEmit of an invalid severity after Shutdown: %v", err)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Errorf("ForceFlush after Shutdown: %v", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown again: %v", err)
	}
	checkMarker(t, marker(t, e, ss))
}

// TestSDKConcurrent logs through the SDK's Logger from many goroutines
// (run it with -race): every record read back once.
func TestSDKConcurrent(t *testing.T) {
	const goroutines, n = 8, 100
	e := newEnv(t)
	p := newProcessor(t, e, "SDKProv")
	ss := e.attach(t, "user_events:SDKProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(p))
	defer lp.Shutdown(context.Background())
	var wg sync.WaitGroup
	for g := range goroutines {
		logger := lp.Logger(fmt.Sprint("g", g))
		wg.Go(func() {
			for i := range n {
				var lr log.Record
				lr.SetSeverity(log.SeverityInfo)
				lr.AddAttributes(attribute.Int("g", g), attribute.Int("i", i))
				logger.Emit(context.Background(), lr)
			}
		})
	}
	wg.Wait()
	seen := map[[2]int]bool{}
	for _, r := range readBack(t, ss, goroutines*n) {
		g, i := partC(t, r.json)
		if seen[[2]int{g, i}] {
			t.Errorf("g=%d i=%d twice", g, i)
		}
		seen[[2]int{g, i}] = true
	}
	if len(seen) != goroutines*n {
		t.Errorf("%d distinct records, want %d", len(seen), goroutines*n)
	}
}

// TestBatchProcessor: the Exporter under the SDK's BatchProcessor writes
// what is queued when the provider flushes and shuts down.
func TestBatchProcessor(t *testing.T) {
	e := newEnv(t)
	x := newExporter(t, e, "BatchProv")
	ss := e.attach(t, "user_events:BatchProv_*", x.Tracepoint(log.SeverityWarn))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(x)))
	logger := lp.Logger("batch")
	for i := range 10 {
		var lr log.Record
		lr.SetSeverity(log.SeverityWarn)
		lr.AddAttributes(attribute.Int("g", 1), attribute.Int("i", i))
		logger.Emit(context.Background(), lr)
	}
	if err := lp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := lp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, r := range readBack(t, ss, 10) {
		if _, gi := partC(t, r.json); gi != i {
			t.Errorf("record %d is i=%d", i, gi)
		}
	}
}

// TestProviderName: the Rust builder's rules (ProcessorBuilder::build in
// opentelemetry-user-events-logs/src/logs/processor.rs, and its tests'
// names).
func TestProviderName(t *testing.T) {
	e := newEnv(t)
	for _, name := range []string{"ValidName", "valid_name", "Valid123", "valid_123", "_valid_name", "VALID_NAME", strings.Repeat("a", 233)} {
		p, err := ehotel.NewProcessor(name, &ehotel.Options{File: e.f})
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		p.Shutdown(context.Background())
	}
	invalid := []string{"", strings.Repeat("a", 234), "Invalid Name", "Invalid:Name", "Invalid\x00Name", "Invalid-Name",
		"InvalidName!", "InvalidName@", "Invalid+Name", "Invalid&Name", "Invalid#Name", "Invalid%Name",
		"Invalid/Name", "Invalid\\Name", "Invalid=Name", "Invalid?Name", "Invalid;Name", "Invalid,Name", "Ünicode"}
	for _, name := range invalid {
		if _, err := ehotel.NewProcessor(name, &ehotel.Options{File: e.f}); !errors.Is(err, unix.EINVAL) {
			t.Errorf("%q: %v, want EINVAL", name, err)
		}
	}
}

// TestOwnFile: without Options.File the exporter opens user_events itself and
// closes it on Shutdown; when it cannot (no kernel user_events, no
// daemon), it is made all the same, writes nothing and says why in Err.
func TestOwnFile(t *testing.T) {
	t.Setenv("UETRACE_SOCKET", t.TempDir()+"/none.sock")
	x, err := ehotel.NewExporter("OwnFileProv", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Err: %v", x.Err())
	var lr log.Record
	lr.SetSeverity(log.SeverityInfo)
	if err := x.Export(context.Background(), []sdklog.Record{sdkRecord(t, context.Background(), lr)}); err != nil {
		t.Errorf("Export: %v", err)
	}
	if err := x.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestAllocs: OnEmit allocates nothing, disabled or enabled, for a record
// of scalar attributes and body.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t)
	p := newProcessor(t, e, "AllocProv")
	var lr log.Record
	lr.SetSeverity(log.SeverityInfo)
	lr.SetBody(attribute.StringValue("request served"))
	lr.AddAttributes(attribute.String("path", "/index.html"), attribute.Int("status", 200), attribute.Float64("dur", 1.5), attribute.Bool("cached", true))
	r := sdkRecord(t, context.Background(), lr)
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { p.OnEmit(ctx, &r) }); n != 0 {
		t.Errorf("disabled: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { p.Enabled(ctx, sdklog.EnabledParameters{Severity: log.SeverityInfo}) }); n != 0 {
		t.Errorf("Enabled: %v allocations", n)
	}
	ss := e.attach(t, "user_events:AllocProv_*", p.Exporter().Tracepoint(log.SeverityInfo))
	if err := p.OnEmit(ctx, &r); err != nil {
		t.Fatal(err)
	}
	readBack(t, ss, 1)
	if n := testing.AllocsPerRun(100, func() { p.OnEmit(ctx, &r) }); n != 0 {
		t.Errorf("enabled: %v allocations", n)
	}
}
