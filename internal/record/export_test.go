package record

// SetNoStreams makes daemon recordings skip the session's streams, as with
// a daemon that predates them: their session ring is used instead, for
// the tests of that path. It returns the function that undoes it.
func SetNoStreams() (undo func()) {
	noStreams = true
	return func() { noStreams = false }
}

// Streams reports whether a daemon recording reads its session's streams.
func (r *Recorder) Streams() bool {
	d, ok := r.src.(*daemonSource)
	return ok && d.streams != nil
}
