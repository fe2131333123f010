package ehslog_test

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/slogtest"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/eventheader/ehslog"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// TestKernelSlogtest runs testing/slogtest through the kernel's
// user_events: the Handler's tracepoints opened with perf_event_open, as
// perf record does, and every record read back from the perf rings and
// decoded. It runs where the kernel has user_events (the VM of
// kernel/suites' TestEHSlogOnKernel) and skips elsewhere.
func TestKernelSlogtest(t *testing.T) {
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel})
	if err != nil {
		t.Skipf("no kernel user_events here: %v", err)
	}
	defer f.Close()
	fs, err := tracefs.Open(&userevents.Options{Backend: userevents.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	p, err := ehprovider.New(f, fmt.Sprintf("KernSlog%d", os.Getpid()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h, err := ehslog.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.Enabled(t.Context(), slog.LevelDebug) || h.Enabled(t.Context(), slog.LevelError+4) {
		t.Fatal("enabled before perf attached")
	}

	// Every level's tracepoint on every CPU, samples with their time so
	// that the records of all rings can be put back in order.
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	type ring struct {
		*perfring.Ring
		tracepoint string
	}
	var rings []ring
	defer func() {
		for _, r := range rings {
			r.Close()
		}
	}()
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelError + 4} {
		name := h.Tracepoint(l).Name()
		idText, err := fs.ReadFile("events/user_events/" + name + "/id")
		if err != nil {
			t.Fatal(err)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, cpu := range cpus {
			attr := unix.PerfEventAttr{
				Type:        unix.PERF_TYPE_TRACEPOINT,
				Config:      id,
				Sample:      1,
				Sample_type: unix.PERF_SAMPLE_TIME | unix.PERF_SAMPLE_RAW,
				Wakeup:      1,
			}
			fd, err := perfring.Open(&attr, -1, cpu)
			if err != nil {
				t.Fatal(err)
			}
			r, err := perfring.NewRing(fd, 4)
			if err != nil {
				unix.Close(fd)
				t.Fatal(err)
			}
			rings = append(rings, ring{r, name})
		}
	}
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelError + 4} {
		if !h.Enabled(t.Context(), l) {
			t.Fatalf("%v: perf_event_open did not enable %s", l, h.Tracepoint(l).Name())
		}
	}

	// The kernel delivers a write's sample before the write returns.
	type sample struct {
		time uint64
		ev   event
	}
	readAll := func() []event {
		var got []sample
		for _, r := range rings {
			r.Read(func(rec []byte) {
				if binary.NativeEndian.Uint32(rec) != unix.PERF_RECORD_SAMPLE {
					return
				}
				// header (8), time (8), raw size (4), raw data: the common
				// fields (8), then the event.
				tm := binary.NativeEndian.Uint64(rec[8:])
				n := uint64(binary.NativeEndian.Uint32(rec[16:]))
				if n < 8 || 20+n > uint64(len(rec)) {
					t.Fatalf("sample of %d bytes with %d bytes of raw data", len(rec), n)
				}
				raw := slices.Clone(rec[28 : 20+n])
				ev, err := eventheader.Decode(r.tracepoint, raw)
				if err != nil {
					t.Fatalf("decode %s: %v", r.tracepoint, err)
				}
				js, err := ev.AppendJSON(nil)
				if err != nil {
					t.Fatal(err)
				}
				m, err := toMap(&ev)
				if err != nil {
					t.Fatalf("%s: %v", js, err)
				}
				got = append(got, sample{tm, event{r.tracepoint, ev, string(js), m}})
			})
		}
		slices.SortStableFunc(got, func(a, b sample) int { return cmp.Compare(a.time, b.time) })
		var evs []event
		for _, s := range got {
			t.Log(s.ev.tracepoint, s.ev.json)
			evs = append(evs, s.ev)
		}
		return evs
	}

	err = slogtest.TestHandler(checked{h, t}, func() []map[string]any {
		var ms []map[string]any
		for _, e := range readAll() {
			ms = append(ms, e.fields)
		}
		return ms
	})
	if err != nil {
		t.Fatal(err)
	}

	// Each level to its tracepoint, in the header too.
	l := slog.New(checked{h, t})
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo + 1, slog.LevelWarn, slog.LevelError, slog.LevelError + 4} {
		l.Log(t.Context(), lv, "level", "n", int(lv))
	}
	evs := readAll()
	if len(evs) != 5 {
		t.Fatalf("%d records read back, want 5", len(evs))
	}
	for i, e := range evs {
		want := eventheader.Level(5 - i)
		if e.ev.Header.Level != want || e.tracepoint != h.Tracepoint(slog.Level(e.fields["n"].(int64))).Name() {
			t.Errorf("%s: %s: header level %d, want %d", e.tracepoint, e.json, e.ev.Header.Level, want)
		}
	}
}
