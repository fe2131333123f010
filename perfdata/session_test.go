package perfdata

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
)

// seen is what a test compares of a delivered sample.
type seen struct {
	Event         string // Event.String(), "" when nil
	Comm, Process string
	PID, TID, CPU uint32
	Time, Wall    uint64
}

// readSession reads every sample of r through a session with o, and the
// names the session gave threads ("pid/tid=name", in order among the
// samples, as "name" in Event).
func readSession(tb testing.TB, r *Reader, o *SessionOptions) ([]seen, *Session) {
	tb.Helper()
	var got []seen
	var so SessionOptions
	if o != nil {
		so = *o
	}
	so.Comm = func(pid, tid uint32, comm string) error {
		got = append(got, seen{Event: "name", Comm: comm, PID: pid, TID: tid})
		return nil
	}
	s, err := NewSession(r, &so)
	if err != nil {
		tb.Fatal(err)
	}
	for {
		smp, err := s.Next()
		if err == io.EOF {
			return got, s
		}
		if err != nil {
			tb.Fatal(err)
		}
		sn := seen{Comm: smp.Comm, Process: smp.ProcessComm, PID: smp.PID, TID: smp.TID, CPU: smp.CPU, Time: smp.Time, Wall: smp.Wall}
		if smp.Event != nil {
			sn.Event = smp.Event.String()
		}
		got = append(got, sn)
	}
}

// Times of the ring file, in µs after testTime0.
func at(us uint64) uint64 { return testTime0 + us*1000 }

// writeRingFile writes what a recorder of two CPUs' rings writes: each
// round the records of CPU 0's ring, then CPU 1's, each ring in time
// order; task names at time 0 (read from /proc at the start) and during
// the recording, a thread made by a named one, and a record read a round
// late. It returns the samples in time order, as perf script shows them.
func writeRingFile(tb testing.TB, w *Writer) []seen {
	tb.Helper()
	ev := testEvent(tb)
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	a := testAttr()
	a.SampleType = SampleIdentifier | SampleTID | SampleTime | SampleCPU | SampleRaw
	_, err := w.AddAttr(a)
	check(err)
	w.SetTracingData(testTracingData(ev))
	trailer := func(cpu, pid, tid uint32, t uint64) *Sample {
		return &Sample{ID: testIDBase + uint64(cpu), PID: pid, TID: tid, Time: t, CPU: cpu}
	}
	sample := func(cpu, tid uint32, us uint64) {
		tb.Helper()
		check(w.WriteSample(&Sample{ID: testIDBase + uint64(cpu), PID: 10, TID: tid, Time: at(us), CPU: cpu, Raw: testRecord(tb, ev, int(us))}))
	}
	check(w.WriteComm(10, 10, "main", nil))
	check(w.WriteComm(10, 11, "worker", nil))
	// Round 1.
	sample(0, 10, 100)
	sample(0, 10, 300)
	sample(0, 10, 500)
	sample(1, 11, 200)
	sample(1, 11, 400)
	check(w.WriteComm(10, 11, "renamed", trailer(1, 10, 11, at(450))))
	sample(1, 11, 600)
	check(w.WriteFinishedRound())
	// Round 2: thread 11 makes thread 12.
	sample(0, 10, 700)
	check(w.WriteFork(10, 10, 12, 11, at(750), trailer(0, 10, 12, at(750))))
	sample(0, 12, 800)
	sample(1, 11, 650)
	sample(1, 11, 900)
	check(w.WriteFinishedRound())
	// Round 3: CPU 1's ring gives a record older than round 1's end,
	// which round 2's flush delivered up to.
	sample(0, 10, 1000)
	sample(1, 11, 550)
	check(w.WriteFinishedRound())

	s := func(cpu, tid uint32, us uint64, comm string) seen {
		return seen{Event: "user_events:test", Comm: comm, Process: "main", PID: 10, TID: tid, CPU: cpu, Time: at(us)}
	}
	return []seen{
		{Event: "name", Comm: "main", PID: 10, TID: 10},
		{Event: "name", Comm: "worker", PID: 10, TID: 11},
		s(0, 10, 100, "main"), s(1, 11, 200, "worker"), s(0, 10, 300, "main"), s(1, 11, 400, "worker"),
		{Event: "name", Comm: "renamed", PID: 10, TID: 11},
		s(0, 10, 500, "main"), s(1, 11, 600, "renamed"),
		// Late, but first of the next flush.
		s(1, 11, 550, "renamed"),
		s(1, 11, 650, "renamed"), s(0, 10, 700, "main"),
		{Event: "name", Comm: "renamed", PID: 10, TID: 12},
		s(0, 12, 800, "renamed"), s(1, 11, 900, "renamed"),
		s(0, 10, 1000, "main"),
	}
}

