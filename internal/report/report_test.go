package report_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
	"github.com/uetrace/uetrace/perfdata"
)

// wantSummary is what every format of the scenario counts: 17 samples, of
// which three have no fields (the id-99 sample, gone's and id 0's), and
// the LOST records' 7 and 3.
var wantSummary = report.Summary{Samples: 17, Lost: 10, Undecoded: 3}

// wantText is the scenario as perf script -F comm,pid,tid,cpu,time,event,trace
// prints it ("%16s %7d/%-7d [%03d] %12s: %*s: " and the print fmt of a user
// event, every field as name=value), written by hand: the name column is
// as wide as the longest event name, user_events:yy_event; widths count
// bytes, as printf's do (naïve is 6 bytes); text is printed as it is,
// control bytes and invalid UTF-8 included.
var wantText = []string{
	"              :0       0/0       [000]     0.000000:            [unknown]:",
	"          server     100/100     [000]     1.000005:        user_events:x: a=1 b=-1 c=c1 msg=hello d=1",
	"            :201     200/201     [001]     1.500000: user_events:yy_event: big=18446744073709551615 neg=128 sh=32768 p=010203040506 blob=dead txt=y txt",
	"          server     100/100     [000]     2.000000:        user_events:x: a=4294967295 b=9223372036854775807 c=12345678 msg= d=255",
	"          server     100/100     [000]     2.500000:        user_events:x: a=0 b=-9223372036854775808 c= msg=tab\there d=0",
	"        old-task     400/401     [001]     2.600000:        user_events:x: a=14 b=14 c=c14 msg=old d=14",
	"          naïve     300/300     [012]     2.700000:     user_events:gone:",
	"          naïve     300/300     [012]     2.750000:        user_events:x: a=16 b=16 c=c16 msg=naïve d=16",
	"          worker     100/101     [001]     3.000000:        user_events:x: a=6 b=6 c=c6 msg=worker msg d=6",
	"        new-task     500/401     [000]     3.150000: user_events:yy_event: big=15 neg=15 sh=15 p=616263646566 blob= txt=new",
	"          worker     100/101     [001]     3.200000:        user_events:x: a=7 b=-7 c=c7 msg=seven d=7",
	"          server     100/100     [000]     3.300000: user_events:yy_event: big=1 neg=1 sh=1 p=000000000000 blob= txt=",
	"          server     100/100     [000]     3.400000:        user_events:x: a=10 b=<OVERFLOW> c=<OVERFLOW> msg=<OVERFLOW> d=<OVERFLOW>",
	"          server     100/100     [000]     3.450000:            [unknown]:",
	"         renamed     100/101     [001]     4.000000:        user_events:x: a=8 b=8 c=c8 msg=after rename d=8",
	"         renamed     100/101     [001]     5.000000:        user_events:x: a=13 b=13 c=c13 msg=<OVERFLOW> d=13",
	"          server     100/100     [000] 12345.678901:        user_events:x: a=12 b=-12 c=q\"\\ msg=q\"b\\s/ nl\n tab\t cr\r ctl\x01\x1f del\x7f bad\xff\xfe\xc3 é \u2028 <&> d=12",
}

