package ehslog_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// benchHandler is a Handler on an in-process provider; with on, its Info
// tracepoint is enabled in the subsystem's trace buffer (as `echo 1 >
// enable` does), which keeps the latest records and never fills.
func benchHandler(b *testing.B, on bool) *ehslog.Handler {
	b.Helper()
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	p, err := ehprovider.New(f, "BenchSlog", nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := ehslog.New(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	if on {
		if err := sys.SetFtrace(sys.Lookup("user_events", h.Tracepoint(slog.LevelInfo).Name()), true); err != nil {
			b.Fatal(err)
		}
	}
	if h.Enabled(context.Background(), slog.LevelInfo) != on {
		b.Fatalf("Enabled = %v, want %v", !on, on)
	}
	return h
}

var sink int

// noop is an enabled handler that writes nothing: slog's own share of an
// enabled record (the Record, its PC, its time, the Attrs).
type noop struct{}

func (noop) Enabled(context.Context, slog.Level) bool  { return true }
func (noop) Handle(context.Context, slog.Record) error { return nil }
func (n noop) WithAttrs([]slog.Attr) slog.Handler      { return n }
func (n noop) WithGroup(string) slog.Handler           { return n }

// BenchmarkDisabled is what a program pays per log call while nobody
// listens: Handler.Enabled alone, and slog.Logger's Info and LogAttrs
// with three attributes, which ask Enabled first and return.
func BenchmarkDisabled(b *testing.B) {
	h := benchHandler(b, false)
	ctx := context.Background()
	b.Run("Enabled", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if h.Enabled(ctx, slog.LevelInfo) {
				n++
			}
		}
		sink = n
	})
	// slog.DiscardHandler, whose Enabled is a constant false, is slog's
	// own floor: the Logger's call and its arguments.
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{{"ehslog", h}, {"slog-discard", slog.DiscardHandler}} {
		logger := slog.New(c.h)
		b.Run(c.name+"/Info", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				logger.Info("request", "status", 200, "path", "/index.html", "dur", 1.5)
			}
		})
		b.Run(c.name+"/LogAttrs", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				logger.LogAttrs(ctx, slog.LevelInfo, "request", slog.Int("status", 200), slog.String("path", "/index.html"), slog.Float64("dur", 1.5))
			}
		})
		b.Run(c.name+"/Enabled-Info", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if logger.Enabled(ctx, slog.LevelInfo) {
					logger.Info("request", "status", 200, "path", "/index.html", "dur", 1.5)
				}
			}
		})
	}
}

// BenchmarkEnabled3 is one Info record with three attributes written
// through the Handler to the in-process backend, its tracepoint enabled;
// beside it log/slog's JSON handler writes the same record to io.Discard,
// and a handler doing nothing shows slog's own share.
// "-with" loggers hold two attributes of With and a group of WithGroup.
func BenchmarkEnabled3(b *testing.B) {
	h := benchHandler(b, true)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{
		{"ehslog", h},
		{"slog-json", slog.NewJSONHandler(io.Discard, nil)},
		{"slog-noop", noop{}},
	} {
		logger := slog.New(c.h)
		b.Run(c.name+"/Info", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				logger.Info("request", "status", 200, "path", "/index.html", "dur", 1.5)
			}
		})
		b.Run(c.name+"/LogAttrs", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				logger.LogAttrs(ctx, slog.LevelInfo, "request", slog.Int("status", 200), slog.String("path", "/index.html"), slog.Float64("dur", 1.5))
			}
		})
		with := logger.With("svc", "api", "pid", 42).WithGroup("req")
		b.Run(c.name+"/LogAttrs-with", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				with.LogAttrs(ctx, slog.LevelInfo, "request", slog.Int("status", 200), slog.String("path", "/index.html"), slog.Float64("dur", 1.5))
			}
		})
	}
}