// newMemWriter is a Writer into memory.
func newMemWriter(tb testing.TB) (*Writer, *memFile) {
	tb.Helper()
	m := new(memFile)
	w, err := NewWriter(m)
	if err != nil {
		tb.Fatal(err)
	}
	return w, m
}

// ringFile is the file of writeRingFile, in memory, with clock data if
// clock is not nil, and its samples.
func ringFile(tb testing.TB, clock *ClockData) ([]byte, []seen) {
	tb.Helper()
	w, m := newMemWriter(tb)
	want := writeRingFile(tb, w)
	w.SetClockData(clock)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return m.b, want
}

// TestSessionOrder: a session delivers the samples of many rings in time
// order, round by round, each with the name its task had then — renamed,
// or named at its making by its maker — and a record read late with the
// next round, counted; as perf script shows them.
func TestSessionOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rings.data")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	want := writeRingFile(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, s := readSession(t, r, nil)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples and names (-want +got):\n%s", diff)
	}
	if st := s.Stats(); st.Samples != 12 || st.Unordered != 1 || st.Unknown != 0 || st.Lost != 0 {
		t.Errorf("stats %+v, want 12 samples, 1 unordered", st)
	}

	t.Run("perf", func(t *testing.T) {
		needPerf(t)
		out, _ := runPerf(t, "script", "-i", path, "-F", "comm,tid,cpu,time")
		var lines []string
		for _, sn := range want {
			if sn.Event != "name" {
				lines = append(lines, strings.Join(strings.Fields(fmt.Sprintf("%s %d [%03d] %s:", sn.Comm, sn.TID, sn.CPU, perfTime(sn.Time))), " "))
			}
		}
		var perfLines []string
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 0 {
				perfLines = append(perfLines, strings.Join(f, " "))
			}
		}
		if diff := cmp.Diff(lines, perfLines); diff != "" {
			t.Errorf("perf script's order and names differ from the session's (-session +perf):\n%s", diff)
		}
	})
}

// TestSessionUnmapped: a stream read into memory (not mapped) gives the
// same; with Retain every sample's Raw stays as it was until the end.
func TestSessionUnmapped(t *testing.T) {
	file, want := ringFile(t, nil)
	for _, retain := range []bool{false, true} {
		r := openBytes(t, file)
		if r.Mapped() {
			t.Fatal("a Reader of bytes is mapped")
		}
		got, _ := readSession(t, r, &SessionOptions{Retain: retain})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("retain %v: (-want +got):\n%s", retain, diff)
		}
	}
	s, err := NewSession(openBytes(t, file), &SessionOptions{Retain: true})
	if err != nil {
		t.Fatal(err)
	}
	var raws, copies [][]byte
	for {
		smp, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raws, copies = append(raws, smp.Raw), append(copies, bytes.Clone(smp.Raw))
	}
	for i := range raws {
		if !bytes.Equal(raws[i], copies[i]) {
			t.Fatalf("sample %d's Raw changed after later samples were read, with Retain", i)
		}
	}
}

// TestSessionMaxQueue: without rounds the whole file would wait; with
// MaxQueue the older half is delivered whenever the queue is full, so the
// session holds no more than MaxQueue and a record, in order still.
func TestSessionMaxQueue(t *testing.T) {
	ev := testEvent(t)
	path := filepath.Join(t.TempDir(), "norounds.data")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a := testAttr()
	if _, err := w.AddAttr(a); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var want []uint64
	for i := range n {
		// Two rings' records, interleaved in blocks of ten.
		us := uint64(i/20*20 + i%10*2 + i/10%2)
		want = append(want, at(us))
		if err := w.WriteSample(&Sample{ID: testIDBase, PID: 1, TID: 1, Time: at(us), Raw: testRecord(t, ev, i)}); err != nil {
			t.Fatal(err)
		}
	}
	w.SetTracingData(testTracingData(ev))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const limit = 50 * (queuedSize + 64)
	s, err := NewSession(r, &SessionOptions{MaxQueue: limit})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	most := 0
	for {
		smp, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, smp.Time)
		most = max(most, s.held)
	}
	if most > limit+queuedSize+len(testRecord(t, ev, n))+8 {
		t.Errorf("the session held %d bytes, MaxQueue is %d", most, limit)
	}
	if !slices.Equal(got, want) {
		t.Errorf("times delivered out of order: %v", got)
	}
	if st := s.Stats(); st.Unordered != 0 || st.Samples != n {
		t.Errorf("stats %+v", st)
	}
}