func TestText(t *testing.T) {
	path := writeScenario(t, false)
	out, sum := run(t, path, report.Text)
	want := strings.Join(wantText, "\n") + "\n"
	if got := string(out); got != want {
		t.Errorf("text (-want +got):\n%s", cmp.Diff(strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")))
	}
	if sum != wantSummary {
		t.Errorf("summary %+v, want %+v", sum, wantSummary)
	}
}

// wantJSON is the scenario as JSON lines, written by hand: 64-bit values
// exact, strings escaped as encoding/json does (each invalid byte is
// \ufffd), byte arrays in hex, null for fields outside their record.
var wantJSON = []string{
	`{"time":0,"cpu":0,"pid":0,"tid":0,"comm":"","system":"","name":"","fields":{}}`,
	`{"time":1000005000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"x","fields":{"a":1,"b":-1,"c":"c1","msg":"hello","d":1}}`,
	`{"time":1500000000,"cpu":1,"pid":200,"tid":201,"comm":"","system":"user_events","name":"yy_event","fields":{"big":18446744073709551615,"neg":128,"sh":32768,"p":"01 02 03 04 05 06","blob":[222,173],"txt":"y txt"}}`,
	`{"time":2000000000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"x","fields":{"a":4294967295,"b":9223372036854775807,"c":"12345678","msg":"","d":255}}`,
	`{"time":2500000000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"x","fields":{"a":0,"b":-9223372036854775808,"c":"","msg":"tab\there","d":0}}`,
	`{"time":2600000000,"cpu":1,"pid":400,"tid":401,"comm":"old-task","system":"user_events","name":"x","fields":{"a":14,"b":14,"c":"c14","msg":"old","d":14}}`,
	`{"time":2700000000,"cpu":12,"pid":300,"tid":300,"comm":"naïve","system":"user_events","name":"gone","fields":{}}`,
	`{"time":2750000000,"cpu":12,"pid":300,"tid":300,"comm":"naïve","system":"user_events","name":"x","fields":{"a":16,"b":16,"c":"c16","msg":"naïve","d":16}}`,
	`{"time":3000000500,"cpu":1,"pid":100,"tid":101,"comm":"worker","system":"user_events","name":"x","fields":{"a":6,"b":6,"c":"c6","msg":"worker msg","d":6}}`,
	`{"time":3150000000,"cpu":0,"pid":500,"tid":401,"comm":"new-task","system":"user_events","name":"yy_event","fields":{"big":15,"neg":15,"sh":15,"p":"61 62 63 64 65 66","blob":[],"txt":"new"}}`,
	`{"time":3200000000,"cpu":1,"pid":100,"tid":101,"comm":"worker","system":"user_events","name":"x","fields":{"a":7,"b":-7,"c":"c7","msg":"seven","d":7}}`,
	`{"time":3300000000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"yy_event","fields":{"big":1,"neg":1,"sh":1,"p":"00 00 00 00 00 00","blob":[],"txt":""}}`,
	`{"time":3400000000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"x","fields":{"a":10,"b":null,"c":null,"msg":null,"d":null}}`,
	`{"time":3450000000,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"","name":"","fields":{}}`,
	`{"time":4000000000,"cpu":1,"pid":100,"tid":101,"comm":"renamed","system":"user_events","name":"x","fields":{"a":8,"b":8,"c":"c8","msg":"after rename","d":8}}`,
	`{"time":5000000000,"cpu":1,"pid":100,"tid":101,"comm":"renamed","system":"user_events","name":"x","fields":{"a":13,"b":13,"c":"c13","msg":null,"d":13}}`,
	`{"time":12345678901234,"cpu":0,"pid":100,"tid":100,"comm":"server","system":"user_events","name":"x","fields":{"a":12,"b":-12,"c":"q\"\\","msg":"q\"b\\s/ nl\n tab\t cr\r ctl\u0001\u001f del` + "\x7f" + ` bad\ufffd\ufffd\ufffd é ` + "\u2028" + ` <&>","d":12}}`,
}

// jsonValue is what encoding/json makes of v: for a string, each invalid
// byte becomes U+FFFD.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestJSON(t *testing.T) {
	path := writeScenario(t, false)
	out, sum := run(t, path, report.JSON)
	want := strings.Join(wantJSON, "\n") + "\n"
	if got := string(out); got != want {
		t.Errorf("json (-want +got):\n%s", cmp.Diff(strings.SplitAfter(want, "\n"), strings.SplitAfter(got, "\n")))
	}
	if sum != wantSummary {
		t.Errorf("summary %+v, want %+v", sum, wantSummary)
	}

	// Every line is one JSON object, and carries exactly the values.
	n := func(s string) json.Number { return json.Number(s) }
	type obj = map[string]any
	wantFields := map[int]obj{ // by line
		2:  {"big": n("18446744073709551615"), "neg": n("128"), "sh": n("32768"), "p": "01 02 03 04 05 06", "blob": []any{n("222"), n("173")}, "txt": "y txt"},
		3:  {"a": n("4294967295"), "b": n("9223372036854775807"), "c": "12345678", "msg": "", "d": n("255")},
		4:  {"a": n("0"), "b": n("-9223372036854775808"), "c": "", "msg": "tab\there", "d": n("0")},
		12: {"a": n("10"), "b": nil, "c": nil, "msg": nil, "d": nil},
		15: {"a": n("13"), "b": n("13"), "c": "c13", "msg": nil, "d": n("13")},
		16: {"a": n("12"), "b": n("-12"), "c": trickyC, "msg": jsonValue(t, trickyMsg), "d": n("12")},
	}
	lines := bytes.SplitAfter(out, []byte("\n"))
	lines = lines[:len(lines)-1]
	var last uint64
	for i, line := range lines {
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		var got obj
		if err := d.Decode(&got); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, line)
		}
		if _, err := d.Token(); err != io.EOF {
			t.Errorf("line %d: more than one value: %s", i, line)
		}
		keys := slices.Sorted(maps.Keys(got))
		if want := []string{"comm", "cpu", "fields", "name", "pid", "system", "tid", "time"}; !slices.Equal(keys, want) {
			t.Errorf("line %d: keys %v, want %v", i, keys, want)
		}
		ts, err := strconv.ParseUint(string(got["time"].(json.Number)), 10, 64)
		if err != nil || ts < last {
			t.Errorf("line %d: time %v after %d", i, got["time"], last)
		}
		last = ts
		if wf, ok := wantFields[i]; ok {
			if diff := cmp.Diff(wf, got["fields"]); diff != "" {
				t.Errorf("line %d fields (-want +got):\n%s", i, diff)
			}
		}
	}
	if len(lines) != int(wantSummary.Samples) {
		t.Errorf("%d lines, want %d", len(lines), wantSummary.Samples)
	}
}

