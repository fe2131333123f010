package subsys

import (
	"strconv"
)

// AppendStatus appends the text of user_events_status (user_seq_show): one
// line per event in hash-bucket order — its tracepoint name and, while
// anything is attached, " # Used by" with " ftrace", " perf", " other" —
// then a blank line, "Active: N" and "Busy: N" (events with a non-zero
// status).
func (s *Subsystem) AppendStatus(dst []byte) []byte {
	s.mu.Lock()
	defer s.unlock()
	active, busy := 0, 0
	s.eachEvent(func(ev *Event) {
		active++
		dst = append(dst, ev.tp...)
		if st := ev.status.Load(); st != 0 {
			busy++
			dst = append(dst, " # Used by"...)
			if st&StatusFtrace != 0 {
				dst = append(dst, " ftrace"...)
			}
			if st&StatusPerf != 0 {
				dst = append(dst, " perf"...)
			}
			if st&StatusOther != 0 {
				dst = append(dst, " other"...)
			}
		}
		dst = append(dst, '\n')
	})
	dst = append(dst, "\nActive: "...)
	dst = strconv.AppendInt(dst, int64(active), 10)
	dst = append(dst, "\nBusy: "...)
	dst = strconv.AppendInt(dst, int64(busy), 10)
	return append(dst, '\n')
}

// AppendCounts appends the text of FileCounts, a file Linux does not have:
// one line per event, in user_events_status's order, "tracepoint written
// dropped" — the records written to it since it was registered, and those
// of them a perf-like session dropped (its buffer full, or the record over
// perf's size limit), that the trace buffer could not hold (over a page,
// with tracing on: the kernel drops those without validating or counting
// them) or that never reached the subsystem (a writer's ring to the daemon
// full: File.WriteLost). The kernel counts neither per event; uetrace status
// shows them where this file exists. The count hooks run first
// (AddCountHook): the records of handed sets their readers counted are
// added to the events' counts.
func (s *Subsystem) AppendCounts(dst []byte) []byte {
	s.countProcesses()
	s.mu.Lock()
	defer s.unlock()
	s.eachEvent(func(ev *Event) {
		written, dropped := ev.Counts()
		dst = append(dst, ev.tp...)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, written, 10)
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, dropped, 10)
		dst = append(dst, '\n')
	})
	return dst
}
