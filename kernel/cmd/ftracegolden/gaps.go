package main

import (
	"fmt"
	"strings"
)

// The golden compares whether a time extend stands before a record (see
// normalise in golden_test.go), and an extend also takes 8 bytes of a
// sub-buffer, so it moves every later record of the page, the padding,
// what survives an overwrite and the "bytes" of per_cpu stats. The ring
// buffer puts one before a record when the time since the previous record
// of the same CPU does not fit in 27 bits (test_time_stamp in
// kernel/trace/ring_buffer.c): more than 2^27 ns, about 134 ms.
//
// The scenarios choose which side of 2^27 ns each gap falls on: a gap
// with sleeps of at least 2^27 ns planned in it must be longer, every other
// one shorter. Sleeping only lengthens a gap, so the first kind always
// holds; the second is an assumption that a loaded host emulating the VM
// without KVM can break, by stalling a vCPU for longer than 134 ms between
// two back-to-back writes. checkGaps checks both against the clock, so
// that the capture re-runs a scenario whose gaps fell on the wrong side
// instead of emitting records the scenario did not mean.
const (
	extendGap = 1 << 27 // ns

	// gapMargin keeps a gap judged from CLOCK_MONOTONIC this far from
	// 2^27 ns: the ring buffer's clock ("local", sched_clock) and
	// CLOCK_MONOTONIC both count the TSC in ns, calibrated once, so they
	// agree to far better than this over a gap of 134 ms.
	gapMargin = 1_000_000 // ns

	// maxRecord is the largest payload a record takes (the edge
	// scenario's 4064); a larger write is dropped before the ring buffer
	// reads its clock.
	maxRecord = 4064

	// attempts bounds the runs of one scenario whose gaps fell on the
	// wrong side: each needs a stall of over 134 ms inside a few
	// milliseconds' window, so many in a row mean something else.
	attempts = 20
)

// initialEnabled is which events are enabled when the scenarios start
// (register enables each of eventCmds).
func initialEnabled() map[string]bool {
	m := map[string]bool{}
	for _, cmd := range eventCmds {
		name, _, _ := strings.Cut(cmd, " ")
		m[name] = true
	}
	return m
}

// gapError is a gap that fell on the side of 2^27 ns the scenario did not
// plan.
type gapError struct {
	scenario string
	step     int // index in the scenario's steps
	write    int // index of the write in the step
	cpu      int
	planned  int   // ms of sleep planned in the gap
	gap      int64 // ns: the longest the gap can have been when planned short, the shortest when planned long
}

func (e *gapError) Error() string {
	if e.planned*1_000_000 >= extendGap {
		return fmt.Sprintf("%s: step %d, write %d on CPU %d: %d ms of sleep planned, but only %.3f ms since the CPU's previous record: the sleep did not separate them by 2^27 ns",
			e.scenario, e.step, e.write, e.cpu, e.planned, float64(e.gap)/1e6)
	}
	return fmt.Sprintf("%s: step %d, write %d on CPU %d: up to %.3f ms since the CPU's previous record (%d ms of sleep planned): over 2^27 ns less %d ms, so the kernel may have put a time extend the scenario does not plan (a stalled vCPU)",
		e.scenario, e.step, e.write, e.cpu, float64(e.gap)/1e6, e.planned, gapMargin/1_000_000)
}

// record is a write the ring buffer recorded, as far as the scenario's
// steps tell: with tracing_on 1, the event enabled, the write(2)
// successful and the payload not over maxRecord.
type record struct {
	step, write, cpu int
	at               [2]int64 // CLOCK_MONOTONIC just before and just after the write(2)
	// prev is the same CPU's record before it since the buffer was last
	// cleared (an O_TRUNC open of trace), nil if none: after a clear the
	// next record starts a sub-buffer, whose time stamp leaves no room for
	// a time extend.
	prev *record
	// planned is the ms of sleep planned since prev.
	planned int
}

// plannedLong reports whether r's gap is planned to make a time extend.
func (r *record) plannedLong() bool { return r.planned*1_000_000 >= extendGap }

// records lists the records sc's steps before step upTo made (all of
// them when upTo < 0). enabled is which events were enabled when sc
// started.
func records(sc *scenario, enabled map[string]bool, upTo int) ([]*record, error) {
	en := map[string]bool{}
	for k, v := range enabled {
		en[k] = v
	}
	var out []*record
	last := map[int]*record{} // the last record of each CPU since the clear
	sleptSince := map[int]int{}
	on := true
	sleep := func(ms int) {
		for cpu := range last {
			sleptSince[cpu] += ms
		}
	}
	for si, s := range sc.Steps {
		if si == upTo {
			break
		}
		switch s.Op {
		case "trunc":
			clear(last)
			clear(sleptSince)
		case "tracing_on":
			if s.Err == "" {
				on = s.Arg != "0"
			}
		case "enable", "disable":
			if s.Err == "" {
				en[s.Arg] = s.Op == "enable"
			}
		case "sleep":
			sleep(s.MS)
		case "close_reopen":
			sleep(closeReopenMS)
		case "write", "write_hex":
			if len(s.at) != len(s.N) {
				return nil, fmt.Errorf("%s: step %d: %d writes, %d times", sc.Name, si, len(s.N), len(s.at))
			}
			size := s.Size
			if s.Op == "write_hex" {
				size = len(s.Hex) / 2
			}
			for wi, n := range s.N {
				if !on || !en[s.Event] || n < 0 || size > maxRecord {
					continue
				}
				cpu := *s.CPU
				r := &record{step: si, write: wi, cpu: cpu, at: s.at[wi], prev: last[cpu], planned: sleptSince[cpu]}
				out = append(out, r)
				last[cpu] = r
				sleptSince[cpu] = 0
			}
		}
	}
	return out, nil
}

// checkGaps checks each gap between two records of one CPU in sc, as run,
// against its plan: when the sleeps planned in it add up to 2^27 ns, the
// shortest it can have been, from just after the first write(2) to just
// before the second, must be over 2^27 ns plus gapMargin; else the longest,
// from just before the first to just after the second, must be under 2^27
// ns less gapMargin. enabled is which events were enabled when sc started.
func checkGaps(sc *scenario, enabled map[string]bool) error {
	recs, err := records(sc, enabled, -1)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.prev == nil {
			continue
		}
		e := &gapError{scenario: sc.Name, step: r.step, write: r.write, cpu: r.cpu, planned: r.planned}
		if r.plannedLong() {
			if e.gap = r.at[0] - r.prev.at[1]; e.gap <= extendGap+gapMargin {
				return e
			}
		} else if e.gap = r.at[1] - r.prev.at[0]; e.gap >= extendGap-gapMargin {
			return e
		}
	}
	return nil
}
