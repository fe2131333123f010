package report_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/internal/report/perfetto/perfettotest"
	"github.com/uetrace/uetrace/perfdata"
)

// FuzzReport reports arbitrary perf.data bytes in every format. It must
// never panic; errors are fine. When a file reports without error, every
// format counts the same, every JSON line is valid JSON, and the Perfetto
// output is a valid trace with an event per sample: an instant, a slice's
// begin or a slice's end (the slices' counts only Perfetto has).
func FuzzReport(f *testing.F) {
	f.Add(readFile(f, writeScenario(f, false)))
	f.Add(readFile(f, writeScenario(f, true)))
	f.Add(readFile(f, writeSmall(f)))
	f.Add(readFile(f, builtFile(f)))
	f.Add(toPipe(f, builtFile(f), 1))
	if b, err := os.ReadFile(schedSwitch); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var outs [3]bytes.Buffer
		var sums [3]report.Summary
		for i, format := range []report.Format{report.Text, report.JSON, report.Perfetto} {
			r, err := perfdata.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				return
			}
			sums[i], err = report.Write(&outs[i], r, format)
			if err != nil {
				return
			}
		}
		pf := sums[2]
		pf.UnmatchedStops, pf.OpenStarts = 0, 0
		if sums[0] != sums[1] || sums[0] != pf {
			t.Fatalf("summaries differ: text %+v, json %+v, perfetto %+v", sums[0], sums[1], sums[2])
		}
		lines := bytes.SplitAfter(outs[1].Bytes(), []byte("\n"))
		lines = lines[:len(lines)-1]
		if uint64(len(lines)) != sums[1].Samples {
			t.Fatalf("%d JSON lines for %d samples", len(lines), sums[1].Samples)
		}
		for _, l := range lines {
			if !json.Valid(l) {
				t.Fatalf("invalid JSON line %q", l)
			}
		}
		tr, err := perfettotest.Decode(outs[2].Bytes())
		if err != nil {
			t.Fatalf("perfetto output: %v", err)
		}
		events, open := len(tr.Events)+len(tr.Slices), 0
		for _, s := range tr.Slices {
			if s.Dur < 0 {
				open++
			} else {
				events++ // its end
			}
		}
		if uint64(events) != sums[2].Samples || uint64(open) != sums[2].OpenStarts {
			t.Fatalf("%d Perfetto events (%d slices, %d open) for %d samples (%+v)", events, len(tr.Slices), open, sums[2].Samples, sums[2])
		}
	})
}

// writeSmall writes a small file: one event, one COMM, a few samples in
// two rounds.
func writeSmall(tb testing.TB) string {
	x, _ := testEvents(tb)
	f := newFile(tb, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0))
	f.comm(xID0, 1, 2, "t", 0, 0)
	f.sample(xID0, 1, 2, 20, 0, xRaw(tb, x, 2, 1, -1, "c", "m", 1))
	f.sample(xID0, 1, 2, 10, 0, xRaw(tb, x, 2, 2, -2, "cc", "mm", 2))
	f.round()
	f.sample(xID0, 1, 2, 15, 0, xRaw(tb, x, 2, 3, -3, "ccc", "mmm", 3))
	return f.close()
}
