package subsys

import "github.com/uetrace/uetrace/internal/daemon/wire"

// lostNote is a run of records lost, waiting to be told in a stream
// (a PERF_RECORD_LOST before the stream's next record that fits).
type lostNote struct {
	ev    *Event
	ts    uint64
	cpu   int32
	n     uint64
	flags uint32 // lostTooLarge or 0
}

// noteLost counts n records lost for the session: of event ev (nil: not
// known), the first of them at time ts on CPU cpu. It is the one place a
// session learns of a loss — its buffer or stream full, a record too large
// for perf, or records that never reached it — and the reader learns of it
// where it happened: with streams, as a PERF_RECORD_LOST in the stream of
// cpu before its next record that fits (or from TakeLost); with the
// buffer, in Lost. The event's own drop count (Event.Counts) is the
// caller's to keep.
func (ss *Session) noteLost(ev *Event, ts uint64, cpu int32, n uint64) {
	ss.noteLostFlags(ev, ts, cpu, n, 0)
}

func (ss *Session) noteLostFlags(ev *Event, ts uint64, cpu int32, n uint64, flags uint32) {
	if n == 0 {
		return
	}
	if r := ss.streams.Load(); r != nil {
		ss.noteLostStreams(r, ev, ts, cpu, n, flags)
		return
	}
	ss.countLost(n, flags)
}

// addLostNote adds the run l to notes: into the last run when it is of the
// same event and kind, else as a new run while there are fewer than
// wire.MaxLostNotes, else into the last run of its kind — the counts stay
// exact, the event and time are that run's.
func addLostNote(notes []lostNote, l lostNote) []lostNote {
	k := len(notes)
	switch {
	case k > 0 && notes[k-1].ev == l.ev && notes[k-1].flags == l.flags:
		notes[k-1].n = satAdd(notes[k-1].n, l.n)
		return notes
	case k >= wire.MaxLostNotes:
		// Into the last run of the same kind, or a new one if there is
		// none yet (there are two kinds).
		for i := k - 1; i >= 0; i-- {
			if notes[i].flags == l.flags {
				notes[i].n = satAdd(notes[i].n, l.n)
				return notes
			}
		}
	}
	return append(notes, l)
}

// TakeLost writes what the session has lost and not yet told its streams'
// reader into the streams if it fits, and returns — and forgets — what
// does not: the reader counts that itself. The daemon calls it when the
// reader asks to be brought up to date (wire.OpSessionSync). A session
// without streams has nothing to tell: its Lost says it all.
func (ss *Session) TakeLost() (n, tooLarge uint64) {
	if st := ss.streams.Load(); st != nil {
		return st.takeLost()
	}
	return 0, 0
}

// lostTooLarge flags a lost run of records too large for perf's raw
// sample limit (PERF_MAX_TRACE_SIZE): Session.TooLarge counts them apart.
const lostTooLarge = 1
