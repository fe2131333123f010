package export

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/perfdata"
)

// TestLayoutSame: events mapped with their layouts — field keys, event
// names and the room of records found again by their metadata, from the
// first event of each layout on — are what they are mapped as without
// any, byte for byte: events of several layouts in turn, of two
// tracepoints of one provider, with other values and lengths each time,
// field names with attributes, invalid UTF-8 and twice the same, structs,
// arrays of values and of structs, Common Schema logs and spans, records
// cut short; whether the Writer keeps what it is given or not.
func TestLayoutSame(t *testing.T) {
	var evs []*perfdata.Event
	for _, tp := range []string{"P_L4K1", "P_L4K2", "Q_L4K1"} {
		def, err := eventdef.Parse(tp + " " + eventheader.CommandTypes)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := perfdata.NewEvent("user_events", tp, []byte(def.Format(tp, 1)))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var b eventheader.Builder
	event := func(layout int) []byte {
		n := rng.IntN(4)
		switch layout {
		case 0:
			b.Reset("Request;k=v", eventheader.Header{Level: 4, Opcode: eventheader.Opcode(n), ID: uint16(n % 2), Version: 1})
			if n%2 == 0 {
				act := [16]byte{byte(n)}
				b.SetActivityID(&act, nil)
			}
			b.AddInt64("seq", rng.Int64(), 0)
			b.AddString("path;attr", fmt.Sprint("/p/", rng.Uint32()), eventheader.FormatDefault, 0)
			b.StructField("pt", 2, 0)
			b.AddInt32("x", rng.Int32(), 0)
			b.AddInt32("x", rng.Int32(), 0)
			b.ArrayField("arr", eventheader.EncodingValue16, eventheader.FormatSignedInt, 0, 0)
			b.AppendCount(uint16(n))
			for range n {
				b.AppendValue16(uint16(rng.Uint32()))
			}
			b.AddUint32("err", uint32(n), eventheader.FormatErrno, 0)
		case 1:
			b.Reset("Bad\xffname", eventheader.Header{Level: 4})
			b.AddString("bad\xfekey", "v\xff", eventheader.FormatDefault, 0)
			b.StructArrayField("sa", 2, 0, 0)
			b.Field("a", eventheader.EncodingValue8, eventheader.FormatDefault, 0)
			b.Field("s", eventheader.EncodingStringLength16Char8, eventheader.FormatStringJSON, 0)
			b.AppendCount(uint16(n))
			for i := range n {
				b.AppendValue8(uint8(i))
				b.AppendString8(fmt.Sprintf(`{"k%d":[%d,"x"]}`, i, rng.IntN(9)))
			}
		case 2, 3:
			typ := []string{"Log", "Span"}[layout-2]
			b.Reset(typ, eventheader.Header{Level: 4})
			b.AddUint32("__csver__", 0x400, eventheader.FormatUnsignedInt, 0)
			b.StructField("PartA", 3, 0)
			b.AddString("time", "2024-01-01T12:34:56.789Z", eventheader.FormatDefault, 0)
			b.AddString("ext_dt_traceId", "4bf92f3577b34da6a3ce929d0e0e4736", eventheader.FormatDefault, 0)
			b.AddString("ext_cloud_role", fmt.Sprint("svc", n), eventheader.FormatDefault, 0)
			b.StructField("PartC", 2, 0)
			b.AddString("tags", fmt.Sprintf(`["a",%d,{"k%d":null}]`, n, n), eventheader.FormatStringJSON, 0)
			b.AddInt64("n", rng.Int64(), 0)
			if typ == "Span" {
				b.StructField("PartB", 5, 0)
				b.AddString("_typeName", "Span", eventheader.FormatDefault, 0)
				b.AddString("name", fmt.Sprint("GET /", n), eventheader.FormatDefault, 0)
				b.AddString("startTime", "2024-01-01T12:34:56.700Z", eventheader.FormatDefault, 0)
				b.AddString("httpMethod", "GET", eventheader.FormatDefault, 0)
				b.AddBool("success", n%2 == 0, 0)
			} else {
				b.StructField("PartB", 4, 0)
				b.AddString("_typeName", "Log", eventheader.FormatDefault, 0)
				b.AddString("body", fmt.Sprint("body ", n), eventheader.FormatDefault, 0)
				b.AddUint16("severityNumber", uint16(n), eventheader.FormatSignedInt, 0)
				b.AddString("name", fmt.Sprint("ev", n), eventheader.FormatDefault, 0)
			}
		}
		ev, err := b.AppendEvent(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw := append(make([]byte, 8), ev...)
		if rng.IntN(8) == 0 {
			raw = raw[:len(raw)-1-rng.IntN(4)] // cut short: mapped by its format
		}
		return raw
	}
	for _, keep := range []bool{false, true} {
		var w, cw otlpWriter
		warm := encoder{Writer: &w, keep: keep}
		for i := range 3000 {
			s := perfdata.Sample{Event: evs[rng.IntN(len(evs))], Wall: 1, PID: 1, TID: 2, Raw: event(rng.IntN(4))}
			cold := encoder{Writer: &cw, keep: keep}
			cold.layouts.size = maxLayoutSize // none made
			w.Reset()
			cw.Reset()
			sig, res, _ := encodeSample(&warm, &s, 5)
			csig, cres, _ := encodeSample(&cold, &s, 5)
			if sig != csig || res != cres || !bytes.Equal(w.Bytes(), cw.Bytes()) {
				t.Fatalf("keep %v, event %d: with layouts %v %+v % x\nwithout %v %+v % x", keep, i, sig, res, w.Bytes(), csig, cres, cw.Bytes())
			}
		}
		if n := len(warm.layouts.m); n != 4*2 { // four layouts of two providers
			t.Errorf("keep %v: %d layouts made, want 8", keep, n)
		}
	}
}
