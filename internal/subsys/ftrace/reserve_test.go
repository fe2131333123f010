package ftrace

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzReserve runs the same writes on two Rings, one with Write and one
// with Reserve and Commit (Write when Reserve cannot), the second also
// reserving records it discards, filled with junk; between the writes
// both are consumed, read raw, reset, resized and turned off and on alike.
// Both must hold the same bytes throughout: trace text, stats, raw pages.
func FuzzReserve(f *testing.F) {
	f.Add([]byte{0, 0, 10, 1, 1, 0, 7, 0, 0, 1, 200, 2, 4, 5, 6, 9, 0})
	f.Add(bytes.Repeat([]byte{0, 0, 40, 1, 1, 0, 40, 3}, 120))
	f.Add(append(bytes.Repeat([]byte{0, 1, 255, 3, 1, 1, 255, 4}, 40), 4, 4, 5, 7, 2, 5, 9, 1, 5))
	f.Add([]byte{7, 0, 0, 0, 255, 0, 8, 2, 0, 40, 4, 0, 5, 5, 6, 8, 0, 0, 10, 0, 8, 0, 1, 10, 0, 5})
	f.Fuzz(runFuzzReserve)
}

// TestReserveSameAsWrite is FuzzReserve on pseudo-random operations.
func TestReserveSameAsWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ops := make([]byte, 3000)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		runFuzzReserve(t, ops)
	}
}

func runFuzzReserve(t *testing.T, ops []byte) {
	const ncpu = 2
	now := uint64(1_000_000_000)
	clock := func() uint64 { return now }
	a := New(Config{NCPU: ncpu, BufferKB: 8, Clock: clock})
	b := New(Config{NCPU: ncpu, BufferKB: 8, Clock: clock})
	wa, wb := newWriter(t), newWriter(t)
	ts := make([]uint64, ncpu)
	step := 0
	for i := 0; i < len(ops); {
		next := func() byte {
			if i >= len(ops) {
				return 0
			}
			i++
			return ops[i-1]
		}
		step++
		switch op := next() % 10; op {
		case 0, 1:
			// A write, of every size up to past MaxRecordSize, with time
			// gaps around 2^27 ns and backwards.
			cpu := int(next()) % ncpu
			size := 4 + int(next())*17 + int(op)
			switch gap := next(); gap % 6 {
			case 1:
				ts[cpu] += uint64(gap)
			case 2:
				ts[cpu] += 1<<27 - 1
			case 3:
				ts[cpu] += 1 << 27
			case 4:
				ts[cpu] += 1 << 40
			case 5:
				ts[cpu] -= min(ts[cpu], 1000)
			}
			ea, eb := wa.entry(cpu, ts[cpu], size), wb.entry(cpu, ts[cpu], size)
			okA := a.Write(ea)
			var res Reservation
			okB := true
			if b.Reserve(&res, cpu, eb.TS, len(eb.Record)) {
				if len(res.Record) != len(eb.Record) {
					t.Fatalf("step %d: reserved %d bytes for %d", step, len(res.Record), len(eb.Record))
				}
				copy(res.Record, eb.Record)
				res.Commit(eb.PID, eb.TGID, eb.Comm, eb.Event, eb.Tracepoint)
			} else {
				okB = b.Write(eb)
			}
			if okA != okB {
				t.Fatalf("step %d: Write %v, Reserve or Write %v", step, okA, okB)
			}
		case 2:
			// A record reserved, filled with junk and discarded.
			cpu := int(next()) % ncpu
			size := 4 + int(next())*17
			var res Reservation
			if b.Reserve(&res, cpu, ts[cpu]+uint64(next())<<20, size) {
				for j := range res.Record {
					res.Record[j] = 0xa5
				}
				res.Discard()
			}
		case 3, 4:
			cpu := int(next())%(ncpu+1) - 1
			var ea, eb Entry
			_, okA := a.Consume(&ea, cpu)
			_, okB := b.Consume(&eb, cpu)
			if okA != okB || ea.CPU != eb.CPU || ea.TS != eb.TS || !bytes.Equal(ea.Record, eb.Record) {
				t.Fatalf("step %d: consumed %v %d %d %x, and %v %d %d %x", step, okA, ea.CPU, ea.TS, ea.Record, okB, eb.CPU, eb.TS, eb.Record)
			}
		case 5:
			cpu := int(next()) % ncpu
			pa, okA := a.ReadRawPage(nil, cpu)
			pb, okB := b.ReadRawPage(nil, cpu)
			if okA != okB || !bytes.Equal(pa, pb) {
				t.Fatalf("step %d: raw pages of cpu %d differ (%v, %v):\n%x\n%x", step, cpu, okA, okB, pa, pb)
			}
		case 6:
			if next()%4 == 0 {
				a.Reset()
				b.Reset()
			}
		case 7:
			kb := 1 + int(next())%24
			if err := a.Resize(kb); err != nil {
				t.Fatal(err)
			}
			if err := b.Resize(kb); err != nil {
				t.Fatal(err)
			}
		case 8:
			if next()%3 == 0 {
				a.SetTracingOn(!a.TracingOn())
				b.SetTracingOn(!b.TracingOn())
			}
		case 9:
			now += uint64(next()) * 1000
		}
		sameRings(t, step, a, b)
	}
	for cpu := range ncpu {
		for {
			pa, okA := a.ReadRawPage(nil, cpu)
			pb, okB := b.ReadRawPage(nil, cpu)
			if okA != okB || !bytes.Equal(pa, pb) {
				t.Fatalf("end: raw pages of cpu %d differ (%v, %v):\n%x\n%x", cpu, okA, okB, pa, pb)
			}
			if !okA {
				break
			}
		}
	}
	sameRings(t, -1, a, b)
}

// sameRings compares what two Rings show without consuming: the trace
// text, every CPU's stats, the entry counts.
func sameRings(t *testing.T, step int, a, b *Ring) {
	t.Helper()
	if ta, tb := a.AppendTrace(nil, -1), b.AppendTrace(nil, -1); !bytes.Equal(ta, tb) {
		t.Fatalf("step %d: trace differs:\n%s\nwith Reserve:\n%s", step, ta, tb)
	}
	for cpu := range a.NumCPU() {
		if sa, sb := a.Stats(cpu), b.Stats(cpu); sa != sb {
			t.Fatalf("step %d: cpu %d stats %+v, with Reserve %+v", step, cpu, sa, sb)
		}
	}
	ia, wa := a.Entries()
	ib, wb := b.Entries()
	if ia != ib || wa != wb {
		t.Fatalf("step %d: entries %d/%d, with Reserve %d/%d", step, ia, wa, ib, wb)
	}
}