func TestPerfetto(t *testing.T) {
	path := writeScenario(t, false)
	out, sum := run(t, path, report.Perfetto)
	if sum != wantSummary {
		t.Errorf("summary %+v, want %+v", sum, wantSummary)
	}
	tr, err := perfettotest.Decode(out)
	if err != nil {
		t.Fatal(err)
	}

	type arg = perfettotest.Arg
	u := func(name string, v uint64) arg { return arg{Name: name, Kind: "uint", Val: v} }
	i := func(name string, v int64) arg { return arg{Name: name, Kind: "int", Val: v} }
	str := func(name, v string) arg { return arg{Name: name, Kind: "string", Val: v} }
	x := func(a uint64, b int64, c, msg string, d uint64) []arg {
		return []arg{u("a", a), i("b", b), str("c", c), str("msg", msg), u("d", d)}
	}
	const ue = "user_events"
	const over = "<OVERFLOW>"
	want := []perfettotest.Event{
		{TS: 0, PID: 0, TID: 0, Name: "[unknown]"},
		{TS: 1_000_005_000, PID: 100, TID: 100, Category: ue, Name: "x", Args: x(1, -1, "c1", "hello", 1)},
		{TS: 1_500_000_000, PID: 200, TID: 201, Category: ue, Name: "yy_event", Args: []arg{
			u("big", math.MaxUint64), i("neg", -128), i("sh", -32768), str("p", "010203040506"), str("blob", "dead"), str("txt", "y txt")}},
		{TS: 2_000_000_000, PID: 100, TID: 100, Category: ue, Name: "x", Args: x(math.MaxUint32, math.MaxInt64, "12345678", "", 255)},
		{TS: 2_500_000_000, PID: 100, TID: 100, Category: ue, Name: "x", Args: x(0, math.MinInt64, "", "tab\there", 0)},
		{TS: 2_600_000_000, PID: 400, TID: 401, Category: ue, Name: "x", Args: x(14, 14, "c14", "old", 14)},
		{TS: 2_700_000_000, PID: 300, TID: 300, Category: ue, Name: "gone"},
		{TS: 2_750_000_000, PID: 300, TID: 300, Category: ue, Name: "x", Args: x(16, 16, "c16", "naïve", 16)},
		{TS: 3_000_000_500, PID: 100, TID: 101, Category: ue, Name: "x", Args: x(6, 6, "c6", "worker msg", 6)},
		{TS: 3_150_000_000, PID: 500, TID: 401, Category: ue, Name: "yy_event", Args: []arg{
			u("big", 15), i("neg", 15), i("sh", 15), str("p", "616263646566"), str("blob", ""), str("txt", "new")}},
		{TS: 3_200_000_000, PID: 100, TID: 101, Category: ue, Name: "x", Args: x(7, -7, "c7", "seven", 7)},
		{TS: 3_300_000_000, PID: 100, TID: 100, Category: ue, Name: "yy_event", Args: []arg{
			u("big", 1), i("neg", 1), i("sh", 1), str("p", "000000000000"), str("blob", ""), str("txt", "")}},
		{TS: 3_400_000_000, PID: 100, TID: 100, Category: ue, Name: "x", Args: []arg{u("a", 10), str("b", over), str("c", over), str("msg", over), str("d", over)}},
		{TS: 3_450_000_000, PID: 100, TID: 100, Name: "[unknown]"},
		{TS: 4_000_000_000, PID: 100, TID: 101, Category: ue, Name: "x", Args: x(8, 8, "c8", "after rename", 8)},
		{TS: 5_000_000_000, PID: 100, TID: 101, Category: ue, Name: "x", Args: []arg{u("a", 13), i("b", 13), str("c", "c13"), str("msg", over), u("d", 13)}},
		{TS: 12345_678_901_234, PID: 100, TID: 100, Category: ue, Name: "x",
			// Each run of invalid UTF-8 is one U+FFFD in a protobuf string.
			Args: x(12, -12, trickyC, strings.ToValidUTF8(trickyMsg, "\uFFFD"), 12)},
	}
	if diff := cmp.Diff(want, tr.Events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Tracks: processes named by their main thread's COMM, threads by
	// theirs, the latest name (worker was renamed); the reused tid 401
	// is a thread of each of its processes.
	var tracks []perfettotest.Track
	for _, tk := range tr.Tracks {
		tracks = append(tracks, tk)
	}
	wantTracks := []perfettotest.Track{
		{Process: true, PID: 0},
		{Process: true, PID: 100, Name: "server"},
		{Process: true, PID: 200},
		{Process: true, PID: 300, Name: "naïve"},
		{Process: true, PID: 400},
		{Process: true, PID: 500},
		{PID: 0, TID: 0},
		{PID: 100, TID: 100, Name: "server"},
		{PID: 100, TID: 101, Name: "renamed"},
		{PID: 200, TID: 201},
		{PID: 300, TID: 300, Name: "naïve"},
		{PID: 400, TID: 401, Name: "old-task"},
		{PID: 500, TID: 401, Name: "new-task"},
	}
	sortTracks := cmpopts.SortSlices(func(a, b perfettotest.Track) bool {
		if a.Process != b.Process {
			return a.Process
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
	if diff := cmp.Diff(wantTracks, tracks, sortTracks, cmpopts.IgnoreFields(perfettotest.Track{}, "UUID", "Parent")); diff != "" {
		t.Errorf("tracks (-want +got):\n%s", diff)
	}
}

// TestRounds checks the order perf gives: at the end of each round,
// everything up to the newest time of the round before is sorted and
// written. A sample that comes a round too late (older than what was
// written) is written late, not dropped, as perf does; one held past its
// round waits for later samples older than it.
func TestRounds(t *testing.T) {
	x, _ := testEvents(t)
	f := newFile(t, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0, xID1))
	f.comm(xID0, 1, 1, "t", 0, 0)
	s := func(ts uint64, cpu uint32) {
		f.sample(xID0+uint64(cpu), 1, 1, ts, cpu, xRaw(t, x, 1, uint32(ts), 0, "", "", 0))
	}
	s(30, 1)
	s(10, 0)
	f.round() // writes nothing: no round before
	s(40, 1)
	s(20, 0)
	f.round() // writes ≤ 30: 10, 20, 30
	s(25, 0)  // too late
	s(50, 1)
	s(35, 0)
	f.round() // writes ≤ 40: 25, 35, 40
	s(45, 1)
	path := f.close() // EOF: 45, 50
	out, sum := run(t, path, report.JSON)
	var got []uint64
	for line := range strings.Lines(string(out)) {
		var v struct{ Time uint64 }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v.Time)
	}
	if want := []uint64{10, 20, 30, 25, 35, 40, 45, 50}; !slices.Equal(got, want) {
		t.Errorf("times %v, want %v", got, want)
	}
	if sum != (report.Summary{Samples: 8}) {
		t.Errorf("summary %+v", sum)
	}
}

// The formats agree on what they saw, and the Summary counts the same.
func TestFormatsAgree(t *testing.T) {
	path := writeScenario(t, false)
	for _, f := range []report.Format{report.Text, report.JSON, report.Perfetto} {
		_, sum := run(t, path, f)
		if sum != wantSummary {
			t.Errorf("%s: summary %+v, want %+v", f, sum, wantSummary)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range []report.Format{report.Text, report.JSON, report.Perfetto} {
		got, err := report.ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := report.ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) did not fail")
	}
	if s := report.Format(7).String(); s != "Format(7)" {
		t.Errorf("Format(7).String() = %q", s)
	}
}

// schedSwitch is a file of perf record -e sched:sched_switch -a made by the
// real perf 6.1.
const schedSwitch = "../../perfdata/testdata/sched_switch.data"

// TestSchedSwitch reports a file the real perf made, in every format: the
// text and JSON show every sample of the file (by tid, CPU and time), and
// the Perfetto trace has an event for each.
// The pipe-mode stream (perf record -o -) is reported as the file is.
func TestSchedSwitch(t *testing.T) {
	t.Run("file", func(t *testing.T) { testSchedSwitch(t, schedSwitch) })
	t.Run("pipe", func(t *testing.T) { testSchedSwitch(t, schedSwitchPipe) })
}

// schedSwitchPipe is a pipe-mode stream of perf record -k CLOCK_MONOTONIC
// -e sched:sched_switch -a -o - made by the real perf 6.1.
const schedSwitchPipe = "../../perfdata/testdata/sched_switch_pipe.data"

func testSchedSwitch(t *testing.T, schedSwitch string) {
	type key struct {
		tid, cpu uint32
		time     uint64
	}
	r := open(t, schedSwitch)
	var want []key
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type == perfdata.RecordSample {
			want = append(want, key{rec.Sample.TID, rec.Sample.CPU, rec.Sample.Time})
		}
	}
	if len(want) == 0 {
		t.Fatal("no samples in the file")
	}
	cmpKeys := func(a, b key) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	}
	slices.SortFunc(want, cmpKeys)

	// Text: times in µs.
	out, sum := run(t, schedSwitch, report.Text)
	if sum.Samples != uint64(len(want)) || sum.Undecoded != 0 {
		t.Errorf("text summary %+v, want %d samples all decoded", sum, len(want))
	}
	lineRE := regexp.MustCompile(`^(.*?) +(-?\d+)/(-?\d+) +\[(\d{3,})\] +(\d+)\.(\d{6}): sched:sched_switch: (.*)$`)
	var got []key
	for line := range strings.Lines(string(out)) {
		m := lineRE.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			t.Fatalf("line %q", line)
		}
		tid, _ := strconv.ParseUint(m[3], 10, 32)
		cpu, _ := strconv.ParseUint(m[4], 10, 32)
		sec, _ := strconv.ParseUint(m[5], 10, 64)
		us, _ := strconv.ParseUint(m[6], 10, 64)
		got = append(got, key{uint32(tid), uint32(cpu), sec*1e9 + us*1e3})
		if !strings.Contains(m[7], "prev_pid="+m[3]+" ") {
			t.Errorf("line %q: prev_pid is not the tid", line)
		}
	}
	slices.SortFunc(got, cmpKeys)
	wantUS := slices.Clone(want)
	for i := range wantUS {
		wantUS[i].time -= wantUS[i].time % 1000
	}
	slices.SortFunc(wantUS, cmpKeys)
	if diff := cmp.Diff(wantUS, got, cmp.AllowUnexported(key{})); diff != "" {
		t.Errorf("text samples (-want +got):\n%s", diff)
	}

	// JSON: times in ns, in order.
	out, sum = run(t, schedSwitch, report.JSON)
	if sum.Samples != uint64(len(want)) {
		t.Errorf("json summary %+v", sum)
	}
	got = got[:0]
	var last uint64
	for line := range strings.Lines(string(out)) {
		var v struct {
			Time     uint64
			CPU, TID uint32
			Name     string
			Fields   map[string]any
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if v.Time < last || v.Name != "sched_switch" || len(v.Fields) == 0 {
			t.Errorf("line after time %d: %s", last, line)
		}
		last = v.Time
		got = append(got, key{v.TID, v.CPU, v.Time})
	}
	slices.SortFunc(got, cmpKeys)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
		t.Errorf("json samples (-want +got):\n%s", diff)
	}

	out, sum = run(t, schedSwitch, report.Perfetto)
	tr, err := perfettotest.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) != len(want) || sum.Samples != uint64(len(want)) {
		t.Errorf("perfetto: %d events, summary %+v, want %d", len(tr.Events), sum, len(want))
	}
	for _, e := range tr.Events {
		if e.Category != "sched" || e.Name != "sched_switch" {
			t.Errorf("event %+v", e)
			break
		}
	}
}

