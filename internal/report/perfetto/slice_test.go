package perfetto

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
)

// TestSlices writes nested slices on a thread track and overlapping ones
// on two async tracks, and reads them back paired as the trace processor
// pairs them.
func TestSlices(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must(t, w.Process(10, "server"))
	th, err := w.ThreadTrack(10, 11)
	must(t, err)
	a, err := w.AsyncTrack(10, "Req")
	must(t, err)
	b, err := w.AsyncTrack(10, "Req")
	must(t, err)
	if th == a || a == b {
		t.Fatalf("tracks %d %d %d not distinct", th, a, b)
	}

	must(t, w.Begin(100, th, "c", "outer", []Arg{Uint("n", 1)}))
	must(t, w.Begin(110, th, "c", "inner", nil))
	must(t, w.Instant(115, 10, 11, "c", "mark", nil))
	must(t, w.End(120, th, []Arg{String("result", "ok")}))
	must(t, w.End(130, th, nil))
	must(t, w.Begin(100, a, "c", "Req", []Arg{Int("id", 1)}))
	must(t, w.Begin(105, b, "c", "Req", []Arg{Int("id", 2)}))
	must(t, w.End(200, a, []Arg{Bool("fine", true)}))
	must(t, w.End(210, b, nil))
	must(t, w.Begin(300, b, "", "Req", nil)) // never ended
	if n := w.OpenSlices(); n != 1 {
		t.Errorf("OpenSlices %d, want 1", n)
	}

	// Refused, and nothing written: an end with nothing open, a slice on
	// a process track or on a track the Writer never made.
	if err := w.End(400, th, nil); !errors.Is(err, ErrNoOpenSlice) {
		t.Errorf("End with nothing open: %v, want ErrNoOpenSlice", err)
	}
	if err := w.Begin(400, Track(1), "", "x", nil); !errors.Is(err, ErrTrack) {
		t.Errorf("Begin on the process track: %v, want ErrTrack", err)
	}
	for _, tr := range []Track{0, 99} {
		if err := w.End(400, tr, nil); !errors.Is(err, ErrTrack) {
			t.Errorf("End on track %d: %v, want ErrTrack", tr, err)
		}
	}
	if err := w.Begin(400, th, "", "x", []Arg{{Name: "bad"}}); !errors.Is(err, ErrArgKind) {
		t.Errorf("Begin with a bad argument: %v, want ErrArgKind", err)
	}
	if n := w.OpenSlices(); n != 1 {
		t.Errorf("OpenSlices %d after refused calls, want 1", n)
	}
	must(t, w.Flush())

	tr, err := perfettotest.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	type arg = perfettotest.Arg
	want := []perfettotest.Slice{
		{Track: uint64(th), PID: 10, TID: 11, TS: 100, Dur: 30, Category: "c", Name: "outer", Args: []arg{{Name: "n", Kind: "uint", Val: uint64(1)}}},
		{Track: uint64(th), PID: 10, TID: 11, TS: 110, Dur: 10, Depth: 1, Category: "c", Name: "inner", EndArgs: []arg{{Name: "result", Kind: "string", Val: "ok"}}},
		{Track: uint64(a), PID: 10, TS: 100, Dur: 100, Category: "c", Name: "Req", Args: []arg{{Name: "id", Kind: "int", Val: int64(1)}}, EndArgs: []arg{{Name: "fine", Kind: "bool", Val: true}}},
		{Track: uint64(b), PID: 10, TS: 105, Dur: 105, Category: "c", Name: "Req", Args: []arg{{Name: "id", Kind: "int", Val: int64(2)}}},
		{Track: uint64(b), PID: 10, TS: 300, Dur: -1, Name: "Req"},
	}
	if diff := cmp.Diff(want, tr.Slices, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
	if len(tr.Events) != 1 || tr.Events[0].Name != "mark" {
		t.Errorf("instants %+v, want the one mark", tr.Events)
	}
	for _, u := range []Track{a, b} {
		if got := tr.Tracks[uint64(u)]; got != (dTrack{UUID: uint64(u), Parent: 1, Async: true, PID: 10, Name: "Req"}) {
			t.Errorf("async track %d: %+v", u, got)
		}
	}
}

// Slices allocate nothing once their strings are interned, as instants.
func TestSliceAllocs(t *testing.T) {
	w := NewWriter(discard{})
	th, err := w.ThreadTrack(1, 2)
	must(t, err)
	args := benchArgs()
	ts := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		ts++
		if err := w.Begin(ts, th, "user_events", "slice", args); err != nil {
			t.Fatal(err)
		}
		if err := w.End(ts, th, args); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Begin and End", allocs)
	}
}

// BenchmarkSlice is a slice on an async track: a Begin with 5 debug
// annotations and an End with none.
func BenchmarkSlice(b *testing.B) {
	var n countWriter
	w := NewWriter(&n)
	tr, err := w.AsyncTrack(100, "my_event")
	must(b, err)
	args := benchArgs()
	must(b, w.Begin(1, tr, "user_events", "my_event", args))
	must(b, w.End(2, tr, nil))
	ts := uint64(1_000_000_000)
	b.ReportAllocs()
	start := n
	for b.Loop() {
		ts += 1000
		if err := w.Begin(ts, tr, "user_events", "my_event", args); err != nil {
			b.Fatal(err)
		}
		if err := w.End(ts+500, tr, nil); err != nil {
			b.Fatal(err)
		}
	}
	must(b, w.Flush())
	b.ReportMetric(float64(n-start)/float64(b.N), "B/slice")
}
