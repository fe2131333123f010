package export

import (
	"context"
	"io"

	"github.com/uetrace/uetrace/perfdata"
)

// FileStats are what File read.
type FileStats struct {
	Samples uint64 // samples given to the exporter
	Lost    uint64 // records lost while recording (PERF_RECORD_LOST)
	// Unknown are samples of no tracepoint with a format in the file:
	// sent with their record's bytes (linux.raw).
	Unknown uint64
	// NoWallClock says the file has no clock data: times were sent as
	// linux.perf_time, not as the records' times.
	NoWallClock bool
}

// File gives every tracepoint sample of a perf.data file (or pipe-mode
// stream) to e, in time order (a perfdata.Session), until ctx is done.
// Times become wall-clock times by the file's clock data (perf record -k
// CLOCK_MONOTONIC writes it); without it the records carry their perf time
// as linux.perf_time. Processes are named by the file's PERF_RECORD_COMM
// records: by their main thread's name, else by the sample's thread's.
func File(ctx context.Context, r *perfdata.Reader, e *Exporter) (st FileStats, err error) {
	_, hasClock := r.ClockData()
	st.NoWallClock = !hasClock
	sess, err := perfdata.NewSession(r, nil)
	if err != nil {
		return st, err
	}
	defer func() { st.Lost = sess.Stats().Lost }()
	// Samples of no event in the file are sent as this one's.
	unknown, _ := perfdata.NewEvent("unknown", "unknown", nil)
	for ctx.Err() == nil {
		s, err := sess.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		if s.Event == nil || s.Event.Format == nil {
			st.Unknown++
			if s.Event == nil {
				s.Event = unknown
			}
		}
		if err := e.Add(ctx, s); err != nil {
			return st, err
		}
		st.Samples++
	}
	return st, ctx.Err()
}
