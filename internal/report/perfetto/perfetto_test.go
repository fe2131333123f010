package perfetto

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protowire"
)

// write runs f on a Writer and returns the flushed trace.
func write(t testing.TB, f func(w *Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	f(w)
	if err := w.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return buf.Bytes()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// trackIndex maps pid to process track and (pid, tid) to thread track.
func trackIndex(d decoded) (procs map[int32]dTrack, threads map[[2]int32]dTrack) {
	procs, threads = map[int32]dTrack{}, map[[2]int32]dTrack{}
	for _, tk := range d.Tracks {
		if tk.Process {
			procs[tk.PID] = tk
		} else {
			threads[[2]int32{tk.PID, tk.TID}] = tk
		}
	}
	return procs, threads
}

func TestRoundTrip(t *testing.T) {
	args := []Arg{
		Int("neg", -5),
		Uint("big", math.MaxUint64),
		String("msg", "héllo"),
		Bytes("raw", []byte{0xde, 0xad, 0x00, 0x0f}),
		Bool("yes", true),
		Bool("no", false),
		Int("min", math.MinInt64),
	}
	data := write(t, func(w *Writer) {
		must(t, w.Process(100, "server"))
		must(t, w.Thread(100, 101, "worker"))
		must(t, w.Instant(1_000_000_000, 100, 101, "user_events", "req", args))
		must(t, w.Instant(1_000_000_500, 100, 101, "user_events", "req", args[:2]))
		// A thread nobody described: its process and thread tracks come first.
		must(t, w.Instant(1_000_001_000, 200, 201, "user_events", "other", nil))
		// Back to the first thread, another event name, no category.
		must(t, w.Instant(1_000_002_000, 100, 101, "", "req2", []Arg{Uint("big", 1)}))
		// The same tid under another pid is another track.
		must(t, w.Instant(1_000_003_000, 300, 101, "c2", "req", nil))
	})
	d := decodeTrace(t, data)

	wantArgs := []dArg{
		{"neg", "int", int64(-5)},
		{"big", "uint", uint64(math.MaxUint64)},
		{"msg", "string", "héllo"},
		{"raw", "string", "dead000f"},
		{"yes", "bool", true},
		{"no", "bool", false},
		{"min", "int", int64(math.MinInt64)},
	}
	want := []dEvent{
		{TS: 1_000_000_000, PID: 100, TID: 101, Category: "user_events", Name: "req", Args: wantArgs},
		{TS: 1_000_000_500, PID: 100, TID: 101, Category: "user_events", Name: "req", Args: wantArgs[:2]},
		{TS: 1_000_001_000, PID: 200, TID: 201, Category: "user_events", Name: "other"},
		{TS: 1_000_002_000, PID: 100, TID: 101, Name: "req2", Args: []dArg{{"big", "uint", uint64(1)}}},
		{TS: 1_000_003_000, PID: 300, TID: 101, Category: "c2", Name: "req"},
	}
	if diff := cmp.Diff(want, d.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	procs, threads := trackIndex(d)
	wantTracks := []dTrack{
		{Process: true, PID: 100, Name: "server"},
		{Process: true, PID: 200},
		{Process: true, PID: 300},
		{PID: 100, TID: 101, Name: "worker"},
		{PID: 200, TID: 201},
		{PID: 300, TID: 101},
	}
	var got []dTrack
	for _, tk := range d.Tracks {
		got = append(got, tk)
	}
	ignoreIDs := cmpopts.IgnoreFields(dTrack{}, "UUID", "Parent")
	sortTracks := cmpopts.SortSlices(func(a, b dTrack) bool {
		if a.Process != b.Process {
			return a.Process
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
	if diff := cmp.Diff(wantTracks, got, ignoreIDs, sortTracks); diff != "" {
		t.Errorf("tracks (-want +got):\n%s", diff)
	}
	// decodeTrace checked that each thread's parent is its process's track;
	// check that the uuids are all distinct.
	seen := map[uint64]bool{}
	for _, tk := range d.Tracks {
		if seen[tk.UUID] {
			t.Errorf("uuid %d used twice", tk.UUID)
		}
		seen[tk.UUID] = true
	}
	if len(procs) != 3 || len(threads) != 3 {
		t.Errorf("%d process and %d thread tracks, want 3 and 3", len(procs), len(threads))
	}
}

// Interning must actually shrink repeated events: the second identical
// event costs no string bytes.
func TestInterningSize(t *testing.T) {
	args := []Arg{Uint("some_field_name", 1), Uint("another_field", 2)}
	one := write(t, func(w *Writer) {
		must(t, w.Instant(1, 1, 1, "user_events", "my_event_name", args))
	})
	two := write(t, func(w *Writer) {
		must(t, w.Instant(1, 1, 1, "user_events", "my_event_name", args))
		must(t, w.Instant(2, 1, 1, "user_events", "my_event_name", args))
	})
	second := len(two) - len(one)
	if second > 32 {
		t.Errorf("second event takes %d bytes, want ≤ 32 with interning", second)
	}
	if n := bytes.Count(two, []byte("my_event_name")); n != 1 {
		t.Errorf("event name appears %d times, want 1", n)
	}
	t.Logf("first event packet(s) %d bytes, second %d bytes", len(one), second)
}

func TestOddInputs(t *testing.T) {
	const bad = "a\xffb\xfe\xfdc\xc3" // invalid bytes in runs, and a truncated sequence
	fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	for _, tc := range []struct {
		name     string
		pid, tid int32
		pname    string
		tname    string
		cat      string
		ev       string
		args     []Arg
		wantArgs []dArg
	}{
		{name: "empty everything", ev: "",
			args:     []Arg{Uint("", 1), String("", ""), Bytes("", nil)},
			wantArgs: []dArg{{"arg0", "uint", uint64(1)}, {"arg1", "string", ""}, {"arg2", "string", ""}}},
		{name: "invalid utf8", pid: 1, tid: 2, pname: bad, tname: bad, cat: bad, ev: bad,
			args:     []Arg{String(bad, bad)},
			wantArgs: []dArg{{fix(bad), "string", fix(bad)}}},
		{name: "only invalid bytes", pid: 1, tid: 1, pname: "\xff", tname: "\x80\x80", cat: "\xfe", ev: "\xc0\xaf",
			args:     []Arg{String("\xff\xff", "\xed\xa0\x80")}, // a surrogate is invalid too
			wantArgs: []dArg{{"\uFFFD", "string", fix("\xed\xa0\x80")}}},
		{name: "max pids", pid: math.MaxInt32, tid: math.MaxInt32, pname: "p", tname: "t", ev: "e"},
		{name: "min pids", pid: math.MinInt32, tid: math.MinInt32, pname: "p", tname: "t", ev: "e"},
		{name: "negative and zero", pid: -1, tid: 0, ev: "e"},
		{name: "NUL and newline", pid: 5, tid: 5, pname: "a\x00b", tname: "x\ny", cat: "c\x00", ev: "e\x00",
			args: []Arg{String("k\x00", "v\x00")}, wantArgs: []dArg{{"k\x00", "string", "v\x00"}}},
		{name: "empty arg names in the middle", pid: 7, tid: 8, ev: "e",
			args:     []Arg{Int("a", 1), Int("", 2), Int("c", 3), Int("", 4)},
			wantArgs: []dArg{{"a", "int", int64(1)}, {"arg1", "int", int64(2)}, {"c", "int", int64(3)}, {"arg3", "int", int64(4)}}},
		{name: "long strings", pid: 9, tid: 9, ev: strings.Repeat("e", 300),
			args:     []Arg{String(strings.Repeat("n", 200), strings.Repeat("v", 70000)), Bytes("b", bytes.Repeat([]byte{0xab}, 1000))},
			wantArgs: []dArg{{strings.Repeat("n", 200), "string", strings.Repeat("v", 70000)}, {"b", "string", strings.Repeat("ab", 1000)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := write(t, func(w *Writer) {
				must(t, w.Process(tc.pid, tc.pname))
				must(t, w.Thread(tc.pid, tc.tid, tc.tname))
				must(t, w.Instant(42, tc.pid, tc.tid, tc.cat, tc.ev, tc.args))
			})
			d := decodeTrace(t, data)
			want := []dEvent{{TS: 42, PID: tc.pid, TID: tc.tid, Category: fix(tc.cat), Name: fix(tc.ev), Args: tc.wantArgs}}
			if diff := cmp.Diff(want, d.Events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			procs, threads := trackIndex(d)
			if got := procs[tc.pid].Name; got != fix(tc.pname) {
				t.Errorf("process name %q, want %q", got, fix(tc.pname))
			}
			if got := threads[[2]int32{tc.pid, tc.tid}].Name; got != fix(tc.tname) {
				t.Errorf("thread name %q, want %q", got, fix(tc.tname))
			}
		})
	}
}

func TestValidLen(t *testing.T) {
	for _, s := range []string{"", "abc", "\xff", "a\xff\xfeb", "\xc3", "é\x80é", "\xed\xa0\x80x", "\xf4\x90\x80\x80"} {
		want := strings.ToValidUTF8(s, "\uFFFD")
		if got := string(appendValid(nil, s)); got != want {
			t.Errorf("appendValid(%q) = %q, want %q", s, got, want)
		}
		if got := validLen(s); got != len(want) {
			t.Errorf("validLen(%q) = %d, want %d", s, got, len(want))
		}
	}
}

func TestUnknownArgKind(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must(t, w.Instant(1, 1, 1, "c", "good", []Arg{Uint("x", 1)}))
	must(t, w.Flush())
	before := buf.Len()

	for _, a := range []Arg{{Name: "zero"}, {Name: "high", Kind: ArgBool + 1}} {
		err := w.Instant(2, 1, 1, "newcat", "newname", []Arg{Uint("newarg", 1), a})
		if !errors.Is(err, ErrArgKind) {
			t.Fatalf("Instant with kind %d: %v, want ErrArgKind", a.Kind, err)
		}
		t.Log(err)
	}
	must(t, w.Flush())
	if buf.Len() != before {
		t.Fatalf("a rejected event wrote %d bytes", buf.Len()-before)
	}
	// The rejected event interned nothing: the same strings are defined
	// when they are first really used.
	must(t, w.Instant(3, 1, 1, "newcat", "newname", []Arg{Uint("newarg", 1)}))
	must(t, w.Flush())
	d := decodeTrace(t, buf.Bytes())
	want := []dEvent{
		{TS: 1, PID: 1, TID: 1, Category: "c", Name: "good", Args: []dArg{{"x", "uint", uint64(1)}}},
		{TS: 3, PID: 1, TID: 1, Category: "newcat", Name: "newname", Args: []dArg{{"newarg", "uint", uint64(1)}}},
	}
	if diff := cmp.Diff(want, d.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRename(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must(t, w.Instant(10, 1, 2, "", "e", nil)) // unnamed tracks
	must(t, w.Flush())
	n0 := buf.Len()
	must(t, w.Process(1, ""))   // no-op
	must(t, w.Thread(1, 2, "")) // no-op
	must(t, w.Flush())
	if buf.Len() != n0 {
		t.Errorf("describing known tracks without names wrote %d bytes", buf.Len()-n0)
	}
	must(t, w.Process(1, "proc"))
	must(t, w.Thread(1, 2, "thr"))
	must(t, w.Flush())
	n1 := buf.Len()
	must(t, w.Process(1, "proc")) // unchanged: no-op
	must(t, w.Thread(1, 2, "thr"))
	must(t, w.Flush())
	if buf.Len() != n1 {
		t.Errorf("re-describing with the same names wrote %d bytes", buf.Len()-n1)
	}
	must(t, w.Instant(20, 1, 2, "", "e", nil))
	must(t, w.Flush())

	d := decodeTrace(t, buf.Bytes())
	procs, threads := trackIndex(d)
	if len(procs) != 1 || len(threads) != 1 {
		t.Fatalf("%d process and %d thread tracks, want 1 and 1", len(procs), len(threads))
	}
	if procs[1].Name != "proc" || threads[[2]int32{1, 2}].Name != "thr" {
		t.Errorf("names %q %q, want proc thr", procs[1].Name, threads[[2]int32{1, 2}].Name)
	}
	if len(d.Events) != 2 {
		t.Errorf("%d events, want 2", len(d.Events))
	}
}

type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errDiskFull
	}
	f.n--
	return len(p), nil
}

func TestWriteErrorSticks(t *testing.T) {
	w := NewWriter(&failWriter{})
	// Fill the buffer so that a write reaches the failing writer.
	big := []Arg{String("s", strings.Repeat("x", 100<<10))}
	err := w.Instant(1, 1, 1, "c", "e", big)
	if err == nil {
		err = w.Flush()
	}
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("got %v, want disk full", err)
	}
	for _, err := range []error{
		w.Instant(2, 1, 1, "c", "e", nil), w.Process(3, "p"), w.Thread(3, 4, "t"), w.Flush(),
	} {
		if !errors.Is(err, errDiskFull) {
			t.Errorf("after a failure: %v, want disk full", err)
		}
	}
}

// An empty trace is a valid (empty) Trace.
func TestEmpty(t *testing.T) {
	d := decodeTrace(t, write(t, func(*Writer) {}))
	if len(d.Events) != 0 || len(d.Tracks) != 0 {
		t.Errorf("empty trace decoded to %+v", d)
	}
}

func benchArgs() []Arg {
	return []Arg{
		Uint("common_pid", 1234),
		Uint("count", 987654321),
		Int("delta", -42),
		String("msg", "request handled"),
		Bytes("id", []byte{1, 2, 3, 4, 5, 6, 7, 8}),
	}
}

// Instant allocates nothing once its strings are interned and its tracks
// described.
func TestInstantAllocs(t *testing.T) {
	w := NewWriter(discard{})
	args := benchArgs()
	tids := []int32{1, 2, 3}
	must(t, w.Instant(1, 1, 1, "user_events", "bench", args))
	for _, tid := range tids {
		must(t, w.Instant(1, 1, tid, "user_events", "bench2", args))
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		if err := w.Instant(uint64(i), 1, tids[i%len(tids)], "user_events", []string{"bench", "bench2"}[i%2], args); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Instant, want 0", allocs)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkInstant(b *testing.B) {
	var n countWriter
	w := NewWriter(&n)
	args := benchArgs()
	must(b, w.Instant(1, 100, 101, "user_events", "my_event", args))
	ts := uint64(1_000_000_000)
	b.ReportAllocs()
	start := n
	for b.Loop() {
		ts += 1000
		if err := w.Instant(ts, 100, 101, "user_events", "my_event", args); err != nil {
			b.Fatal(err)
		}
	}
	must(b, w.Flush())
	b.ReportMetric(float64(n-start)/float64(b.N), "B/event")
}

// BenchmarkInstantThreads spreads events over 64 threads and 8 event
// names, so the last-thread and intern caches miss some of the time.
func BenchmarkInstantThreads(b *testing.B) {
	w := NewWriter(discard{})
	args := benchArgs()
	names := []string{"ev0", "ev1", "ev2", "ev3", "ev4", "ev5", "ev6", "ev7"}
	for tid := range int32(64) {
		for _, name := range names {
			must(b, w.Instant(1, tid/8, tid, "user_events", name, args))
		}
	}
	ts := uint64(1_000_000_000)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		ts += 1000
		i++
		tid := int32(i*7) & 63
		if err := w.Instant(ts, tid/8, tid, "user_events", names[i&7], args); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// The constant tags are what protowire would encode.
func TestTags(t *testing.T) {
	for _, tc := range []struct {
		tag  byte
		num  protowire.Number
		typ  protowire.Type
		name string
	}{
		{tagPacket, fieldTracePacket, protowire.BytesType, "Trace.packet"},
		{tagTimestamp, fieldPacketTimestamp, protowire.VarintType, "TracePacket.timestamp"},
		{tagSequenceID, fieldPacketSequenceID, protowire.VarintType, "TracePacket.trusted_packet_sequence_id"},
		{tagSequenceFlags, fieldPacketSequenceFlags, protowire.VarintType, "TracePacket.sequence_flags"},
		{tagInternedData, fieldPacketInternedData, protowire.BytesType, "TracePacket.interned_data"},
		{tagTrackEvent, fieldPacketTrackEvent, protowire.BytesType, "TracePacket.track_event"},
		{tagEventTrack, fieldEventTrackUUID, protowire.VarintType, "TrackEvent.track_uuid"},
		{tagEventType, fieldEventType, protowire.VarintType, "TrackEvent.type"},
		{tagEventCategory, fieldEventCategoryIID, protowire.VarintType, "TrackEvent.category_iids"},
		{tagEventName, fieldEventNameIID, protowire.VarintType, "TrackEvent.name_iid"},
		{tagAnnotation, fieldEventAnnotation, protowire.BytesType, "TrackEvent.debug_annotations"},
		{tagAnnName, fieldAnnNameIID, protowire.VarintType, "DebugAnnotation.name_iid"},
		{tagAnnBool, fieldAnnBool, protowire.VarintType, "DebugAnnotation.bool_value"},
		{tagAnnUint, fieldAnnUint, protowire.VarintType, "DebugAnnotation.uint_value"},
		{tagAnnInt, fieldAnnInt, protowire.VarintType, "DebugAnnotation.int_value"},
		{tagAnnString, fieldAnnString, protowire.BytesType, "DebugAnnotation.string_value"},
	} {
		want := protowire.AppendTag(nil, tc.num, tc.typ)
		if len(want) != 1 || want[0] != tc.tag {
			t.Errorf("%s: tag %#x, protowire encodes % x", tc.name, tc.tag, want)
		}
	}
}
