package report_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
)

// ehSample is an EventHeader event written by a task at a time.
type ehSample struct {
	ts       uint64 // ns
	pid, tid int32
	name     string
	opcode   eventheader.Opcode
	act      byte // the activity id's first byte (the rest zero); 0: none
	status   uint32
}

// ehTaskFile writes a perf.data file of samples of tracepoint MyApp_L4K1,
// each event with a field status, the activity id its act says, and
// opcode.
func ehTaskFile(tb testing.TB, samples []ehSample) string {
	tb.Helper()
	const tp, id = "MyApp_L4K1", 2000
	f := newFile(tb, tracingData(mustParse(tb, tp+" "+eventheader.CommandTypes).Format(tp, id)), attr("user_events:"+tp, id, id))
	var b eventheader.Builder
	for _, s := range samples {
		b.Reset(s.name, eventheader.Header{Level: eventheader.LevelInformation, Opcode: s.opcode})
		if s.act != 0 {
			b.SetActivityID(&[16]byte{s.act}, nil)
		}
		b.AddUint32("status", s.status, eventheader.FormatDefault, 0)
		ev, err := b.AppendEvent(nil)
		if err != nil {
			tb.Fatal(err)
		}
		f.sample(id, s.pid, s.tid, s.ts, 0, rawRecord(id, s.pid, ev))
	}
	return f.close()
}

type arg = perfettotest.Arg

// ehArgs are the annotations of a sample of ehTaskFile: its status and
// metadata, named after prefix.
func ehArgs(prefix string, opcode uint64, act byte, status uint64) []arg {
	args := []arg{
		{Name: prefix + "status", Kind: "uint", Val: status},
		{Name: prefix + "meta.level", Kind: "uint", Val: uint64(4)},
	}
	if opcode != 0 {
		args = append(args, arg{Name: prefix + "meta.opcode", Kind: "uint", Val: opcode})
	}
	args = append(args, arg{Name: prefix + "meta.keyword", Kind: "string", Val: "0x1"})
	if act != 0 {
		id := "00000000-0000-0000-0000-000000000000"
		const hex = "0123456789abcdef"
		id = string([]byte{hex[act>>4], hex[act&15]}) + id[2:]
		args = append(args, arg{Name: prefix + "meta.activity", Kind: "string", Val: id})
	}
	return args
}

// reportSlices reports samples as Perfetto and decodes the trace.
func reportSlices(t *testing.T, samples []ehSample) (*perfettotest.Trace, report.Summary) {
	t.Helper()
	out, sum := run(t, ehTaskFile(t, samples), report.Perfetto)
	tr, err := perfettotest.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return tr, sum
}

const (
	start = eventheader.OpcodeActivityStart
	stop  = eventheader.OpcodeActivityStop
)

