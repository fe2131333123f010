package record

// Streams reports whether a daemon recording reads its session's streams.
func (r *Recorder) Streams() bool {
	d, ok := r.src.(*daemonSource)
	return ok && d.streams != nil
}

// StreamWaits are the waits of a daemon recording on a timer and on its
// session's streams so far (streamWait).
func (r *Recorder) StreamWaits() (timer, streams uint64) {
	d, ok := r.src.(*daemonSource)
	if !ok || d.streams == nil {
		return 0, 0
	}
	return d.streams.waits[0].Load(), d.streams.waits[1].Load()
}
