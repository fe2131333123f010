package subsys

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
