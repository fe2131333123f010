package export_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/export/exporttest"
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
)

var ne = binary.NativeEndian

// The test file's events: the mix of exporttest — a plain user event,
// and an EventHeader event at two levels.
const (
	xCommand = exporttest.XCommand
	xID      = exporttest.XID
	ehInfo   = exporttest.EHInfo
	ehInfoID = exporttest.EHInfoID
	ehErr    = exporttest.EHErr
	ehErrID  = exporttest.EHErrID
	testPID  = 4242
	testComm = "exportme"
	// The file's clock data: monotonic clockNS was wall wallNS.
	clockNS = 1_000_000_000_000
	wallNS  = 1_764_000_000_000_000_000
)

// want is what the Collector must show of one sample.
type want struct {
	eventName string
	time      uint64
	severity  int32
	sevText   string
	attrs     map[string]otlp.Value
	sample    perfdata.Sample // as File gives it to the exporter
}

// testFile writes a perf.data file, as uetrace record would with perf
// record -k CLOCK_MONOTONIC's clock data, of n samples: x, the
// EventHeader info event and the EventHeader error event in turn, each
// with its sequence number seq (0..n-1) among its fields. It returns the
// path and what the Collector must show of each seq.
func testFile(tb testing.TB, n int) (string, []want) {
	tb.Helper()
	mix := exporttest.NewMix()
	formats := mix.Formats()
	td := &perfdata.TracingData{
		HeaderPage: []byte(perfdata.HeaderPage), HeaderEvent: []byte(perfdata.HeaderEvent),
		Systems: []perfdata.TracingSystem{{Name: eventdef.System, Formats: [][]byte{
			formats[xID], formats[ehInfoID], formats[ehErrID],
		}}},
	}
	events := map[uint16]*perfdata.Event{}
	for i, f := range td.Systems[0].Formats {
		name := []string{"x", ehInfo, ehErr}[i]
		ev, err := perfdata.NewEvent(eventdef.System, name, f)
		if err != nil {
			tb.Fatal(err)
		}
		events[uint16([]int{xID, ehInfoID, ehErrID}[i])] = ev
	}
	path := filepath.Join(tb.TempDir(), "perf.data")
	w, err := perfdata.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, a := range []struct {
		name string
		id   uint64
	}{{"user_events:x", xID}, {"user_events:" + ehInfo, ehInfoID}, {"user_events:" + ehErr, ehErrID}} {
		if _, err := w.AddAttr(perfdata.Attr{Name: a.name, Type: perfdata.TypeTracepoint, Config: a.id, SamplePeriod: 1,
			SampleType: record.SampleType, Flags: perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
			ClockID: unix.CLOCK_MONOTONIC, IDs: []uint64{a.id}}); err != nil {
			tb.Fatal(err)
		}
	}
	w.SetTracingData(td)
	w.SetClockData(&perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNS: wallNS, ClockNS: clockNS})
	check := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	check(w.WriteComm(testPID, testPID, testComm, nil))
	var wants []want
	for i := range n {
		ts := uint64(clockNS + 1_000_000 + i*1000)
		tid := uint32(testPID + i%3)
		wt := want{time: wallNS + 1_000_000 + uint64(i)*1000, attrs: map[string]otlp.Value{
			"thread.id": otlp.IntValue(int64(tid)), "linux.cpu": otlp.IntValue(int64(i % 2)),
		}}
		id, payload, err := mix.Event(i)
		check(err)
		switch i % 3 {
		case 0:
			wt.eventName = "user_events:x"
			wt.attrs["linux.tracepoint"] = otlp.StringValue("user_events:x")
			wt.attrs["seq"] = otlp.IntValue(int64(i))
			wt.attrs["neg"] = otlp.IntValue(-int64(i))
			wt.attrs["c"] = otlp.StringValue("c")
			wt.attrs["msg"] = otlp.StringValue(fmt.Sprintf("message %d ünïcode", i))
			wt.attrs["d"] = otlp.IntValue(int64(i % 256))
			wt.attrs["big"] = otlp.StringValue(fmt.Sprint(uint64(math.MaxUint64 - uint64(i))))
		default:
			tp, lvl := ehInfo, eventheader.LevelInformation
			wt.severity, wt.sevText = otlp.SeverityInfo, "INFO"
			if i%3 == 2 {
				tp, lvl = ehErr, eventheader.LevelError
				wt.severity, wt.sevText = otlp.SeverityError, "ERROR"
			}
			wt.eventName = "UetraceTest:Request"
			wt.attrs["linux.tracepoint"] = otlp.StringValue("user_events:" + tp)
			wt.attrs["eventheader.provider"] = otlp.StringValue("UetraceTest")
			wt.attrs["eventheader.level"] = otlp.IntValue(int64(lvl))
			wt.attrs["eventheader.keyword"] = otlp.IntValue(5)
			wt.attrs["eventheader.opcode"] = otlp.IntValue(1)
			wt.attrs["eventheader.id"] = otlp.IntValue(7)
			wt.attrs["eventheader.version"] = otlp.IntValue(2)
			wt.attrs["eventheader.activity_id"] = otlp.StringValue("01020304-0506-0708-090a-0b0c0d0e0f10")
			wt.attrs["seq"] = otlp.IntValue(int64(i))
			wt.attrs["path"] = otlp.StringValue("/p/" + fmt.Sprint(i))
			wt.attrs["ok"] = otlp.BoolValue(i%2 == 0)
			wt.attrs["ratio"] = otlp.DoubleValue(float64(i) / 4)
			wt.attrs["pt"] = otlp.MapValue([]otlp.KeyValue{{Key: "x", Value: otlp.IntValue(int64(i))}, {Key: "y", Value: otlp.IntValue(-int64(i))}})
			wt.attrs["arr"] = otlp.ArrayValue([]otlp.Value{otlp.IntValue(int64(uint16(i))), otlp.IntValue(2), otlp.IntValue(3)})
			wt.attrs["err"] = otlp.StringValue("ENOENT(2)")
		}
		raw := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+len(payload))
		ne.PutUint16(raw[0:], id)
		ne.PutUint32(raw[4:], tid)
		raw = append(raw, payload...)
		check(w.WriteSample(&perfdata.Sample{ID: uint64(id), PID: testPID, TID: tid, Time: ts, CPU: uint32(i % 2), Raw: raw}))
		if i%100 == 99 {
			check(w.WriteFinishedRound())
		}
		wt.sample = perfdata.Sample{ID: uint64(id), Event: events[id], Time: ts, Wall: wt.time, PID: testPID, TID: tid, CPU: uint32(i % 2), ProcessComm: testComm, Raw: raw}
		if tid == testPID {
			wt.sample.Comm = testComm
		}
		wants = append(wants, wt)
	}
	check(w.Close())
	return path, wants
}
