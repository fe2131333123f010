package ehprovider_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// benchProvider is an in-process provider with the 3-field event of the
// benchmarks defined on it, and its tracepoint enabled in the subsystem's
// trace buffer (as `echo 1 > enable` does) when on.
func benchProvider(b *testing.B, on bool) (*ehprovider.Provider, *ehprovider.Event3[uint32, string, float64]) {
	b.Helper()
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	p, err := ehprovider.New(f, "BenchProvider", nil)
	if err != nil {
		b.Fatal(err)
	}
	benchSys[p] = sys
	ev := ehprovider.Define3[uint32, string, float64](p, "Request", eventheader.LevelInformation, 1, "status", "path", "dur")
	if err := ev.Err(); err != nil {
		b.Fatal(err)
	}
	if on {
		if err := sys.SetFtrace(sys.Lookup("user_events", ev.Tracepoint().Name()), true); err != nil {
			b.Fatal(err)
		}
	}
	if ev.Enabled() != on {
		b.Fatalf("Enabled() = %v, want %v", !on, on)
	}
	return p, ev
}

var sink int

// benchSys is each benchmark provider's subsystem.
var benchSys = map[*ehprovider.Provider]*subsys.Subsystem{}

// BenchmarkDisabled is the check a program pays per event while nobody
// listens: Tracepoint.Enabled; Provider.Enabled, which first finds the
// tracepoint by level and keyword; and a typed Write, which is the check.
func BenchmarkDisabled(b *testing.B) {
	p, ev := benchProvider(b, false)
	tp := p.Tracepoint(eventheader.LevelInformation, 1)
	b.Run("Enabled", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if tp.Enabled() {
				n++
			}
		}
		sink = n
	})
	b.Run("ProviderEnabled", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if p.Enabled(eventheader.LevelInformation, 1) {
				n++
			}
		}
		sink = n
	})
	b.Run("TypedWrite", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev.Write(200, "/index.html", 1.5)
		}
	})
}

// BenchmarkWrite3 builds and writes a 3-field event (u32, string, f64) on
// the in-process backend, its tracepoint enabled in the trace buffer, the
// typed way and with a Builder; beside it log/slog's JSON handler writes
// the same three attributes to io.Discard.
func BenchmarkWrite3(b *testing.B) {
	p, ev := benchProvider(b, true)
	tp := p.Tracepoint(eventheader.LevelInformation, 1)
	b.Run("ehprovider-typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Write(200, "/index.html", 1.5); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ehprovider-builder", func(b *testing.B) {
		b.ReportAllocs()
		var bld ehprovider.Builder
		for b.Loop() {
			if tp.Enabled() {
				bld.Reset(tp, "Request")
				bld.AddUint32("status", 200, eventheader.FormatDefault, 0)
				bld.AddString("path", "/index.html", eventheader.FormatDefault, 0)
				bld.AddFloat64("dur", 1.5, 0)
				if err := tp.Write(&bld); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	b.Run("slog-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			logger.Info("Request", "status", 200, "path", "/index.html", "dur", 1.5)
		}
	})
	b.Run("slog-json-attrs", func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		for b.Loop() {
			logger.LogAttrs(ctx, slog.LevelInfo, "Request", slog.Int("status", 200), slog.String("path", "/index.html"), slog.Float64("dur", 1.5))
		}
	})
}

// The array benchmarks' event: a queue name, 16 sizes and 3 tags.
var (
	arraySizes = []uint32{512, 1024, 64, 4096, 128, 256, 2048, 32, 512, 1024, 64, 4096, 128, 256, 2048, 32}
	arrayTags  = []string{"retry", "bulk", "priority"}
)

// arrayEvent defines the array benchmarks' event on p's level-5
// tracepoint, enabled in the trace buffer when on.
func arrayEvent(b *testing.B, on bool) *ehprovider.Event3[string, []uint32, []string] {
	b.Helper()
	p, _ := benchProvider(b, false)
	ev := ehprovider.Define3[string, []uint32, []string](p, "Batch", eventheader.LevelVerbose, 1, "queue", "sizes", "tags")
	if err := ev.Err(); err != nil {
		b.Fatal(err)
	}
	if on {
		sys := benchSys[p]
		if err := sys.SetFtrace(sys.Lookup("user_events", ev.Tracepoint().Name()), true); err != nil {
			b.Fatal(err)
		}
	}
	if ev.Enabled() != on {
		b.Fatalf("Enabled() = %v, want %v", !on, on)
	}
	return ev
}

// BenchmarkWriteArray writes an event of a string, a 16-element []uint32
// and a 3-element []string (118 bytes of values) on the in-process
// backend: disabled (the check only), enabled the typed way, and with a
// Builder (ArrayField, AppendCount and an Append per element).
func BenchmarkWriteArray(b *testing.B) {
	b.Run("disabled-typed", func(b *testing.B) {
		ev := arrayEvent(b, false)
		b.ReportAllocs()
		for b.Loop() {
			ev.Write("ingest", arraySizes, arrayTags)
		}
	})
	ev := arrayEvent(b, true)
	b.Run("ehprovider-typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Write("ingest", arraySizes, arrayTags); err != nil {
				b.Fatal(err)
			}
		}
	})
	tp := ev.Tracepoint()
	b.Run("ehprovider-builder", func(b *testing.B) {
		b.ReportAllocs()
		var bld ehprovider.Builder
		for b.Loop() {
			if tp.Enabled() {
				bld.Reset(tp, "Batch")
				bld.AddString("queue", "ingest", eventheader.FormatDefault, 0)
				bld.ArrayField("sizes", eventheader.EncodingValue32, eventheader.FormatDefault, 0, 0)
				bld.AppendCount(uint16(len(arraySizes)))
				for _, v := range arraySizes {
					bld.AppendValue32(v)
				}
				bld.ArrayField("tags", eventheader.EncodingStringLength16Char8, eventheader.FormatDefault, 0, 0)
				bld.AppendCount(uint16(len(arrayTags)))
				for _, s := range arrayTags {
					bld.AppendString8(s)
				}
				if err := tp.Write(&bld); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkWriteActivity is Write3's typed write with an activity id and
// a related id (WriteActivity: the extension's 36 bytes more, one slice
// more in the writev).
func BenchmarkWriteActivity(b *testing.B) {
	_, ev := benchProvider(b, true)
	id := [16]byte{1, 15: 2}
	related := [16]byte{3, 15: 4}
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.WriteActivity(&id, &related, 200, "/index.html", 1.5); err != nil {
			b.Fatal(err)
		}
	}
}
