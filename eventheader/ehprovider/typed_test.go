package ehprovider_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// TestTypedIsBuilder checks that a typed event writes the bytes the
// eventheader.Builder writes for the same fields, for every Value type.
func TestTypedIsBuilder(t *testing.T) {
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ehprovider.New(f, "Typed", nil)
	if err != nil {
		t.Fatal(err)
	}
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:Typed_*", true); err != nil {
		t.Fatal(err)
	}
	lv := eventheader.LevelVerbose
	tp := p.Tracepoint(lv, 7)
	var b ehprovider.Builder
	long := strings.Repeat("x", 3000)
	cases := []struct {
		name  string
		typed func() error
		build func()
	}{
		{"bool", func() error { return ehprovider.Define1[bool](p, "E", lv, 7, "v").Write(true) },
			func() { b.AddBool("v", true, 0) }},
		{"int8", func() error { return ehprovider.Define1[int8](p, "E", lv, 7, "v").Write(-5) },
			func() { b.AddUint8("v", 0xfb, eventheader.FormatSignedInt, 0) }},
		{"int16", func() error { return ehprovider.Define1[int16](p, "E", lv, 7, "v").Write(-5) },
			func() { b.AddUint16("v", 0xfffb, eventheader.FormatSignedInt, 0) }},
		{"int32", func() error { return ehprovider.Define1[int32](p, "E", lv, 7, "v").Write(-5) },
			func() { b.AddInt32("v", -5, 0) }},
		{"int64", func() error { return ehprovider.Define1[int64](p, "E", lv, 7, "v").Write(-5) },
			func() { b.AddInt64("v", -5, 0) }},
		{"int", func() error { return ehprovider.Define1[int](p, "E", lv, 7, "v").Write(-5) },
			func() { b.AddInt64("v", -5, 0) }},
		{"uint8", func() error { return ehprovider.Define1[uint8](p, "E", lv, 7, "v").Write(9) },
			func() { b.AddUint8("v", 9, 0, 0) }},
		{"uint16", func() error { return ehprovider.Define1[uint16](p, "E", lv, 7, "v").Write(9) },
			func() { b.AddUint16("v", 9, 0, 0) }},
		{"uint32", func() error { return ehprovider.Define1[uint32](p, "E", lv, 7, "v").Write(9) },
			func() { b.AddUint32("v", 9, 0, 0) }},
		{"uint64", func() error { return ehprovider.Define1[uint64](p, "E", lv, 7, "v").Write(math.MaxUint64) },
			func() { b.AddUint64("v", math.MaxUint64, 0, 0) }},
		{"uint", func() error { return ehprovider.Define1[uint](p, "E", lv, 7, "v").Write(9) },
			func() { b.AddUint64("v", 9, 0, 0) }},
		{"uintptr", func() error { return ehprovider.Define1[uintptr](p, "E", lv, 7, "v").Write(9) },
			func() { b.AddUint64("v", 9, 0, 0) }},
		{"float32", func() error { return ehprovider.Define1[float32](p, "E", lv, 7, "v").Write(0.25) },
			func() { b.AddFloat32("v", 0.25, 0) }},
		{"float64", func() error { return ehprovider.Define1[float64](p, "E", lv, 7, "v").Write(-0.25) },
			func() { b.AddFloat64("v", -0.25, 0) }},
		{"string", func() error { return ehprovider.Define1[string](p, "E", lv, 7, "v").Write("héllo") },
			func() { b.AddString("v", "héllo", 0, 0) }},
		{"long string", func() error { return ehprovider.Define1[string](p, "E", lv, 7, "v").Write(long) },
			func() { b.AddString("v", long, 0, 0) }},
		{"bytes", func() error { return ehprovider.Define1[[]byte](p, "E", lv, 7, "v").Write([]byte{1, 2}) },
			func() { b.AddBinary("v", []byte{1, 2}, 0, 0) }},
		{"hex32", func() error { return ehprovider.Define1[ehprovider.Hex32](p, "E", lv, 7, "v").Write(0xbeef) },
			func() { b.AddUint32("v", 0xbeef, eventheader.FormatHexInt, 0) }},
		{"hex64", func() error { return ehprovider.Define1[ehprovider.Hex64](p, "E", lv, 7, "v").Write(0xbeef) },
			func() { b.AddUint64("v", 0xbeef, eventheader.FormatHexInt, 0) }},
		{"errno", func() error { return ehprovider.Define1[ehprovider.Errno](p, "E", lv, 7, "v").Write(2) },
			func() { b.AddUint32("v", 2, eventheader.FormatErrno, 0) }},
		{"pid", func() error { return ehprovider.Define1[ehprovider.PID](p, "E", lv, 7, "v").Write(42) },
			func() { b.AddUint32("v", 42, eventheader.FormatPid, 0) }},
		{"uuid", func() error {
			return ehprovider.Define1[ehprovider.UUID](p, "E", lv, 7, "v").Write(ehprovider.UUID{1, 2, 15: 3})
		},
			func() { b.AddUUID("v", [16]byte{1, 2, 15: 3}, 0) }},
		{"time", func() error {
			return ehprovider.Define1[time.Time](p, "E", lv, 7, "v").Write(time.Unix(1700000000, 999))
		}, func() { b.AddUint64("v", 1700000000, eventheader.FormatTime, 0) }},
		{"none", func() error { return ehprovider.Define0(p, "E", lv, 7).Write() },
			func() {}},
		{"two", func() error { return ehprovider.Define2[string, uint16](p, "E;k=v", lv, 7, "a", "b").Write("", 3) },
			func() { b.AddString("a", "", 0, 0); b.AddUint16("b", 3, 0, 0) }},
		{"header", func() error {
			return ehprovider.Define1[int](p, "E", lv, 7, "v", ehprovider.WithID(12, 3),
				ehprovider.WithOpcode(eventheader.OpcodeActivityStop), ehprovider.WithTag(0xabc)).Write(1)
		}, func() {
			b.ResetHeader(tp, "E", eventheader.Header{ID: 12, Version: 3, Opcode: eventheader.OpcodeActivityStop, Tag: 0xabc, Level: 1})
			b.AddInt64("v", 1, 0)
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	buf := make([]byte, 1<<18)
	read := func() []byte {
		recs, err := ss.Read(ctx, buf, nil)
		if err != nil || len(recs) != 1 {
			t.Fatalf("read: %d records, %v", len(recs), err)
		}
		return bytes.Clone(recs[0].Raw[8:])
	}
	for _, c := range cases {
		if err := c.typed(); err != nil {
			t.Fatalf("%s: typed write: %v", c.name, err)
		}
		typed := read()
		name := "E"
		if c.name == "two" {
			name = "E;k=v"
		}
		b.Reset(tp, name)
		c.build() // may Reset again, with a header
		if err := tp.Write(&b); err != nil {
			t.Fatalf("%s: builder write: %v", c.name, err)
		}
		built := read()
		if !bytes.Equal(typed, built) {
			t.Errorf("%s: typed\n% x\nbuilder\n% x", c.name, typed, built)
		}
		d, err := eventheader.Decode(tp.Name(), typed)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if c.name == "header" && (d.Header != eventheader.Header{Flags: d.Header.Flags, ID: 12, Version: 3, Opcode: eventheader.OpcodeActivityStop, Tag: 0xabc, Level: lv}) {
			t.Errorf("header: %+v", d.Header)
		}
	}
}

// TestTypedWriteAllocs checks the typed and Builder writes allocate
// nothing on the in-process backend, enabled or not.
func TestTypedWriteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	sys := subsys.New(subsys.Options{})
	f, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, _ := ehprovider.New(f, "Allocs", nil)
	ev := ehprovider.Define3[uint32, string, float64](p, "Request", eventheader.LevelInformation, 1, "status", "path", "dur")
	ev2 := ehprovider.Define4[time.Time, ehprovider.UUID, ehprovider.Errno, []byte](p, "Other", eventheader.LevelInformation, 1, "t", "id", "err", "b")
	ev3 := ehprovider.Define6[[]uint64, []string, []ehprovider.UUID, []time.Time, []bool, int8](p, "Arrays", eventheader.LevelInformation, 1,
		"u", "s", "ids", "ts", "bs", "i", ehprovider.WithStruct("inner", 1, 3))
	start := ehprovider.Define1[string](p, "Start", eventheader.LevelInformation, 1, "what", ehprovider.WithOpcode(eventheader.OpcodeActivityStart))
	stop := ehprovider.Define0(p, "Stop", eventheader.LevelInformation, 1, ehprovider.WithOpcode(eventheader.OpcodeActivityStop))
	tp := ev.Tracepoint()
	var b ehprovider.Builder
	now := time.Now()
	blob := []byte{1, 2, 3}
	u64s := []uint64{1, 2, 3, 4}
	strs := []string{"a", "bc"}
	ids := []ehprovider.UUID{{1}, {2}}
	times := []time.Time{now, now}
	bools := []bool{true, false, true}
	var id, parent [16]byte
	id[0], parent[0] = 1, 2
	write := func() {
		if err := ev3.Write(u64s, strs, ids, times, bools, -1); err != nil {
			t.Fatal(err)
		}
		if err := start.WriteActivity(&id, &parent, "job"); err != nil {
			t.Fatal(err)
		}
		if err := stop.WriteActivity(&id, nil); err != nil {
			t.Fatal(err)
		}
		if err := ev.Write(200, "/index.html", 1.5); err != nil {
			t.Fatal(err)
		}
		if err := ev2.Write(now, ehprovider.UUID{1}, 2, blob); err != nil {
			t.Fatal(err)
		}
		if tp.Enabled() {
			b.Reset(tp, "Request")
			b.AddUint32("status", 200, 0, 0)
			b.AddString("path", "/index.html", 0, 0)
			b.AddFloat64("dur", 1.5, 0)
			if err := tp.Write(&b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := testing.AllocsPerRun(100, write); n != 0 {
		t.Errorf("disabled: %v allocs per write", n)
	}
	if err := sys.SetFtrace(sys.Lookup("user_events", tp.Name()), true); err != nil {
		t.Fatal(err)
	}
	if !tp.Enabled() {
		t.Fatal("not enabled")
	}
	if n := testing.AllocsPerRun(100, write); n != 0 {
		t.Errorf("enabled: %v allocs per write", n)
	}
}
