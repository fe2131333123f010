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
	"github.com/uetrace/uetrace/internal/otlp"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
)

var ne = binary.NativeEndian

// The test file's events: a plain user event, and an EventHeader event
// at two levels.
const (
	xCommand = "x u32 seq; s64 neg; char[8] c; __rel_loc char[] msg; u8 d; u64 big"
	xID      = 1001
	ehInfo   = "UetraceTest_L4K5"
	ehInfoID = 1002
	ehErr    = "UetraceTest_L2K5"
	ehErrID  = 1003
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
	x, err := eventdef.Parse(xCommand)
	if err != nil {
		tb.Fatal(err)
	}
	ehEv, err := eventdef.Parse(ehInfo + " " + eventheader.CommandTypes)
	if err != nil {
		tb.Fatal(err)
	}
	td := &perfdata.TracingData{
		HeaderPage: []byte(perfdata.HeaderPage), HeaderEvent: []byte(perfdata.HeaderEvent),
		Systems: []perfdata.TracingSystem{{Name: eventdef.System, Formats: [][]byte{
			[]byte(x.Format("x", xID)), []byte(ehEv.Format(ehInfo, ehInfoID)), []byte(ehEv.Format(ehErr, ehErrID)),
		}}},
	}
	events := map[uint16]*perfdata.Event{}
	for i, f := range td.Systems[0].Formats {
		name := []string{"x", ehInfo, ehErr}[i]
		if events[uint16([]int{xID, ehInfoID, ehErrID}[i])], err = perfdata.NewEvent(eventdef.System, name, f); err != nil {
			tb.Fatal(err)
		}
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
	var (
		enc   eventdef.Encoder
		b     eventheader.Builder
		wants []want
	)
	act := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for i := range n {
		ts := uint64(clockNS + 1_000_000 + i*1000)
		tid := uint32(testPID + i%3)
		wt := want{time: wallNS + 1_000_000 + uint64(i)*1000, attrs: map[string]otlp.Value{
			"thread.id": otlp.IntValue(int64(tid)), "linux.cpu": otlp.IntValue(int64(i % 2)),
		}}
		var id uint16
		var payload []byte
		switch i % 3 {
		case 0:
			id = xID
			enc.Reset(x, nil)
			enc.Uint(uint64(i))
			enc.Int(-int64(i))
			enc.String("c")
			enc.String(fmt.Sprintf("message %d ünïcode", i))
			enc.Uint(uint64(i % 256))
			enc.Uint(math.MaxUint64 - uint64(i))
			payload, err = enc.Payload()
			check(err)
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
			id = ehInfoID
			wt.severity, wt.sevText = otlp.SeverityInfo, "INFO"
			if i%3 == 2 {
				tp, lvl, id = ehErr, eventheader.LevelError, ehErrID
				wt.severity, wt.sevText = otlp.SeverityError, "ERROR"
			}
			b.Reset("Request", eventheader.Header{Level: lvl, Opcode: 1, ID: 7, Version: 2})
			b.SetActivityID(&act, nil)
			b.AddInt64("seq", int64(i), 0)
			b.AddString("path", "/p/"+fmt.Sprint(i), eventheader.FormatDefault, 0)
			b.AddBool("ok", i%2 == 0, 0)
			b.AddFloat64("ratio", float64(i)/4, 0)
			b.StructField("pt", 2, 0)
			b.AddInt32("x", int32(i), 0)
			b.AddInt32("y", -int32(i), 0)
			b.ArrayField("arr", eventheader.EncodingValue16, eventheader.FormatDefault, 0, 3)
			b.AppendValue16(uint16(i))
			b.AppendValue16(2)
			b.AppendValue16(3)
			b.AddUint32("err", 2, eventheader.FormatErrno, 0)
			payload, err = b.AppendEvent(nil)
			check(err)
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