// Without activity ids, starts and stops pair on their thread's track,
// nested: a stop ends the innermost slice open on its thread, whatever its
// name (a stop of another name says so in stop.event). Other opcodes stay
// instants, inside the slices.
func TestEventHeaderSlicesByThread(t *testing.T) {
	tr, sum := reportSlices(t, []ehSample{
		{ts: 100, pid: 42, tid: 42, name: "Outer", opcode: start, status: 1},
		{ts: 110, pid: 42, tid: 42, name: "Inner", opcode: start, status: 2},
		{ts: 115, pid: 42, tid: 43, name: "Other", opcode: start, status: 3}, // another thread
		{ts: 120, pid: 42, tid: 42, name: "Mark", status: 4},
		{ts: 130, pid: 42, tid: 42, name: "Inner", opcode: stop, status: 200},
		{ts: 140, pid: 42, tid: 43, name: "Other", opcode: stop, status: 201},
		{ts: 150, pid: 42, tid: 42, name: "Done", opcode: stop, status: 202},
	})
	if sum != (report.Summary{Samples: 7}) {
		t.Errorf("summary %+v", sum)
	}
	ths := tr.Threads()
	t42, t43 := ths[[2]int32{42, 42}].UUID, ths[[2]int32{42, 43}].UUID
	const ue = "user_events"
	want := []perfettotest.Slice{
		{Track: t42, PID: 42, TID: 42, TS: 100, Dur: 50, Category: ue, Name: "MyApp:Outer", Args: ehArgs("", 1, 0, 1),
			EndArgs: append(ehArgs("stop.", 2, 0, 202), arg{Name: "stop.event", Kind: "string", Val: "MyApp:Done"})},
		{Track: t42, PID: 42, TID: 42, TS: 110, Dur: 20, Depth: 1, Category: ue, Name: "MyApp:Inner", Args: ehArgs("", 1, 0, 2),
			EndArgs: ehArgs("stop.", 2, 0, 200)},
		{Track: t43, PID: 42, TID: 43, TS: 115, Dur: 25, Category: ue, Name: "MyApp:Other", Args: ehArgs("", 1, 0, 3),
			EndArgs: ehArgs("stop.", 2, 0, 201)},
	}
	if diff := cmp.Diff(want, tr.Slices, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
	if len(tr.Events) != 1 || tr.Events[0].Name != "MyApp:Mark" || tr.Events[0].TID != 42 {
		t.Errorf("instants %+v, want MyApp:Mark", tr.Events)
	}
	for _, tk := range tr.Tracks {
		if tk.Async {
			t.Errorf("async track %+v for events without activity ids", tk)
		}
	}
}

// With activity ids, each open activity has an async track of its own in
// its process's group, named Provider:Event, so activities that overlap
// without nesting are slices of their own; a stop ends its activity's
// slice whatever thread it comes from. A track whose activity has ended
// is used again by the next activity of the same name.
func TestEventHeaderSlicesByActivity(t *testing.T) {
	tr, sum := reportSlices(t, []ehSample{
		{ts: 100, pid: 42, tid: 42, name: "Req", opcode: start, act: 0xa1, status: 1},
		{ts: 110, pid: 42, tid: 43, name: "Req", opcode: start, act: 0xa2, status: 2},
		{ts: 120, pid: 42, tid: 43, name: "Req", opcode: stop, act: 0xa1, status: 200}, // a1 ends on another thread
		{ts: 130, pid: 42, tid: 42, name: "Req", opcode: stop, act: 0xa2, status: 201},
		{ts: 140, pid: 42, tid: 44, name: "Req", opcode: start, act: 0xa3, status: 3}, // reuses a track
		{ts: 145, pid: 42, tid: 44, name: "Req", opcode: start, act: 0xa4, status: 4}, // overlaps a3: the other
		{ts: 150, pid: 42, tid: 44, name: "Req", opcode: stop, act: 0xa3, status: 202},
		{ts: 155, pid: 42, tid: 44, name: "Req", opcode: stop, act: 0xa4, status: 203},
		{ts: 160, pid: 7, tid: 7, name: "Req", opcode: start, act: 0xa5, status: 5}, // another process
		{ts: 170, pid: 7, tid: 7, name: "Req", opcode: stop, act: 0xa5, status: 204},
	})
	if sum != (report.Summary{Samples: 10}) {
		t.Errorf("summary %+v", sum)
	}
	var async []perfettotest.Track
	for _, tk := range tr.Tracks {
		if tk.Async {
			async = append(async, tk)
		}
	}
	if len(async) != 3 {
		t.Errorf("%d async tracks, want 2 in pid 42 and 1 in pid 7: %+v", len(async), async)
	}
	for _, tk := range async {
		if tk.Name != "MyApp:Req" || tk.Parent != tr.Processes()[tk.PID].UUID {
			t.Errorf("async track %+v: want MyApp:Req under its process", tk)
		}
	}
	const ue = "user_events"
	want := []perfettotest.Slice{
		{PID: 42, TS: 100, Dur: 20, Category: ue, Name: "MyApp:Req", Args: ehArgs("", 1, 0xa1, 1), EndArgs: ehArgs("stop.", 2, 0xa1, 200)},
		{PID: 42, TS: 110, Dur: 20, Category: ue, Name: "MyApp:Req", Args: ehArgs("", 1, 0xa2, 2), EndArgs: ehArgs("stop.", 2, 0xa2, 201)},
		{PID: 42, TS: 140, Dur: 10, Category: ue, Name: "MyApp:Req", Args: ehArgs("", 1, 0xa3, 3), EndArgs: ehArgs("stop.", 2, 0xa3, 202)},
		{PID: 42, TS: 145, Dur: 10, Category: ue, Name: "MyApp:Req", Args: ehArgs("", 1, 0xa4, 4), EndArgs: ehArgs("stop.", 2, 0xa4, 203)},
		{PID: 7, TS: 160, Dur: 10, Category: ue, Name: "MyApp:Req", Args: ehArgs("", 1, 0xa5, 5), EndArgs: ehArgs("stop.", 2, 0xa5, 204)},
	}
	if diff := cmp.Diff(want, tr.Slices, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(perfettotest.Slice{}, "Track")); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
	if len(tr.Slices) == len(want) {
		s := tr.Slices
		if s[0].Track == s[1].Track || s[2].Track == s[3].Track {
			t.Errorf("overlapping activities on one track: %+v", s)
		}
		for _, x := range s {
			if tk := tr.Tracks[x.Track]; !tk.Async || x.Depth != 0 {
				t.Errorf("slice %+v on track %+v, want depth 0 on an async track", x, tk)
			}
		}
	}
	if len(tr.Events) != 0 {
		t.Errorf("instants %+v, want none", tr.Events)
	}
}

// A stop with nothing to end is an instant, counted; a start never
// stopped is a slice left open (Dur -1: Perfetto's "Did not end"),
// counted. Neither breaks the trace or the other slices.
func TestEventHeaderSlicesUnmatched(t *testing.T) {
	tr, sum := reportSlices(t, []ehSample{
		{ts: 100, pid: 42, tid: 42, name: "Req", opcode: stop, act: 0xb9, status: 1},  // id never started
		{ts: 110, pid: 42, tid: 42, name: "Job", opcode: stop, status: 2},             // nothing open on the thread
		{ts: 120, pid: 42, tid: 42, name: "Req", opcode: start, act: 0xb1, status: 3}, // never stopped
		{ts: 130, pid: 42, tid: 42, name: "Job", opcode: stop, status: 4},             // b1 is not on the thread's track
		{ts: 140, pid: 42, tid: 42, name: "Job", opcode: start, status: 5},            // never stopped
		{ts: 150, pid: 42, tid: 43, name: "Job", opcode: stop, status: 6},             // another thread's
		{ts: 160, pid: 42, tid: 42, name: "Req", opcode: start, act: 0xb2, status: 7},
		{ts: 170, pid: 42, tid: 42, name: "Req", opcode: stop, act: 0xb2, status: 8},
		{ts: 180, pid: 42, tid: 42, name: "Req", opcode: stop, act: 0xb2, status: 9}, // stopped twice
	})
	if want := (report.Summary{Samples: 9, UnmatchedStops: 5, OpenStarts: 2}); sum != want {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	var instants []uint64
	for _, e := range tr.Events {
		instants = append(instants, e.TS)
		if e.Args[0].Name != "status" {
			t.Errorf("unmatched stop at %d: annotations %+v, want the stop's own", e.TS, e.Args)
		}
	}
	if want := []uint64{100, 110, 130, 150, 180}; !cmp.Equal(instants, want) {
		t.Errorf("instants at %v, want %v", instants, want)
	}
	var slices []string
	for _, s := range tr.Slices {
		slices = append(slices, s.Name)
		if (s.Dur < 0) != (s.TS != 160) {
			t.Errorf("slice %s at %d: dur %d", s.Name, s.TS, s.Dur)
		}
	}
	if want := []string{"MyApp:Req", "MyApp:Job", "MyApp:Req"}; !cmp.Equal(slices, want) {
		t.Errorf("slices %v, want %v", slices, want)
	}
}

// An activity id started again while open nests on its track: the next
// stop with the id ends the inner slice, the one after the outer.
func TestEventHeaderSlicesSameActivityNested(t *testing.T) {
	tr, sum := reportSlices(t, []ehSample{
		{ts: 100, pid: 42, tid: 42, name: "Req", opcode: start, act: 0xc1, status: 1},
		{ts: 110, pid: 42, tid: 42, name: "Retry", opcode: start, act: 0xc1, status: 2},
		{ts: 120, pid: 42, tid: 42, name: "Retry", opcode: stop, act: 0xc1, status: 3},
		{ts: 130, pid: 42, tid: 42, name: "Req", opcode: stop, act: 0xc1, status: 4},
	})
	if sum != (report.Summary{Samples: 4}) {
		t.Errorf("summary %+v", sum)
	}
	if len(tr.Slices) != 2 {
		t.Fatalf("slices %+v, want 2", tr.Slices)
	}
	outer, inner := tr.Slices[0], tr.Slices[1]
	if outer.Track != inner.Track || outer.Name != "MyApp:Req" || outer.Dur != 30 || outer.Depth != 0 ||
		inner.Name != "MyApp:Retry" || inner.Dur != 10 || inner.Depth != 1 {
		t.Errorf("slices %+v, want Retry inside Req on one track", tr.Slices)
	}
}
