package perfdata

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// discard is an io.WriteSeeker that keeps nothing.
type discard struct{ off int64 }

func (d *discard) Write(p []byte) (int, error) { d.off += int64(len(p)); return len(p), nil }
func (d *discard) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekStart {
		d.off = off
	}
	return d.off, nil
}

// benchRaw is a tracepoint record of a typical size: the common header and
// 56 bytes of payload.
var benchRaw = make([]byte, 64)

func BenchmarkWriteSample(b *testing.B) {
	for _, bc := range []struct {
		name  string
		attrs []Attr
	}{
		{"1attr", []Attr{testAttr()}},
		{"2attrs", []Attr{testAttr(), otherAttr()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w, err := NewWriter(&discard{})
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range bc.attrs {
				if _, err := w.AddAttr(a); err != nil {
					b.Fatal(err)
				}
			}
			s := Sample{Misc: MiscUser, ID: testIDBase, PID: 1, TID: 2, Time: 3, CPU: 1, Period: 1, Raw: benchRaw}
			b.SetBytes(8 + 48 + 4 + int64(len(benchRaw)) + 4)
			b.ReportAllocs()
			for b.Loop() {
				s.Time++
				if err := w.WriteSample(&s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkWriteComm(b *testing.B) {
	w, err := NewWriter(&discard{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.AddAttr(testAttr()); err != nil {
		b.Fatal(err)
	}
	t := Sample{ID: testIDBase, PID: 1, TID: 2, Time: 3}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteComm(1, 2, "some-thread", &t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteRecords writes runs of records already encoded, as a
// uetrace session's stream holds them, of the size WriteSample writes for
// benchRaw: a run of 4 KiB goes through the Writer's buffer, one of
// 256 KiB straight from the caller's bytes. Both walk every record's
// header first: ns/record is that walk and the copy (none for the long
// run, into a WriteSeeker that keeps nothing).
func BenchmarkWriteRecords(b *testing.B) {
	const recSize = 8 + 48 + 4 + 64 + 4
	for _, runKB := range []int{4, 256} {
		b.Run(fmt.Sprintf("run=%dKiB", runKB), func(b *testing.B) {
			run := make([]byte, runKB<<10/recSize*recSize)
			for r := run; len(r) > 0; r = r[recSize:] {
				putHeader(r, RecordSample, MiscUser, recSize)
			}
			w, err := NewWriter(&discard{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.AddAttr(testAttr()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(run)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteRecords(run); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(run)/recSize)), "ns/record")
		})
	}
}

// BenchmarkReadSamples reads a file of samples of the size perf record
// writes for a tracepoint from the page cache: one op is one record.
func BenchmarkReadSamples(b *testing.B) {
	for _, bc := range []struct {
		name  string
		attrs []Attr
		ids   []uint64
	}{
		{"1attr", []Attr{testAttr()}, []uint64{testIDBase}},
		{"2attrs", []Attr{testAttr(), otherAttr()}, []uint64{testIDBase, testIDBase, testIDBase, otherIDBase}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.data")
			w, err := Create(path)
			if err != nil {
				b.Fatal(err)
			}
			for _, a := range bc.attrs {
				if _, err := w.AddAttr(a); err != nil {
					b.Fatal(err)
				}
			}
			const n = 200_000 // 25 MB
			for i := range n {
				s := Sample{ID: bc.ids[i%len(bc.ids)], PID: 1, TID: 2, Time: uint64(i), CPU: 1, Period: 1, Raw: benchRaw}
				if err := w.WriteSample(&s); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 {
					w.WriteFinishedRound()
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			st, _ := os.Stat(path)
			r, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			b.SetBytes(st.Size() / (n + n/1000))
			b.ReportAllocs()
			var sum uint64
			for b.Loop() {
				rec, err := r.Next()
				if err == io.EOF {
					r.rewind()
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				sum += rec.Sample.Time + uint64(len(rec.Sample.Raw))
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			if sum == 0 {
				b.Fatal("read nothing")
			}
		})
	}
}

// BenchmarkSession is a sample read through a Session: a file of two
// CPUs' rings, each round the two runs of 500 samples one after the
// other, as uetrace record writes them; delivered in time order with its
// event and its task's names (four threads, named). Mapped, and read into
// memory (unmapped: the session copies what it holds).
func BenchmarkSession(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.data")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	a := testAttr()
	a.SampleType = SampleIdentifier | SampleTID | SampleTime | SampleCPU | SampleRaw
	if _, err := w.AddAttr(a); err != nil {
		b.Fatal(err)
	}
	w.SetTracingData(testTracingData(testEvent(b)))
	for tid := uint32(11); tid <= 14; tid++ {
		w.WriteComm(10, tid, "worker", nil)
	}
	const n, round = 200_000, 1000
	for base := 0; base < n; base += round {
		for cpu := range uint32(2) {
			for i := base + int(cpu); i < base+round; i += 2 {
				s := Sample{ID: testIDBase + uint64(cpu), PID: 10, TID: 11 + uint32(i%4), Time: uint64(i) * 1000, CPU: cpu, Raw: benchRaw}
				if err := w.WriteSample(&s); err != nil {
					b.Fatal(err)
				}
			}
		}
		w.WriteFinishedRound()
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, mapped := range []bool{true, false} {
		name := "mapped"
		if !mapped {
			name = "unmapped"
		}
		b.Run(name, func(b *testing.B) {
			open := func() *Reader {
				if mapped {
					r, err := Open(path)
					if err != nil {
						b.Fatal(err)
					}
					return r
				}
				return openBytes(b, file)
			}
			r := open()
			s, err := NewSession(r, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var sum uint64
			for b.Loop() {
				smp, err := s.Next()
				if err == io.EOF {
					// Again, from the start: a session per n samples.
					r.Close()
					r = open()
					if s, err = NewSession(r, nil); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				sum += smp.Time + uint64(len(smp.Comm))
			}
			r.Close()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			if sum == 0 {
				b.Fatal("read nothing")
			}
		})
	}
}
