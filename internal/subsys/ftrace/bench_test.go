package ftrace

import (
	"sync/atomic"
	"testing"
)

// A 40-byte record: the 8-byte header and a 32-byte payload.
func benchEntry(b *testing.B, cpu int) *Entry {
	ev := mustParse(b, "b u32 a; u32 b; u64 c; char[16] d")
	return &Entry{CPU: cpu, PID: 1, Comm: "bench", Event: ev, Tracepoint: "b", Record: record(1, 0, 0, 1, make([]byte, 32))}
}

func BenchmarkWrite(b *testing.B) {
	r := New(Config{NCPU: 1, BufferKB: DefaultBufferKB})
	e := benchEntry(b, 0)
	// Go round the buffer once so that every page has its slots.
	for range PagesFor(DefaultBufferKB) * (PageCapacity/EventSize(len(e.Record)) + 1) {
		e.TS += 1000
		r.Write(e)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Record)))
	for b.Loop() {
		e.TS += 1000
		r.Write(e)
	}
}

func BenchmarkWriteNow(b *testing.B) {
	r := New(Config{NCPU: 1, BufferKB: DefaultBufferKB})
	e := benchEntry(b, 0)
	for range PagesFor(DefaultBufferKB) * (PageCapacity/EventSize(len(e.Record)) + 1) {
		r.WriteNow(e)
	}
	b.ReportAllocs()
	for b.Loop() {
		r.WriteNow(e)
	}
}

// BenchmarkWriteParallel writes from GOMAXPROCS goroutines, each on its own
// CPU buffer.
func BenchmarkWriteParallel(b *testing.B) {
	const ncpu = 64
	r := New(Config{NCPU: ncpu, BufferKB: 64})
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		e := benchEntry(b, int(next.Add(1)-1)%ncpu)
		for pb.Next() {
			e.TS += 1000
			r.Write(e)
		}
	})
}

func BenchmarkAppendLine(b *testing.B) {
	e := benchEntry(b, 0)
	e.TS = 12345678901
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLine(buf[:0], e)
	}
}

func BenchmarkConsume(b *testing.B) {
	r := New(Config{NCPU: 4, BufferKB: DefaultBufferKB})
	e := benchEntry(b, 0)
	var out Entry
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.CPU = i % 4
		e.TS += 1000
		r.Write(e)
		r.Consume(&out, -1)
	}
}

// benchTrace is a ring of 4 CPUs holding 4 000 records, and their count.
func benchTrace(b *testing.B) (*Ring, int) {
	r := New(Config{NCPU: 4, BufferKB: 64})
	e := benchEntry(b, 0)
	for i := range 4000 {
		e.CPU = i % 4
		e.TS += 1000
		r.Write(e)
	}
	in, _ := r.Entries()
	return r, int(in)
}

func BenchmarkAppendTrace(b *testing.B) {
	r, in := benchTrace(b)
	buf := r.AppendTrace(nil, -1)
	b.ReportAllocs()
	b.ReportMetric(float64(in), "lines")
	for b.Loop() {
		buf = r.AppendTrace(buf[:0], -1)
	}
}

// BenchmarkTextReader reads the same trace as BenchmarkAppendTrace through
// a TextReader, in reads of 128 KiB (FUSE's), from 0 to the end.
func BenchmarkTextReader(b *testing.B) {
	r, in := benchTrace(b)
	tr := r.NewTextReader(-1)
	defer tr.Close()
	p := make([]byte, 128<<10)
	b.ReportAllocs()
	b.ReportMetric(float64(in), "lines")
	for b.Loop() {
		for off := int64(0); ; {
			n, err := tr.ReadAt(p, off)
			off += int64(n)
			if err != nil {
				break
			}
		}
	}
}