// TestSessionEvents: events are named by their attr's name, else their
// format's, else their type and config; a sample finds its event by its
// id — the later attr's of two that list it, the only attr's whatever its
// id — or has none (counted); lost records count per event and in all.
func TestSessionEvents(t *testing.T) {
	ev := testEvent(t)
	td := testTracingData(ev)
	named := Attr{Name: "user_events:named", Type: TypeTracepoint, Config: 77, SampleType: SampleIdentifier | SampleTime | SampleRaw, Flags: AttrSampleIDAll, IDs: []uint64{1}}
	byFormat := Attr{Type: TypeTracepoint, Config: testTypeID, SampleType: named.SampleType, Flags: AttrSampleIDAll, IDs: []uint64{3}}
	cycles := Attr{Name: "cycles", Type: TypeHardware, SampleType: named.SampleType, Flags: AttrSampleIDAll, IDs: []uint64{4}}
	none := Attr{Type: TypeSoftware, Config: 9, SampleType: named.SampleType, Flags: AttrSampleIDAll, IDs: []uint64{5}}
	rec := func(id, time uint64) []byte { return sampleRecord(id, time, 0) }
	lost := func(id, n uint64) []byte {
		b := ne.AppendUint32(nil, RecordLost)
		b = ne.AppendUint16(b, 0)
		b = ne.AppendUint16(b, 8+16+16)
		b = ne.AppendUint64(b, id)
		b = ne.AppendUint64(b, n)
		b = ne.AppendUint64(b, 0)     // trailer: time
		return ne.AppendUint64(b, id) // and identifier
	}
	lostSamples := func(n uint64) []byte {
		b := ne.AppendUint32(nil, RecordLostSamples)
		b = ne.AppendUint16(b, 0)
		b = ne.AppendUint16(b, 8+8+16)
		b = ne.AppendUint64(b, n)
		b = ne.AppendUint64(b, 0)
		return ne.AppendUint64(b, 1)
	}
	w, m := newMemWriter(t)
	for _, a := range []Attr{named, byFormat, cycles, none} {
		if _, err := w.AddAttr(a); err != nil {
			t.Fatal(err)
		}
	}
	w.SetTracingData(td)
	for _, b := range [][]byte{rec(1, 10), rec(3, 30), rec(4, 40), rec(5, 50), rec(6, 60), lost(3, 7), lost(9, 2), lostSamples(4)} {
		if err := w.WriteRecord(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openBytes(t, m.b)
	got, s := readSession(t, r, nil)
	var names []string
	for _, g := range got {
		names = append(names, g.Event)
	}
	// The sample of no attr first: its time is not known (nor anything
	// after its id): it is taken for 0.
	want := []string{"", "user_events:named", "user_events:test", "cycles", "type1:config9"}
	if !slices.Equal(names, want) {
		t.Errorf("events of the samples %q, want %q", names, want)
	}
	evs := s.Events()
	if len(evs) != 4 || evs[1].Format == nil || evs[1].Format.System != eventdef.System || evs[0].Format != nil || evs[2].System != "" || evs[2].Name != "cycles" {
		t.Fatalf("events %+v", evs)
	}
	for i, e := range evs {
		if e.Index != i {
			t.Errorf("event %s has index %d, want %d", e, e.Index, i)
		}
	}
	if evs[1].Lost != 7 {
		t.Errorf("%s lost %d, want 7", evs[1], evs[1].Lost)
	}
	if st := s.Stats(); st.Unknown != 1 || st.Lost != 9 || st.LostSamples != 4 || st.Samples != 5 {
		t.Errorf("stats %+v, want 1 unknown, 9 lost, 4 lost samples, 5 samples", st)
	}

	// A sample id two attrs list is the later one's (the Writer refuses
	// such a file; perf record -o - | perf inject can make one).
	// (buildFile writes no event names: events are named by config.)
	other := named
	other.Config = 78
	b := buildFile(AttrSizeVer7, []Attr{named, other}, rec(1, 1))
	if got, _ = readSession(t, openBytes(t, b), nil); len(got) != 1 || got[0].Event != "type2:config78" {
		t.Errorf("the sample of an id of two attrs: %+v", got)
	}
	// One attr: every sample is its, whatever its id.
	b = buildFile(AttrSizeVer7, []Attr{named}, rec(99, 1))
	if got, _ = readSession(t, openBytes(t, b), nil); len(got) != 1 || got[0].Event != "type2:config77" {
		t.Errorf("the only attr's sample: %+v", got)
	}
}

// TestSessionBadFormat: tracing data whose format does not parse is an
// error at NewSession, which names the system.
func TestSessionBadFormat(t *testing.T) {
	w, m := newMemWriter(t)
	if _, err := w.AddAttr(testAttr()); err != nil {
		t.Fatal(err)
	}
	w.SetTracingData(&TracingData{Systems: []TracingSystem{{Name: "broken", Formats: [][]byte{[]byte("name: x\nID: 5\nformat:\n\tfield:what;\n")}}}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := NewSession(openBytes(t, m.b), nil)
	if err == nil || !strings.Contains(err.Error(), "tracing data of broken") {
		t.Errorf("NewSession: %v, want an error naming the system", err)
	}
}

// TestSessionPipe: a pipe-mode stream's attr that comes after samples
// becomes an event when it comes; the stream read by perf record -o - and
// the file give the same samples.
func TestSessionPipe(t *testing.T) {
	for _, name := range []string{"sched_switch.data", "sched_switch_pipe.data"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, s := readSession(t, openBytes(t, b), nil)
		if len(s.Events()) == 0 || s.Stats().Samples == 0 {
			t.Fatalf("%s: %d events, stats %+v", name, len(s.Events()), s.Stats())
		}
		for i := 1; i < len(got); i++ {
			if got[i].Event != "name" && got[i].Time < got[i-1].Time && s.Stats().Unordered == 0 {
				t.Fatalf("%s: sample %d at %d after one at %d", name, i, got[i].Time, got[i-1].Time)
			}
		}
	}

	// An attr added after the first samples, as perf writes one for an
	// event it finds late.
	ev := testEvent(t)
	a, late := testAttr(), otherAttr()
	var stream []byte
	stream = ne.AppendUint64(stream, magic)
	stream = ne.AppendUint64(stream, pipeHeaderSize)
	headerAttr := func(a Attr) []byte {
		body := appendAttr(nil, &a, AttrSizeVer7)
		for _, id := range a.IDs {
			body = ne.AppendUint64(body, id)
		}
		h := ne.AppendUint32(nil, RecordHeaderAttr)
		h = ne.AppendUint16(h, 0)
		h = ne.AppendUint16(h, uint16(8+len(body)))
		return append(h, body...)
	}
	stream = append(stream, headerAttr(a)...)
	sample := func(id, time uint64) []byte {
		// testSampleType: identifier, ip, tid, time, cpu, period, raw.
		raw := padRaw(testRecord(t, ev, 0))
		b := ne.AppendUint32(nil, RecordSample)
		b = ne.AppendUint16(b, 0)
		b = ne.AppendUint16(b, uint16(8+6*8+4+len(raw)))
		for _, v := range []uint64{id, 0, uint64(testTID)<<32 | testPID, time, testCPU, 1} {
			b = ne.AppendUint64(b, v)
		}
		b = ne.AppendUint32(b, uint32(len(raw)))
		return append(b, raw...)
	}
	stream = append(stream, sample(testIDBase, at(1))...)
	stream = append(stream, headerAttr(late)...)
	stream = append(stream, sample(otherIDBase, at(2))...)
	got, s := readSession(t, openBytes(t, stream), nil)
	// A stream without tracing data or event names: events by type and
	// config.
	if len(got) != 2 || got[0].Event != "type2:config1234" || got[1].Event != "type2:config1235" || len(s.Events()) != 2 || s.Events()[1].Index != 1 {
		t.Errorf("samples %+v, events %v", got, s.Events())
	}
}

// TestSessionWall: a file with clock data gives each sample its
// wall-clock time.
func TestSessionWall(t *testing.T) {
	file, _ := ringFile(t, &ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNS: 1_700_000_000_000_000_000, ClockNS: testTime0})
	got, _ := readSession(t, openBytes(t, file), nil)
	for _, g := range got {
		if g.Event != "name" && g.Wall != 1_700_000_000_000_000_000+g.Time-testTime0 {
			t.Errorf("sample at %d has wall-clock time %d", g.Time, g.Wall)
		}
	}
}

// TestSessionCommError: an error of the Comm callback is Next's.
func TestSessionCommError(t *testing.T) {
	file, _ := ringFile(t, nil)
	stop := errors.New("stop")
	s, err := NewSession(openBytes(t, file), &SessionOptions{Comm: func(uint32, uint32, string) error { return stop }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != stop {
		t.Errorf("Next: %v, want the callback's error", err)
	}
}

// TestThreads: names by tid, a thread made by a named one takes its name,
// the cache answers as the map does.
func TestThreads(t *testing.T) {
	var th Threads
	if _, ok := th.Comm(1); ok {
		t.Fatal("a name in an empty Threads")
	}
	th.SetComm(1, "one")
	th.SetComm(65, "sixty-five") // the same cache slot as 1
	if n, ok := th.Comm(1); !ok || n != "one" {
		t.Errorf("Comm(1) = %q, %v", n, ok)
	}
	if n, ok := th.Fork(2, 65); !ok || n != "sixty-five" {
		t.Errorf("Fork(2, 65) = %q, %v", n, ok)
	}
	if n, _ := th.Comm(2); n != "sixty-five" {
		t.Errorf("Comm(2) = %q after the fork", n)
	}
	if _, ok := th.Fork(3, 4); ok {
		t.Error("a thread made by one without a name has a name")
	}
	th.SetComm(5, "")
	if _, ok := th.Fork(6, 5); ok {
		t.Error("a thread made by one named \"\" has a name")
	}
	th.SetComm(1, "uno")
	if n, _ := th.Comm(1); n != "uno" {
		t.Errorf("Comm(1) = %q after a rename", n)
	}
}

// TestEventHeaderEvent: an event is an EventHeader tracepoint when its
// format has EventHeader's one field and its name is a tracepoint name,
// a multi-format event's "name.<hexid>" too; its records decode only when
// they do whole.
func TestEventHeaderEvent(t *testing.T) {
	def, err := eventdef.Parse("MyApp_L4K1 " + eventheader.CommandTypes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		eh   bool
	}{
		{"MyApp_L4K1", true},
		{"MyApp_L4K1.1f", true},
		{"MyApp_L4K1Gg.2", true},
		{"MyApp_L4K1.x", false},
		{"not_eventheader", false},
	} {
		e, err := NewEvent("user_events", tc.name, []byte(def.Format(tc.name, 7)))
		if err != nil {
			t.Fatal(err)
		}
		if e.IsEventHeader() != tc.eh {
			t.Errorf("%s: IsEventHeader %v, want %v", tc.name, e.IsEventHeader(), tc.eh)
		}
		if _, ok := e.EventHeader(make([]byte, 8)); ok {
			t.Errorf("%s: a record of no EventHeader event decodes", tc.name)
		}
	}
	// A record whose last field ends short: EventHeader, which reads every
	// field first, refuses it; EventHeaderHead decodes its header and
	// metadata, and the fields' iteration stops with an error at the last.
	e, err := NewEvent("user_events", "MyApp_L4K1", []byte(def.Format("MyApp_L4K1", 7)))
	if err != nil {
		t.Fatal(err)
	}
	var b eventheader.Builder
	b.Reset("E", eventheader.Header{Level: 4})
	b.AddInt32("a", 1, 0)
	b.AddInt32("b", 2, 0)
	whole, err := b.AppendEvent(make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.EventHeader(whole); !ok {
		t.Error("EventHeader of a whole record: not ok")
	}
	short := whole[:len(whole)-1]
	if _, ok := e.EventHeader(short); ok {
		t.Error("EventHeader of a record ending short: ok")
	}
	ev, ok := e.EventHeaderHead(short)
	if !ok || string(ev.EventName()) != "E" {
		t.Fatalf("EventHeaderHead of a record ending short: %v, name %q", ok, ev.EventName())
	}
	f, n := ev.Fields(), 0
	for f.Next() {
		n++
	}
	if n != 1 || f.Err() == nil {
		t.Errorf("%d fields read before the short one (want 1), then %v (want an error)", n, f.Err())
	}

	plain, err := NewEvent("user_events", "MyApp_L4K1", []byte(testEvent(t).Format("MyApp_L4K1", 8)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.EventHeaderHead(whole); ok {
		t.Error("EventHeaderHead of an event of other fields: ok")
	}
	if plain.IsEventHeader() {
		t.Error("an event of other fields is an EventHeader tracepoint")
	}
	if _, err := NewEvent("user_events", "x", []byte("not a format")); err == nil || !strings.Contains(err.Error(), "format of user_events:x") {
		t.Errorf("NewEvent of a bad format: %v", err)
	}
	if e, err := NewEvent("", "x", nil); err != nil || e.String() != "x" || e.Format != nil {
		t.Errorf("NewEvent without a system or format: %v, %v", e, err)
	}
}
