package perfdata

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
)

// The user event of the checks against real perf: the format text is what
// the kernel prints for "u:test u32 a; u64 b; char[8] c; __rel_loc char[] msg".
const (
	testCommand = "test u32 a; u64 b; char[8] c; __rel_loc char[] msg"
	testTypeID  = 1234 // the tracefs id of the event (common_type)
	testPID     = 4242
	testTID     = 4243
	testComm    = "uetrace-test"
	testCPU     = 1
	testTime0   = 5_000_123_456_000 // ns: 5000.123456 s
	testIDBase  = 100               // sample ids testIDBase, testIDBase+1
)

// testSampleType is what perf record gives a tracepoint, IDENTIFIER included.
const testSampleType = SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleRaw

func testEvent(tb testing.TB) *eventdef.Event {
	tb.Helper()
	ev, err := eventdef.Parse(testCommand)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// testRecord builds the raw record of sample i of the test event: the
// 8-byte common header and the payload.
func testRecord(tb testing.TB, ev *eventdef.Event, i int) []byte {
	tb.Helper()
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(uint64(i + 1))
	enc.Uint(uint64(1000000000000 + i))
	enc.String(fmt.Sprintf("c%d", i))
	enc.String(fmt.Sprintf("hello %d", i))
	payload, err := enc.Payload()
	if err != nil {
		tb.Fatal(err)
	}
	rec := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
	binary.NativeEndian.PutUint16(rec[0:], testTypeID)
	rec[2] = 0 // common_flags
	rec[3] = 0 // common_preempt_count
	binary.NativeEndian.PutUint32(rec[4:], testTID)
	return append(rec, payload...)
}

// testTracingData is the tracing data of a file of the test event.
func testTracingData(ev *eventdef.Event) *TracingData {
	return &TracingData{
		HeaderPage:  []byte(HeaderPage),
		HeaderEvent: []byte(HeaderEvent),
		Systems: []TracingSystem{{
			Name:    eventdef.System,
			Formats: [][]byte{[]byte(ev.Format("test", testTypeID))},
		}},
	}
}

func testAttr() Attr {
	return Attr{
		Name:         "user_events:test",
		Type:         TypeTracepoint,
		Config:       testTypeID,
		SamplePeriod: 1,
		SampleType:   testSampleType,
		Flags:        AttrDisabled | AttrInherit | AttrSampleIDAll | AttrExcludeGuest,
		Wakeup:       1,
		IDs:          []uint64{testIDBase, testIDBase + 1},
	}
}

func testMeta() Meta {
	return Meta{
		Hostname:     "testhost",
		OSRelease:    "6.12.0-test",
		Version:      "uetrace test",
		Arch:         "x86_64",
		NrCPUsAvail:  2,
		NrCPUsOnline: 2,
		Cmdline:      []string{"/usr/bin/uetrace", "record", "-e", "user_events:test"},
	}
}

// The second event of the test files, added after the first samples.
const (
	otherCommand = "other u32 x"
	otherTypeID  = 1235
	otherIDBase  = 200
)

func otherAttr() Attr {
	a := testAttr()
	a.Name = "user_events:other"
	a.Config = otherTypeID
	a.IDs = []uint64{otherIDBase}
	return a
}

func otherRecord(tb testing.TB, ev *eventdef.Event, j int) []byte {
	tb.Helper()
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(uint64(77 + j))
	payload, err := enc.Payload()
	if err != nil {
		tb.Fatal(err)
	}
	rec := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
	binary.NativeEndian.PutUint16(rec[0:], otherTypeID)
	binary.NativeEndian.PutUint32(rec[4:], testTID)
	return append(rec, payload...)
}

// A testFile is a file written by writeTestFile and what it holds.
type testFile struct {
	path    string
	attrs   []Attr
	tracing *TracingData
	meta    Meta
	records []testRec
}

// testRec is what a test compares of a Record: no offsets or aliases.
type testRec struct {
	Type       RecordType
	Misc       uint16
	Attr       string // the name of Record.Attr, "" when nil
	Sample     Sample
	PID, TID   uint32
	PPID, PTID uint32
	Time       uint64
	Comm       string
	ID, Lost   uint64
	Data       []byte // only for records other than SAMPLE, COMM, FORK, EXIT and LOST
}

func toTestRec(r *Record) testRec {
	t := testRec{Type: r.Type, Misc: r.Misc, Sample: r.Sample, PID: r.PID, TID: r.TID, PPID: r.PPID, PTID: r.PTID, Time: r.Time,
		Comm: string(r.Comm), ID: r.ID, Lost: r.Lost}
	if r.Attr != nil {
		t.Attr = r.Attr.Name
	}
	switch r.Type {
	case RecordSample, RecordComm, RecordFork, RecordExit, RecordLost:
	default:
		t.Data = r.Data
	}
	return t
}

// padRaw is raw as a Reader returns it: with the writer's zero padding.
func padRaw(raw []byte) []byte {
	n := (4+len(raw)+7)&^7 - 4
	return append(append([]byte(nil), raw...), make([]byte, n-len(raw))...)
}

// writeTestFile writes a file of n samples of the test event and, from
// sample n/2 on, every third sample of the other event (added to the
// writer then), a COMM of their task first, a FINISHED_ROUND after every
// 4 samples and, with lost, a LOST at the end. It returns what it wrote.
func writeTestFile(tb testing.TB, dir string, n int, lost bool) *testFile {
	tb.Helper()
	ev := testEvent(tb)
	other, err := eventdef.Parse(otherCommand)
	if err != nil {
		tb.Fatal(err)
	}
	tf := &testFile{
		path:    filepath.Join(dir, "test.data"),
		attrs:   []Attr{testAttr(), otherAttr()},
		tracing: testTracingData(ev),
		meta:    testMeta(),
	}
	tf.tracing.Systems[0].Formats = append(tf.tracing.Systems[0].Formats, []byte(other.Format("other", otherTypeID)))
	w, err := Create(tf.path)
	if err != nil {
		tb.Fatal(err)
	}
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	_, err = w.AddAttr(testAttr())
	check(err)
	// The comm comes before the samples, with the time of the first.
	comm := Sample{PID: testPID, TID: testTID, Time: testTime0, CPU: testCPU, ID: testIDBase}
	check(w.WriteComm(testPID, testTID, testComm, &comm))
	tf.records = append(tf.records, testRec{Type: RecordComm, Attr: "user_events:test", Sample: comm, PID: testPID, TID: testTID, Comm: testComm})
	// A thread the test task makes, as the kernel reports it with attr.task.
	fork := Sample{PID: testPID, TID: testTID + 1, Time: testTime0, CPU: testCPU, ID: testIDBase}
	check(w.WriteFork(testPID, testPID, testTID+1, testTID, testTime0, &fork))
	tf.records = append(tf.records, testRec{Type: RecordFork, Attr: "user_events:test", Sample: fork,
		PID: testPID, PPID: testPID, TID: testTID + 1, PTID: testTID, Time: testTime0})
	round := func() {
		check(w.WriteFinishedRound())
		tf.records = append(tf.records, testRec{Type: RecordFinishedRound, Data: []byte{}})
	}
	w.SetTracingData(testTracingData(ev)) // replaced below, once other is known
	nOther := 0
	for i := range n {
		s := Sample{
			Misc:   MiscUser,
			ID:     testIDBase + uint64(i%2),
			PID:    testPID,
			TID:    testTID,
			Time:   testTime0 + uint64(len(tf.records))*1000,
			CPU:    testCPU,
			Period: 1,
			Raw:    testRecord(tb, ev, i),
		}
		name := "user_events:test"
		if i == n/2 {
			_, err := w.AddAttr(otherAttr())
			check(err)
		}
		if i >= n/2 && i%3 == 0 {
			s.ID = otherIDBase
			s.Raw = otherRecord(tb, other, nOther)
			name = "user_events:other"
			nOther++
		}
		check(w.WriteSample(&s))
		s.Raw = padRaw(s.Raw)
		tf.records = append(tf.records, testRec{Type: RecordSample, Misc: MiscUser, Attr: name, Sample: s})
		if i%4 == 3 {
			round()
		}
	}
	if lost {
		t := Sample{PID: testPID, TID: testTID, Time: testTime0 + uint64(len(tf.records))*1000, CPU: testCPU, ID: testIDBase}
		check(w.WriteLost(testIDBase, 7, &t))
		tf.records = append(tf.records, testRec{Type: RecordLost, Attr: "user_events:test", Sample: t, ID: testIDBase, Lost: 7})
	}
	round()
	w.SetTracingData(tf.tracing)
	w.SetMeta(testMeta())
	check(w.Close())
	return tf
}
