package perfdata

// A Sample is one sample of an event: the fields of a PERF_RECORD_SAMPLE
// its attr's SampleType selects (those it does not select are zero), as
// the Writer writes it and the Reader reads it, and what a Session
// resolves of it — its event, the names of its task and process, its
// wall-clock time. It is the one sample of uetrace's tools: a live
// recording (uetrace record, top, export) gives its consumers the same.
type Sample struct {
	Misc     uint16 // the record header's misc: the CPU mode (MiscKernel, MiscUser)
	ID       uint64 // SampleIdentifier or SampleID: which attr the sample belongs to
	IP       uint64
	PID, TID uint32
	Time     uint64 // nanoseconds of the attr's clock
	Addr     uint64
	StreamID uint64
	CPU      uint32
	Period   uint64
	// Raw is SampleRaw: for a tracepoint, its record (the 8-byte common
	// header and the payload). The Writer pads it with zeros so that its
	// size word and it end on 8 bytes, as the kernel does; the size word
	// counts the padding, so a Reader returns Raw with it.
	Raw []byte

	// The rest is what a Session (or a live recording) resolves: the
	// Reader leaves it zero and the Writer does not write it.

	// Event is the sample's event, found by its ID; nil when the ID is in
	// no attr.
	Event *Event
	// Wall is Time as a wall-clock time, in ns since 1970, when the clock
	// is known — a file's clock data (HEADER_CLOCK_DATA), a live
	// recording's CLOCK_MONOTONIC — and 0 when it is not.
	Wall uint64
	// Comm is the name the task had when the sample was taken, and
	// ProcessComm that of its process's main thread (tid = pid); "" when
	// not known.
	Comm, ProcessComm string
}
