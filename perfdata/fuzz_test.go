package perfdata

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fuzzSeeds are files the tests write and the file of real perf.
func fuzzSeeds(f *testing.F) [][]byte {
	f.Helper()
	var seeds [][]byte
	for _, lost := range []bool{false, true} {
		tf := writeTestFile(f, f.TempDir(), 6, lost)
		b, err := os.ReadFile(tf.path)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	attr := testAttr()
	for _, size := range []int{AttrSizeVer0, AttrSizeVer8, 160} {
		seeds = append(seeds, buildFile(size, []Attr{attr, otherAttr()}, sampleRecord(testIDBase, 1, 2, 3, 4, 5, 0), sampleRecord(otherIDBase, 1, 2, 3, 4, 5, 4|0x1234<<32)))
	}
	one := Attr{SampleType: SampleIdentifier | SampleRead | SampleCallchain | SampleRaw, ReadFormat: FormatGroup | FormatID, Flags: AttrSampleIDAll, IDs: []uint64{1}}
	seeds = append(seeds, buildFile(AttrSizeVer7, []Attr{one}, sampleRecord(1, 1, 5, 1, 0, 1, 4)))
	for _, name := range []string{"sched_switch.data", "sched_switch_pipe.data", "perf-collect.data"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// FuzzReader reads any bytes as a perf.data file: it must give an error or
// records, never panic or loop, and what it returns must lie in the file.
func FuzzReader(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkReader)
}

// FuzzReaderPipe reads any bytes after a pipe-mode header (perf record -o
// -) as FuzzReader does: the records that carry the attrs, the tracing
// data and the features are parsed at open, and skipped or taken in again
// by Next.
func FuzzReaderPipe(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "sched_switch_pipe.data")); err == nil {
		f.Add(b[pipeHeaderSize:])
		// Only the header records.
		if r, err := NewReader(bytes.NewReader(b), int64(len(b))); err == nil {
			f.Add(b[pipeHeaderSize:r.pipeScanned])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		stream := append(ne.AppendUint64(ne.AppendUint64(nil, magic), pipeHeaderSize), data...)
		checkReader(t, stream)
	})
}

// checkReader reads data as a perf.data file: it must give an error or
// records, never panic or loop, and what it returns must lie in the file.
func checkReader(t *testing.T, data []byte) {
	{
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatalf("%d records from %d bytes", i, len(data))
			}
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if _, ok := err.(*FormatError); !ok {
					t.Fatalf("error of type %T: %v", err, err)
				}
				if r.err != nil {
					break // the framing is broken: the iteration ends
				}
				continue
			}
			end := rec.Offset + recordHeaderSize + int64(len(rec.Data))
			if rec.Offset < r.dataOff || end > r.dataEnd || end > int64(len(data)) {
				t.Fatalf("record [%d, %d) outside the data [%d, %d)", rec.Offset, end, r.dataOff, r.dataEnd)
			}
			if !bytes.Equal(rec.Data, data[rec.Offset+recordHeaderSize:end]) {
				t.Fatalf("record at %d: Data is not the file's bytes", rec.Offset)
			}
			if rec.Attr != nil && !containsPtr(r.Attrs(), rec.Attr) {
				t.Fatalf("record at %d: Attr points outside Attrs", rec.Offset)
			}
			if len(rec.Sample.Raw) > len(rec.Data) || len(rec.Comm) > len(rec.Data) {
				t.Fatalf("record at %d: Raw or Comm longer than the record", rec.Offset)
			}
		}
	}
}

func containsPtr(attrs []Attr, a *Attr) bool {
	for i := range attrs {
		if &attrs[i] == a {
			return true
		}
	}
	return false
}

// FuzzTracingData decodes any bytes as HEADER_TRACING_DATA; what decodes
// must encode back to the same TracingData.
func FuzzTracingData(f *testing.F) {
	ev := testEvent(f)
	td := testTracingData(ev)
	f.Add(appendTracingData(nil, td))
	td.Ftrace = [][]byte{[]byte("name: function\n")}
	td.Kallsyms, td.Printk, td.SavedCmdlines = []byte("ffff t x\n"), []byte("0x1 : \"%s\"\n"), []byte("1 init\n")
	f.Add(appendTracingData(nil, td))
	td.Version = "0.5"
	f.Add(appendTracingData(nil, td))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := &featReader{b: data, f: FeatureTracingData}
		got := decodeTracingData(fr)
		if got == nil {
			if fr.err == nil {
				t.Fatal("no tracing data and no error")
			}
			return
		}
		if got.Version == "" || got.LongSize == 0 || got.PageSize == 0 || len(got.HeaderPage) == 0 || len(got.HeaderEvent) == 0 {
			return // the encoder would write its defaults instead
		}
		fr = &featReader{b: appendTracingData(nil, got), f: FeatureTracingData}
		again := decodeTracingData(fr)
		if fr.err != nil {
			t.Fatalf("decoding what was encoded: %v", fr.err)
		}
		if !versionAtLeast06(got.Version) {
			got.SavedCmdlines = nil
		}
		// cmp.Diff is slow on long byte slices: it is only for the message.
		if !tracingEqual(got, again) {
			t.Fatalf("(-decoded +decoded again):\n%s", cmp.Diff(got, again, cmpopts.EquateEmpty()))
		}
	})
}

