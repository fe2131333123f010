package report_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/perfdata"
)

// writeBatchFile writes n samples of x from two CPUs in rounds of two
// interleaved runs, renaming task 1002 every 1500 samples, so that a
// report spans many batches and a name changes inside them.
func writeBatchFile(t *testing.T, n int) string {
	x, _ := testEvents(t)
	f := newFile(t, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0, xID1))
	f.comm(xID0, 1000, 1002, "first", 0, 0)
	ts := uint64(5_000_000_000)
	for base := 0; base < n; base += 700 {
		for cpu := range uint32(2) {
			for i := base + int(cpu); i < base+700 && i < n; i += 2 {
				tid := int32(1001 + i%3)
				if i%1500 == 0 && i > 0 {
					f.comm(xID0+uint64(cpu), 1000, 1002, fmt.Sprintf("renamed-%d", i), ts+uint64(i)*997, cpu)
				}
				f.sample(xID0+uint64(cpu), 1000, tid, ts+uint64(i)*997, cpu, xRaw(t, x, tid, uint32(i), -int64(i), "c", fmt.Sprintf("m%d", i), uint8(i)))
			}
		}
		f.round()
	}
	return f.close()
}

// The lines are the same whether they are formatted on one CPU or on
// several, from a mapped file or from a reader without a mapping.
func TestBatchesInOrder(t *testing.T) {
	const n = 10_000 // ~10 batches
	path := writeBatchFile(t, n)
	data := readFile(t, path)
	for _, format := range []report.Format{report.Text, report.JSON} {
		var outs []string
		for _, procs := range []int{1, 4} {
			old := runtime.GOMAXPROCS(procs)
			out, sum := run(t, path, format)
			r, err := perfdata.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			var unmapped bytes.Buffer
			if _, err := report.Write(&unmapped, r, format); err != nil {
				t.Fatal(err)
			}
			runtime.GOMAXPROCS(old)
			if sum.Samples != n {
				t.Fatalf("%s, %d CPUs: %d samples, want %d", format, procs, sum.Samples, n)
			}
			outs = append(outs, string(out), unmapped.String())
		}
		for i := 1; i < len(outs); i++ {
			if outs[i] != outs[0] {
				t.Errorf("%s: output %d differs from the one-CPU report of the mapped file", format, i)
			}
		}
	}
	// Each line has the sample's own values and the name its task had then.
	out, _ := run(t, path, report.JSON)
	name := "first"
	for i, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var got struct {
			Time   uint64
			TID    int32
			Comm   string
			Fields struct{ A int }
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if i%1500 == 0 && i > 0 {
			name = fmt.Sprintf("renamed-%d", i)
		}
		if got.Fields.A != i || got.Time != 5_000_000_000+uint64(i)*997 {
			t.Fatalf("line %d is sample %d at %d", i, got.Fields.A, got.Time)
		}
		if got.TID == 1002 && got.Comm != name {
			t.Fatalf("line %d: task 1002 named %q, want %q", i, got.Comm, name)
		}
	}
}

// failWriter fails every write after the first.
type failWriter struct{ writes int }

var errFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.writes++; w.writes > 1 {
		return 0, errFull
	}
	return len(p), nil
}

// A write error ends the report and is returned, on one CPU or several.
func TestWriteError(t *testing.T) {
	path := writeBatchFile(t, 20_000)
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		var w failWriter
		sum, err := report.Write(&w, open(t, path), report.JSON)
		runtime.GOMAXPROCS(old)
		if !errors.Is(err, errFull) {
			t.Errorf("%d CPUs: error %v, want %v", procs, err, errFull)
		}
		if sum.Samples == 20_000 && procs == 1 {
			t.Errorf("%d CPUs: all samples handled after the writer failed", procs)
		}
	}
}

// A round holding any number of runs in order (one per CPU ring read) is
// written in time order, ties in file order, whatever the number of runs;
// what is newer than the previous round waits for the next.
func TestRoundRuns(t *testing.T) {
	x, _ := testEvents(t)
	for _, runs := range []int{1, 2, 3, 5, 17, 40} {
		f := newFile(t, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0))
		type want struct{ time, a uint64 }
		var all []want
		seq := uint64(0)
		for round := range 4 {
			for r := range runs {
				// Run r holds times round*1000 + r + k*runs: the runs
				// interleave, and every odd run repeats the times of the
				// previous one (a tie, to be kept in file order).
				for k := range 7 {
					ts := uint64(round*1000 + r + k*runs)
					if r%2 == 1 {
						ts--
					}
					f.sample(xID0, 1, 1, ts, 0, xRaw(t, x, 1, uint32(seq), 0, "", "", 0))
					all = append(all, want{ts, seq})
					seq++
				}
			}
			f.round()
		}
		out, sum := run(t, f.close(), report.JSON)
		if sum.Samples != uint64(len(all)) {
			t.Fatalf("%d runs: %d samples, want %d", runs, sum.Samples, len(all))
		}
		slices.SortStableFunc(all, func(a, b want) int { return cmp.Compare(a.time, b.time) })
		for i, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
			var got struct {
				Time   uint64
				Fields struct{ A uint64 }
			}
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			if got.Time != all[i].time || got.Fields.A != all[i].a {
				t.Fatalf("%d runs: line %d is sample %d at %d, want sample %d at %d", runs, i, got.Fields.A, got.Time, all[i].a, all[i].time)
			}
		}
	}
}

// A thread made during the recording has its parent's name, as perf
// script shows it (thread__fork), until a COMM renames it; a parent
// without a name gives none.
func TestForkNames(t *testing.T) {
	x, _ := testEvents(t)
	f := newFile(t, tracingData(x.Format("x", xID)), attr("user_events:x", xID, xID0))
	const s = 1_000_000_000
	f.comm(xID0, 100, 100, "server", 0, 0)
	f.check(f.w.WriteFork(100, 100, 105, 100, 1*s, &perfdata.Sample{ID: xID0, PID: 100, TID: 105, Time: 1 * s}))
	f.check(f.w.WriteFork(300, 200, 300, 200, 1*s, &perfdata.Sample{ID: xID0, PID: 300, TID: 300, Time: 1 * s}))
	f.sample(xID0, 100, 105, 2*s, 0, xRaw(t, x, 105, 1, 0, "", "", 0))
	f.sample(xID0, 300, 300, 2*s, 0, xRaw(t, x, 300, 2, 0, "", "", 0))
	f.comm(xID0, 100, 105, "worker", 3*s, 0)
	f.sample(xID0, 100, 105, 4*s, 0, xRaw(t, x, 105, 3, 0, "", "", 0))
	f.round()
	out, sum := run(t, f.close(), report.JSON)
	if sum.Samples != 3 {
		t.Fatalf("%d samples, want 3 (forks are not samples)", sum.Samples)
	}
	var comms []string
	for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		var got struct{ Comm string }
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		comms = append(comms, got.Comm)
	}
	if want := []string{"server", "", "worker"}; !slices.Equal(comms, want) {
		t.Errorf("names %q, want %q", comms, want)
	}
}
