package ehprovider_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// FuzzTypedRoundTrip writes typed events of arbitrary values in-process,
// reads them back from a session and decodes them: the decoder must find
// the values written.
func FuzzTypedRoundTrip(f *testing.F) {
	f.Add(uint32(200), "/index.html", 1.5, []byte{0xde, 0xad}, int8(-1), true)
	f.Add(uint32(0), "", math.Inf(-1), []byte(nil), int8(0), false)
	f.Add(uint32(math.MaxUint32), "\xff\x00é", math.NaN(), bytes.Repeat([]byte{0}, 300), int8(-128), true)

	sys := subsys.New(subsys.Options{})
	uf, err := userevents.Open(&userevents.Options{OpenData: inproc.New(sys).OpenData})
	if err != nil {
		f.Fatal(err)
	}
	defer uf.Close()
	p, _ := ehprovider.New(uf, "Fuzz", nil)
	ev := ehprovider.Define4[uint32, string, float64, []byte](p, "E", eventheader.LevelInformation, 1, "u", "s", "f", "b")
	ev2 := ehprovider.Define2[int8, bool](p, "F", eventheader.LevelInformation, 1, "i", "t")
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if _, err := ss.AttachMatching("user_events:Fuzz_*", true); err != nil {
		f.Fatal(err)
	}
	buf := make([]byte, 1<<16)

	f.Fuzz(func(t *testing.T, u uint32, s string, fl float64, b []byte, i int8, tr bool) {
		// Records longer than perf's 8 KiB would be dropped, as by the kernel.
		if len(s) > 2000 {
			s = s[:2000]
		}
		if len(b) > 2000 {
			b = b[:2000]
		}
		if err := ev.Write(u, s, fl, b); err != nil {
			t.Fatal(err)
		}
		if err := ev2.Write(i, tr); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var recs []subsys.Record
		for len(recs) < 2 {
			recs, err = ss.Read(ctx, buf, recs)
			if err != nil {
				t.Fatal(err)
			}
		}
		var vals [][]byte
		for _, r := range recs {
			d, err := eventheader.Decode(r.Event.Name(), r.Raw[8:])
			if err != nil {
				t.Fatal(err)
			}
			it := d.Fields()
			for it.Next() {
				vals = append(vals, bytes.Clone(it.Item().Value))
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
		}
		var fb [8]byte
		binary.LittleEndian.PutUint64(fb[:], math.Float64bits(fl))
		tb := byte(0)
		if tr {
			tb = 1
		}
		want := [][]byte{binary.LittleEndian.AppendUint32(nil, u), []byte(s), fb[:], b, {byte(i)}, {tb}}
		if len(vals) != len(want) {
			t.Fatalf("%d values, want %d", len(vals), len(want))
		}
		for k := range want {
			if !bytes.Equal(vals[k], want[k]) {
				t.Errorf("value %d: % x, want % x", k, vals[k], want[k])
			}
		}
	})
}
