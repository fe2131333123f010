package record

// Streams reports whether a daemon recording reads its session's streams.
func (r *Recorder) Streams() bool {
	d, ok := r.src.(*daemonSource)
	return ok && d.streams != nil
}