const perfPath = "/usr/bin/perf"

// TestPerfScript checks the text against the real perf script, on the
// scenario without what perf cannot read: the lines must be the same but
// for the width of the pid/tid column (perf 6.1 prints "%5d/%-5d", later
// perfs "%7d/%-7d" as report does), and for yy_event, whose print fmt perf
// evaluates (it prints a struct or a __data_loc u8[] as a number) where
// report prints the fields by type.
func TestPerfScript(t *testing.T) {
	if _, err := os.Stat(perfPath); err != nil {
		t.Skipf("real perf is not installed (%v)", err)
	}
	path := writeScenario(t, true)
	cmd := exec.Command(perfPath, "script", "-F", "trace:comm,pid,tid,cpu,time,event,trace", "-i", path)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PERF_CONFIG=/dev/null", "PERF_PAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	perfOut, err := cmd.Output()
	if err != nil {
		t.Fatalf("perf script: %v\n%s", err, stderr.Bytes())
	}
	out, _ := run(t, path, report.Text)

	pidTID := regexp.MustCompile(`(?m)^(.*?) +(-?\d+)/(-?\d+) +\[`)
	norm := func(b []byte) []string {
		b = pidTID.ReplaceAll(b, []byte("$1 $2/$3 ["))
		var lines []string
		for l := range strings.Lines(string(b)) {
			if !strings.Contains(l, " user_events:yy_event: ") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	want, got := norm(perfOut), norm(out)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("report text against perf script (-perf +report):\n%s", diff)
	}
	if len(want) < 10 {
		t.Errorf("perf script printed only:\n%s", perfOut)
	}
}

// TestWallClock reports the pipe-mode stream of perf record -k
// CLOCK_MONOTONIC with wall-clock times: each sample's tod, time and event
// are what perf script -F comm,pid,tid,cpu,tod,time,event printed for it
// (TZ=UTC), JSON lines carry the same instant in ns, and a file without
// clock data is refused.
func TestWallClock(t *testing.T) {
	want := strings.Split(strings.TrimSpace(string(readFile(t, "testdata/sched_switch_pipe.tod.txt"))), "\n")
	var out bytes.Buffer
	if _, err := report.WriteOptions(&out, open(t, schedSwitchPipe), report.Options{Wall: true, Location: time.UTC}); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	re := regexp.MustCompile(`\[\d+\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}) +(\d+\.\d{6}): +(\S+):`)
	if len(got) != len(want) {
		t.Fatalf("%d lines, perf script printed %d", len(got), len(want))
	}
	for i := range want {
		w, g := re.FindStringSubmatch(want[i]), re.FindStringSubmatch(got[i])
		if w == nil || g == nil || !slices.Equal(w[1:], g[1:]) {
			t.Errorf("line %d:\n got %q\nwant %q (perf script)", i, got[i], want[i])
		}
	}

	out.Reset()
	if _, err := report.WriteOptions(&out, open(t, schedSwitchPipe), report.Options{Format: report.JSON, Wall: true}); err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(out.String(), "\n", 2)[0]
	var first struct {
		Time   uint64 `json:"time"`
		WallNS int64  `json:"wall_ns"`
	}
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatal(err)
	}
	tod := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}`).FindString(want[0])
	if s := time.Unix(0, first.WallNS).UTC().Format("2006-01-02 15:04:05.000000"); s != tod {
		t.Errorf("first wall_ns %d is %s, perf script says %s", first.WallNS, s, tod)
	}

	_, err := report.WriteOptions(io.Discard, open(t, schedSwitch), report.Options{Wall: true})
	if !errors.Is(err, report.ErrNoClockData) || !errors.Is(err, unix.EINVAL) {
		t.Errorf("wall-clock report of a file without clock data: %v", err)
	}
}
