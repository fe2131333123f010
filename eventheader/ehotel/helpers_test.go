package ehotel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehotel"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// env is an in-process user_events subsystem and a File on it: what the
// exporter writes can be read back from a session.
type env struct {
	sys *subsys.Subsystem
	f   *userevents.File
}

func newEnv(t testing.TB) *env {
	t.Helper()
	sys := subsys.New(subsys.Options{NumCPU: 2})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &env{sys, f}
}

// attach starts a session on the tracepoints pattern selects
// ("user_events:Prov_*") and waits until the enable bits of the
// given tracepoints are set.
func (e *env) attach(t testing.TB, pattern string, wait ...ehotelTP) *subsys.Session {
	t.Helper()
	ss := e.sys.NewSession(subsys.SessionOptions{})
	t.Cleanup(func() { ss.Close() })
	if _, err := ss.AttachMatching(pattern, true); err != nil {
		t.Fatal(err)
	}
	for _, tp := range wait {
		testutil.Wait(t, "the tracepoint to be enabled", tp.Enabled)
	}
	return ss
}

type ehotelTP = interface{ Enabled() bool }

// got is one record read back.
type got struct {
	tracepoint string
	raw        []byte // the event as written, then perf's zero padding
	json       string // eventheader's JSON, Microsoft's decoder's form
}

// readBack reads n event records from ss and decodes them.
func readBack(t testing.TB, ss *subsys.Session, n int) []got {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []got
	buf := make([]byte, 1<<20)
	for len(out) < n {
		recs, err := ss.Read(ctx, buf, nil)
		if err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		for _, r := range recs {
			if r.Event == nil {
				continue
			}
			name := r.Event.Name()
			p := r.Raw[8:]
			ev, err := eventheader.Decode(name, p)
			if err != nil {
				t.Fatalf("decode %s record % x: %v", name, r.Raw, err)
			}
			js, err := ev.AppendJSON(nil)
			if err != nil {
				t.Fatalf("decode %s fields: %v", name, err)
			}
			out = append(out, got{name, append([]byte(nil), p...), string(js)})
		}
	}
	return out
}

// collector is a processor keeping a clone of every record, to hand to an
// Exporter as the SDK's processors would.
type collector struct {
	mu      sync.Mutex
	records []sdklog.Record
}

func (c *collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.mu.Lock()
	c.records = append(c.records, r.Clone())
	c.mu.Unlock()
	return nil
}
func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

// newProcessor is NewProcessor on e's File, writing the resource
// attributes named, shut down when the test ends.
func newProcessor(t testing.TB, e *env, name string, resource ...string) *ehotel.Processor {
	t.Helper()
	p, err := ehotel.NewProcessor(name, &ehotel.Options{File: e.f, ResourceAttributes: resource})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Exporter().Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// sdkRecord is the SDK's record for r, made by a LoggerProvider with opts
// (a zero sdklog.Record keeps no attributes: its count limit is 0).
func sdkRecord(t testing.TB, ctx context.Context, r log.Record, opts ...sdklog.LoggerProviderOption) sdklog.Record {
	t.Helper()
	var c collector
	lp := sdklog.NewLoggerProvider(append([]sdklog.LoggerProviderOption{sdklog.WithProcessor(&c)}, opts...)...)
	defer lp.Shutdown(context.Background())
	lp.Logger("test").Emit(ctx, r)
	if len(c.records) != 1 {
		t.Fatalf("the SDK emitted %d records", len(c.records))
	}
	return c.records[0]
}
