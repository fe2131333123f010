package report_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/perfdata"
)

var ne = binary.NativeEndian

// The events of the test files: two user events and one whose format the
// tracing data lacks.
const (
	xCommand = "x u32 a; s64 b; char[8] c; __rel_loc char[] msg; u8 d"
	xID      = 1001 // tracefs ids
	yCommand = "yy_event u64 big; s8 neg; s16 sh; struct pair p 6; __data_loc u8[] blob; __data_loc char[] txt"
	yID      = 1002
	goneID   = 1003
)

// Sample ids: one per event and CPU, as the kernel hands them out.
const (
	xID0, xID1, xID12 = 11, 12, 13 // x on CPUs 0, 1, 12
	yID0, yID1        = 21, 22
	goneID12          = 31
	unknownID         = 99 // in no attr
)

func mustParse(tb testing.TB, cmd string) *eventdef.Event {
	tb.Helper()
	ev, err := eventdef.Parse(cmd)
	if err != nil {
		tb.Fatalf("parse %q: %v", cmd, err)
	}
	return ev
}

// testEvents returns the parsed x and yy_event.
func testEvents(tb testing.TB) (x, y *eventdef.Event) {
	return mustParse(tb, xCommand), mustParse(tb, yCommand)
}

// attr is an attr as uetrace record writes it.
func attr(name string, config uint64, ids ...uint64) perfdata.Attr {
	return perfdata.Attr{
		Name:         name,
		Type:         perfdata.TypeTracepoint,
		Config:       config,
		SamplePeriod: 1,
		SampleType:   record.SampleType,
		Flags:        perfdata.AttrSampleIDAll,
		IDs:          ids,
	}
}

// tracingData holds the format files of the events, in system user_events.
func tracingData(formats ...string) *perfdata.TracingData {
	sys := perfdata.TracingSystem{Name: eventdef.System}
	for _, f := range formats {
		sys.Formats = append(sys.Formats, []byte(f))
	}
	return &perfdata.TracingData{
		HeaderPage:  []byte(perfdata.HeaderPage),
		HeaderEvent: []byte(perfdata.HeaderEvent),
		Systems:     []perfdata.TracingSystem{sys},
	}
}

// rawRecord is a tracepoint's raw record: the 8-byte common header
// (common_type, common_flags, common_preempt_count, common_pid) and the
// payload.
func rawRecord(typeID uint16, pid int32, payload []byte) []byte {
	raw := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
	ne.PutUint16(raw[0:], typeID)
	ne.PutUint32(raw[4:], uint32(pid))
	return append(raw, payload...)
}

// xRaw is the raw record of x.
func xRaw(tb testing.TB, ev *eventdef.Event, tid int32, a uint32, b int64, c, msg string, d uint8) []byte {
	tb.Helper()
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(uint64(a))
	enc.Int(b)
	enc.String(c)
	enc.String(msg)
	enc.Uint(uint64(d))
	p, err := enc.Payload()
	if err != nil {
		tb.Fatalf("x payload: %v", err)
	}
	return rawRecord(xID, tid, p)
}

// yRaw is the raw record of yy_event.
func yRaw(tb testing.TB, ev *eventdef.Event, tid int32, big uint64, neg int8, sh int16, p, blob []byte, txt string) []byte {
	tb.Helper()
	var enc eventdef.Encoder
	enc.Reset(ev, nil)
	enc.Uint(big)
	enc.Int(int64(neg))
	enc.Int(int64(sh))
	enc.Bytes(p)
	enc.Bytes(blob)
	enc.String(txt)
	pl, err := enc.Payload()
	if err != nil {
		tb.Fatalf("yy_event payload: %v", err)
	}
	return rawRecord(yID, tid, pl)
}

// sampleRecord encodes a PERF_RECORD_SAMPLE of record.SampleType by hand,
// for ids the Writer would refuse.
func sampleRecord(id uint64, pid, tid int32, ts uint64, cpu uint32, raw []byte) []byte {
	size := 8 + 8 + 8 + 8 + 8 + 4 + len(raw)
	pad := (8 - size%8) % 8
	var b []byte
	b = ne.AppendUint32(b, perfdata.RecordSample)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint16(b, uint16(size+pad))
	b = ne.AppendUint64(b, id)
	b = ne.AppendUint32(b, uint32(pid))
	b = ne.AppendUint32(b, uint32(tid))
	b = ne.AppendUint64(b, ts)
	b = ne.AppendUint32(b, cpu)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint32(b, uint32(len(raw)+pad))
	b = append(b, raw...)
	return append(b, make([]byte, pad)...)
}

// fileWriter wraps a perfdata.Writer with test failures for errors.
type fileWriter struct {
	tb   testing.TB
	w    *perfdata.Writer
	path string
}

func newFile(tb testing.TB, td *perfdata.TracingData, attrs ...perfdata.Attr) *fileWriter {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "perf.data")
	w, err := perfdata.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, a := range attrs {
		if _, err := w.AddAttr(a); err != nil {
			tb.Fatalf("AddAttr %s: %v", a.Name, err)
		}
	}
	if td != nil {
		w.SetTracingData(td)
	}
	return &fileWriter{tb: tb, w: w, path: path}
}

func (f *fileWriter) check(err error) {
	f.tb.Helper()
	if err != nil {
		f.tb.Fatal(err)
	}
}

func (f *fileWriter) sample(id uint64, pid, tid int32, ts uint64, cpu uint32, raw []byte) {
	f.tb.Helper()
	f.check(f.w.WriteSample(&perfdata.Sample{ID: id, PID: uint32(pid), TID: uint32(tid), Time: ts, CPU: cpu, Raw: raw}))
}

// comm writes a COMM; ts 0 writes the all-zero trailer of a task that
// existed before the recording.
func (f *fileWriter) comm(id uint64, pid, tid int32, name string, ts uint64, cpu uint32) {
	f.tb.Helper()
	var tr *perfdata.Sample
	if ts != 0 {
		tr = &perfdata.Sample{ID: id, PID: uint32(pid), TID: uint32(tid), Time: ts, CPU: cpu}
	}
	f.check(f.w.WriteComm(uint32(pid), uint32(tid), name, tr))
}

func (f *fileWriter) round() { f.tb.Helper(); f.check(f.w.WriteFinishedRound()) }

func (f *fileWriter) close() string {
	f.tb.Helper()
	f.check(f.w.Close())
	return f.path
}

// open opens a file for a report, closed at the end of the test.
func open(tb testing.TB, path string) *perfdata.Reader {
	tb.Helper()
	r, err := perfdata.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// run reports the file at path in format.
func run(tb testing.TB, path string, format report.Format) ([]byte, report.Summary) {
	tb.Helper()
	var out bytes.Buffer
	sum, err := report.Write(&out, open(tb, path), format)
	if err != nil {
		tb.Fatalf("report %s of %s: %v", format, path, err)
	}
	return out.Bytes(), sum
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
