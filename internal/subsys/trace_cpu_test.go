package subsys

import (
	"testing"
)

// TestTraceCPUMapping checks that a writer's CPU is taken modulo the
// buffer's CPUs — negative ones and those past NumCPU included — for
// counts that are powers of two (mapped by a mask) and counts that are not.
func TestTraceCPUMapping(t *testing.T) {
	for _, ncpu := range []int{1, 2, 3, 4, 6} {
		now := uint64(1_000_000_000)
		s := New(Options{NumCPU: ncpu, Clock: clockAt(&now)})
		mem := newMem()
		e := &tenv{t: t, s: s, mem: mem, p: s.NewProcess(mem)}
		f := s.Open()
		idx, err := e.reg(f, "cpumap u32 a", 31, 0)
		if err != nil {
			t.Fatal(err)
		}
		e.enable("cpumap", true)
		for cpu := -9; cpu <= 9; cpu++ {
			before := make([]uint64, ncpu)
			for i := range before {
				before[i] = s.trace.ring.Stats(i).Entries
			}
			if _, err := f.Writev(Writer{PID: 1, TGID: 1, Comm: "c", CPU: cpu}, le32(idx), le32(7)); err != nil {
				t.Fatal(err)
			}
			want := ((cpu % ncpu) + ncpu) % ncpu
			for i := range before {
				d := s.trace.ring.Stats(i).Entries - before[i]
				if (i == want) != (d == 1) || d > 1 {
					t.Errorf("NumCPU %d: a write on CPU %d added %d records to CPU %d's buffer; want it on CPU %d", ncpu, cpu, d, i, want)
				}
			}
		}
		f.Close()
	}
}
