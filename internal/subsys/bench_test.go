package subsys

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/shmring"
)

// benchWriteSetup registers a 5-field event on a fresh subsystem.
func benchWriteSetup(b testing.TB) (*tenv, *File, [][]byte) {
	e := &tenv{s: New(Options{}), mem: newMem()}
	e.p = e.s.NewProcess(e.mem)
	f := e.s.Open()
	idx, err := f.Register(e.p, root, regArgs("bench u32 status; s64 latency; char[16] method; __rel_loc char[] path; u8 retry", check, 0, 4, 0))
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 0, 64)
	payload = append(payload, le32(200)...)
	payload = append(payload, 1, 2, 3, 4, 5, 6, 7, 8)
	payload = append(payload, "GET\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"...)
	payload = append(payload, le32(14<<16|1)...) // __rel_loc: 14 bytes, after the u8
	payload = append(payload, 0)
	payload = append(payload, "/api/v1/items\x00"...)
	return e, f, [][]byte{le32(idx), payload}
}

// BenchmarkWriteSession writes to an event with one perf-like session
// attached, draining it in the background. Target (issue 3): ≤ 200 ns, 0
// allocs.
func BenchmarkWriteSession(b *testing.B) {
	e, f, iov := benchWriteSetup(b)
	ss := e.s.NewSession(SessionOptions{BufferBytes: 8 << 20})
	if err := ss.Attach(e.s.Lookup("user_events", "bench")); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<20)
		recs := make([]Record, 0, 1<<14)
		for {
			var err error
			if recs, err = ss.Read(ctx, buf, recs[:0]); err != nil {
				return
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Writev(w0, iov...); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(ss.Lost()), "lost")
}

// BenchmarkWriteDisabled is the cost of a write nothing listens to (EBADF).
func BenchmarkWriteDisabled(b *testing.B) {
	_, f, iov := benchWriteSetup(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Writev(w0, iov...); err == nil {
			b.Fatal("write to a disabled event succeeded")
		}
	}
}

// TestMemory100k registers 100 000 events and measures the heap they take.
// Target (issue 3): ≤ 100 MB.
func TestMemory100k(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("slow, and the race detector's own memory would distort it")
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := New(Options{MaxEvents: 200000, LastID: 1 << 30})
	mem := &fakeMem{base: 0x10000}
	p := s.NewProcess(mem)
	f := s.Open()
	for i := range 100000 {
		cmd := fmt.Sprintf("ev_%06d u32 status; s64 latency; char[16] method; __rel_loc char[] path", i)
		if _, err := f.Register(p, root, RegisterArgs{Reg: abi.UserReg{Size: abi.UserRegSize, EnableSize: 8, EnableAddr: 0x7f0000000000}.Bytes(), Name: cmd}); err == nil {
			t.Fatal("registration with an unwritable word succeeded")
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	mb := float64(after.HeapAlloc-before.HeapAlloc) / 1e6
	t.Logf("100000 events, 4 fields each: %.1f MB of heap (%.0f bytes/event)", mb, mb*1e6/100000)
	if mb > 100 {
		t.Errorf("%.1f MB for 100000 events, want ≤ 100 MB", mb)
	}
	if n := len(s.Events()); n != 100000 {
		t.Fatalf("%d events", n)
	}
	runtime.KeepAlive(f)
}

// BenchmarkWriteFtrace writes to an event enabled through its enable file:
// one ftrace consumer, the ring in overwrite mode. Target (issue 3): ≤ 200
// ns, 0 allocs.
func BenchmarkWriteFtrace(b *testing.B) {
	e, f, iov := benchWriteSetup(b)
	ev := e.s.Lookup("user_events", "bench")
	if err := e.s.SetFtrace(ev, true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Writev(w0, iov...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteFtraceParallel is the same from every CPU at once, each
// writer on its own trace CPU.
func BenchmarkWriteFtraceParallel(b *testing.B) {
	_, _, iov := benchWriteSetup(b)
	b.ReportAllocs()
	s := New(Options{NumCPU: runtime.GOMAXPROCS(0)})
	p := s.NewProcess(newMem())
	f := s.Open()
	idx, err := f.Register(p, root, regArgs("bench u32 status; s64 latency; char[16] method; __rel_loc char[] path; u8 retry", check, 0, 4, 0))
	if err != nil {
		b.Fatal(err)
	}
	iov[0] = le32(idx)
	if err := s.SetFtrace(s.Lookup("user_events", "bench"), true); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int32
	b.RunParallel(func(pb *testing.PB) {
		w := Writer{PID: 1, Comm: "bench", CPU: int(next.Add(1) - 1)}
		for pb.Next() {
			if _, err := f.Writev(w, iov...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDeliver is the daemon's cost per record handed over from a
// producer's ring into one consumer (the 46-byte payload of
// benchWriteSetup): in place, the payload copied once into the sample
// reserved in a session's stream (stream) or the trace buffer's page
// (ftrace); and, to compare, the way before File.Deliver, copied out of
// the ring (Next) then written (WriteStamped, now the tests' reference)
// into a session's stream.
func BenchmarkDeliver(b *testing.B) {
	for _, c := range []struct {
		name            string
		ftrace, inPlace bool
	}{{"stream", false, true}, {"stream-copied", false, false}, {"ftrace", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			e, f, iov := benchWriteSetup(b)
			ev := e.s.Lookup("user_events", "bench")
			var rs []*shmring.StreamReader
			if c.ftrace {
				if err := e.s.SetFtrace(ev, true); err != nil {
					b.Fatal(err)
				}
			} else {
				var ss *Session
				ss, rs = streamSession(b, e.s, 2, 4<<20, SessionOptions{Comm: true})
				if err := ss.Attach(ev); err != nil {
					b.Fatal(err)
				}
			}
			p, cons := ringPair(b)
			idx := binary.NativeEndian.Uint32(iov[0])
			w := Writer{PID: 7, TGID: 7, Comm: "bench", CPU: 1}
			buf := make([]byte, 1<<16)
			const batch = 1024
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for range batch {
					p.Write(shmring.Meta{Time: 1, WriteIndex: idx}, iov[1])
				}
				for _, r := range rs {
					r.Consume(len(r.Available()))
				}
				b.StartTimer()
				for range batch {
					if c.inPlace {
						v, _ := cons.Peek()
						f.Deliver(w, 1, &v, nil)
						cons.Advance(&v)
					} else {
						rec, _ := cons.Next(buf)
						f.WriteStamped(w, 1, rec.WriteIndex, rec.Payload)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}