func tracingEqual(a, b *TracingData) bool {
	eq := func(x, y [][]byte) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !bytes.Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if a.Version != b.Version || a.LongSize != b.LongSize || a.PageSize != b.PageSize ||
		!bytes.Equal(a.HeaderPage, b.HeaderPage) || !bytes.Equal(a.HeaderEvent, b.HeaderEvent) ||
		!eq(a.Ftrace, b.Ftrace) || len(a.Systems) != len(b.Systems) ||
		!bytes.Equal(a.Kallsyms, b.Kallsyms) || !bytes.Equal(a.Printk, b.Printk) || !bytes.Equal(a.SavedCmdlines, b.SavedCmdlines) {
		return false
	}
	for i := range a.Systems {
		if a.Systems[i].Name != b.Systems[i].Name || !eq(a.Systems[i].Formats, b.Systems[i].Formats) {
			return false
		}
	}
	return true
}

// FuzzSession reads any bytes as a perf.data file through a Session, with
// the default queue and with one so small that it flushes all the time:
// no panic or loop; what reads to the end gives every sample the Reader
// gives, once, in time order but for those counted as unordered (and
// those without a time); with Retain the samples' Raw stay as they were;
// the names given are those of the samples.
func FuzzSession(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	ring, _ := ringFile(f, nil)
	f.Add(ring)
	f.Fuzz(func(t *testing.T, data []byte) {
		// The Reader's samples, as the session must give them.
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		var want []string
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatalf("%d records from %d bytes", i, len(data))
			}
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return // the session stops at the same error
			}
			if rec.Type == RecordSample {
				s := &rec.Sample
				want = append(want, fmt.Sprint(s.ID, s.PID, s.TID, s.Time, s.CPU, s.Raw))
			}
		}
		slices.Sort(want)
		for _, o := range []SessionOptions{{Retain: true}, {MaxQueue: 1}} {
			r, err := NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("the file opened once, then not: %v", err)
			}
			var names []string
			o.Comm = func(pid, tid uint32, comm string) error {
				names = append(names, comm)
				return nil
			}
			s, err := NewSession(r, &o)
			if err != nil {
				return // a format that does not parse
			}
			var got []string
			var raws, copies [][]byte
			var last uint64
			for i := 0; ; i++ {
				if i > len(data) {
					t.Fatalf("%d samples from %d bytes", i, len(data))
				}
				smp, err := s.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("the Reader read the file whole, the session did not: %v", err)
				}
				got = append(got, fmt.Sprint(smp.ID, smp.PID, smp.TID, smp.Time, smp.CPU, smp.Raw))
				if o.Retain {
					raws, copies = append(raws, smp.Raw), append(copies, bytes.Clone(smp.Raw))
				}
				if smp.Time != 0 {
					if smp.Time < last && s.Stats().Unordered == 0 {
						t.Fatalf("sample at %d after one at %d, none counted as unordered", smp.Time, last)
					}
					last = smp.Time
				}
				if smp.Comm != "" && !slices.Contains(names, smp.Comm) {
					t.Fatalf("a sample's task is named %q, a name never given", smp.Comm)
				}
				if smp.Event != nil && (smp.Event.Index >= len(s.Events()) || s.Events()[smp.Event.Index] != smp.Event) {
					t.Fatalf("a sample's event is not the session's")
				}
			}
			for i := range raws {
				if !bytes.Equal(raws[i], copies[i]) {
					t.Fatalf("sample %d's Raw changed, with Retain", i)
				}
			}
			if s.Stats().Samples != uint64(len(got)) {
				t.Fatalf("%d samples delivered, %d counted", len(got), s.Stats().Samples)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("the session gave %d samples, the Reader %d, or others", len(got), len(want))
			}
		}
	})
}
