package main

import (
	"errors"
	"testing"
)

// simulate fills in the writes of sc as if run on a machine where each
// step takes 1 ms, each write 50 µs, and sleeps and close_reopen take
// what they plan; stall[[2]int{step, write}] adds that many ns just
// before a write (a vCPU stalled there), inside[[2]int{step, write}] that
// many inside the write's syscall, and short[step] makes a sleep step take
// that many ns instead.
func simulate(sc *scenario, stall, inside map[[2]int]int64, short map[int]int64) {
	now := int64(1e9)
	for si, s := range sc.Steps {
		switch s.Op {
		case "sleep":
			if d, ok := short[si]; ok {
				now += d
			} else {
				now += int64(s.MS) * 1e6
			}
		case "close_reopen":
			now += closeReopenMS * 1e6
		case "write", "write_hex":
			n := s.Count
			if s.Op == "write_hex" {
				n = 1
			}
			s.N, s.at = make([]int, n), make([][2]int64, n)
			for wi := range n {
				now += stall[[2]int{si, wi}]
				start := now
				now += inside[[2]int{si, wi}] + 50e3
				s.N[wi] = 4 + s.Size
				s.at[wi] = [2]int64{start, now}
			}
		}
		now += 1e6
	}
}

func scenarioNamed(t *testing.T, name string) *scenario {
	t.Helper()
	for _, sc := range scenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// Every scenario, run without a stall, keeps its plan: the sleeps it
// plans to make time extends add up to more than 2^27 ns, and the rest
// of its gaps stay short.
func TestCheckGapsUnstalled(t *testing.T) {
	for _, sc := range scenarios() {
		simulate(sc, nil, nil, nil)
		if err := checkGaps(sc, initialEnabled()); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
}

func TestCheckGapsStall(t *testing.T) {
	// lines: steps 3 and 4 write on CPU 0 and 1, 5 sleeps 2 ms, 6 and 7
	// write on CPU 0 and 1, 8 sleeps 150 ms, 9 writes on CPU 0.
	lines := func() *scenario { return scenarioNamed(t, "lines") }
	for _, c := range []struct {
		name   string
		sc     *scenario
		stall  map[[2]int]int64
		inside map[[2]int]int64
		short  map[int]int64
		want   *gapError // nil: no error
	}{
		{name: "stall between two writes of one CPU", sc: lines(),
			stall: map[[2]int]int64{{6, 0}: 140e6},
			want:  &gapError{scenario: "lines", step: 6, write: 0, cpu: 0, planned: 2}},
		{name: "stall inside a write's syscall", sc: lines(),
			// 134 ms and the 5 ms since step 4's write: over 2^27 ns less the margin
			inside: map[[2]int]int64{{7, 0}: 134e6},
			want:   &gapError{scenario: "lines", step: 7, write: 0, cpu: 1, planned: 2}},
		{name: "stall between writes of a step", sc: scenarioNamed(t, "size-4k-40"),
			stall: map[[2]int]int64{{3, 57}: 200e6},
			want:  &gapError{scenario: "size-4k-40", step: 3, write: 57, cpu: 0}},
		{name: "stall short of 2^27 ns less the margin", sc: lines(),
			stall: map[[2]int]int64{{6, 0}: extendGap - gapMargin - 10e6}},
		{name: "stall over a clear of the buffer", sc: scenarioNamed(t, "trunc"),
			// steps: trunc, writes on CPU 0 and 1, trace, trunc, trace, stats, stats, writes on CPU 0
			stall: map[[2]int]int64{{8, 0}: 10e9}},
		{name: "stall where a time extend is planned anyway", sc: lines(),
			stall: map[[2]int]int64{{9, 0}: 10e9}},
		{name: "planned sleep that came short", sc: lines(),
			short: map[int]int64{8: 100e6},
			want:  &gapError{scenario: "lines", step: 9, write: 0, cpu: 0, planned: 150}},
		{name: "writes while tracing_on is 0 are not records", sc: scenarioNamed(t, "tracing_on"),
			// steps: 3 writes on CPU 0, 4 tracing_on 0, 5 writes on CPU 0
			// (stalled), ..., 11 tracing_on 1, 12 writes on CPU 0: its gap
			// runs from step 3, not from step 5
			stall: map[[2]int]int64{{5, 1}: 140e6},
			want:  &gapError{scenario: "tracing_on", step: 12, write: 0, cpu: 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			simulate(c.sc, c.stall, c.inside, c.short)
			err := checkGaps(c.sc, initialEnabled())
			var ge *gapError
			if c.want == nil {
				if err != nil {
					t.Fatalf("checkGaps: %v, want no error", err)
				}
				return
			}
			if !errors.As(err, &ge) {
				t.Fatalf("checkGaps: %v, want a gapError", err)
			}
			got := *ge
			got.gap = 0
			if got != *c.want {
				t.Fatalf("checkGaps: %+v, want %+v (%v)", got, *c.want, err)
			}
			t.Log(err)
		})
	}
}

// Only the last scenario, which registers, deletes and closes, cannot run
// twice in one boot.
func TestRerunnable(t *testing.T) {
	for _, sc := range scenarios() {
		if got, want := rerunnable(sc), sc.Name != "deleted"; got != want {
			t.Errorf("rerunnable(%s) = %v, want %v", sc.Name, got, want)
		}
	}
}
