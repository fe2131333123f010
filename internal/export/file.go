package export

import (
	"context"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefmt"
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
// stream) to e, in file order, until ctx is done. Times become wall-clock
// times by the file's clock data (perf record -k CLOCK_MONOTONIC writes
// it); without it the records carry their perf time as linux.perf_time.
// Processes are named by the file's PERF_RECORD_COMM records.
func File(ctx context.Context, r *perfdata.Reader, e *Exporter) (FileStats, error) {
	var st FileStats
	clock, hasClock := r.ClockData()
	st.NoWallClock = !hasClock
	formats := make(map[uint64][]byte)
	if td := r.TracingData(); td != nil {
		for _, sys := range td.Systems {
			for _, text := range sys.Formats {
				f, err := tracefmt.Parse(text)
				if err != nil {
					return st, fmt.Errorf("tracing data of %s: %w", sys.Name, err)
				}
				formats[uint64(f.ID)] = text
			}
		}
	}
	byID := make(map[uint64]*Event)
	var only *Event // the event of a file with one attr and no ids
	nattrs := 0
	addAttrs := func() error {
		attrs := r.Attrs()
		for i := nattrs; i < len(attrs); i++ {
			a := &attrs[i]
			var format []byte
			if a.Type == unix.PERF_TYPE_TRACEPOINT {
				format = formats[a.Config]
			}
			system, name := fmt.Sprintf("type%d", a.Type), fmt.Sprintf("config%d", a.Config)
			if a.Name != "" {
				// The attr's name is the true one: record writes a
				// multi-format event's "name.<hexid>" as "name_<hexid>" in
				// the tracing data.
				if s, n, ok := strings.Cut(a.Name, ":"); ok {
					system, name = s, n
				} else {
					name = a.Name
				}
			} else if format != nil {
				if f, err := tracefmt.Parse(format); err == nil {
					name = f.Name
				}
			}
			ev, err := NewEvent(system, name, format)
			if err != nil {
				return err
			}
			for _, id := range a.IDs {
				byID[id] = ev
			}
			if len(attrs) == 1 {
				only = ev
			} else {
				only = nil
			}
		}
		nattrs = len(attrs)
		return nil
	}
	if err := addAttrs(); err != nil {
		return st, err
	}
	unknown, _ := NewEvent("unknown", "unknown", nil)
	comms := make(map[uint32]string) // by pid: the main thread's name
	var s Sample
	for ctx.Err() == nil {
		rec, err := r.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		switch rec.Type {
		case perfdata.RecordHeaderAttr:
			if err := addAttrs(); err != nil {
				return st, err
			}
		case perfdata.RecordComm:
			if rec.PID == rec.TID || comms[rec.PID] == "" {
				comms[rec.PID] = string(rec.Comm)
			}
		case perfdata.RecordLost:
			st.Lost += rec.Lost
		case perfdata.RecordSample:
			smp := &rec.Sample
			ev := byID[smp.ID]
			if ev == nil {
				ev = only
			}
			if ev == nil || ev.format == nil {
				st.Unknown++
				if ev == nil {
					ev = unknown
				}
			}
			s = Sample{Event: ev, PID: smp.PID, TID: smp.TID, CPU: smp.CPU, Comm: comms[smp.PID], Raw: smp.Raw}
			if hasClock {
				s.Time = uint64(clock.Wall(smp.Time))
			} else {
				s.PerfTime = smp.Time
			}
			if err := e.Add(ctx, &s); err != nil {
				return st, err
			}
			st.Samples++
		}
	}
	return st, ctx.Err()
}
