package userevents_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

const typedBenchCmd = "bench_typed u32 status; __rel_loc char[] path; s64 dur"

// BenchmarkTypedWrite is Event3.Write of a u32, a __rel_loc string and an
// s64 on the in-process backend: disabled (the Enabled check alone),
// enabled, and beside it the same record through Event.Encode and the same
// three attributes through log/slog's JSON handler into io.Discard.
func BenchmarkTypedWrite(b *testing.B) {
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(inproc.New(sys).Options())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ev, err := userevents.Define3[uint32, string, int64](f, typedBenchCmd)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("disabled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Write(200, "/index.html", 1234); err != nil {
				b.Fatal(err)
			}
		}
	})
	if err := sys.SetFtrace(sys.Lookup("user_events", "bench_typed"), true); err != nil {
		b.Fatal(err)
	}
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := ev.Write(200, "/index.html", 1234); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		e := ev.Event()
		var enc eventdef.Encoder
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			if !e.Enabled() {
				b.Fatal("disabled")
			}
			err := e.Encode(&enc, buf, func(e *eventdef.Encoder) {
				e.Uint(200)
				e.String("/index.html")
				e.Int(1234)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("slog-json", func(b *testing.B) {
		log := slog.New(slog.NewJSONHandler(io.Discard, nil))
		b.ReportAllocs()
		for b.Loop() {
			log.Info("myapp_request", "status", 200, "path", "/index.html", "dur", 1234)
		}
	})
}

// BenchmarkTypedRingWrite is the same typed write on the daemon backend's
// ring, the daemon in a child process.
func BenchmarkTypedRingWrite(b *testing.B) {
	o := &userevents.Options{Backend: userevents.Daemon, Socket: benchDaemon(b), Transport: userevents.RingTransport}
	f, err := userevents.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if f.Transport() != userevents.RingTransport {
		b.Fatalf("no ring: %v", f.RingError())
	}
	ev, err := userevents.Define3[uint32, string, int64](f, typedBenchCmd)
	if err != nil {
		b.Fatal(err)
	}
	fs, err := tracefs.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fs.Close() })
	if err := fs.WriteFile("events/user_events/bench_typed/enable", []byte("1"), 0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := ev.Write(200, "/index.html", 1234); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ev.Event().Dropped())/float64(b.N), "dropped/op")
}

// BenchmarkTypedWriteGuarded is a disabled typed event behind the caller's
// own Enabled check, which is inlined: what a hot path pays while nobody
// traces.
func BenchmarkTypedWriteGuarded(b *testing.B) {
	f, err := userevents.Open(inproc.New(subsys.New(subsys.Options{})).Options())
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	ev, err := userevents.Define3[uint32, string, int64](f, typedBenchCmd)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ev.Enabled() {
			if err := ev.Write(200, "/index.html", 1234); err != nil {
				b.Fatal(err)
			}
		}
	}
}
