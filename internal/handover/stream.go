package handover

import (
	"slices"

	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// A Stream is a reader's output of one ring index: the finished perf.data
// records its passes over ring k of the sets it reads committed (Bytes),
// and what a session's stream k keeps to write them as the daemon would
// (subsys's sessionStreams): the names its reader has been given, and the
// runs of records lost not yet told. It is one goroutine's, shared by the
// passes of every set that goroutine reads.
type Stream struct {
	buf []byte
	// comm says the session names writers (PERF_RECORD_COMM);
	// comms are the names the reader has of the threads whose samples
	// the stream carried (at most wire.MaxComms), the last sample's
	// thread and name checked first.
	comm     bool
	comms    map[int32]string
	lastTID  int32
	lastComm string
	haveLast bool
	// lost are the runs of records lost not yet told, oldest first: at
	// most wire.MaxLostNotes, and one of the other kind.
	lost []wire.LostRun

	// tooLarge counts the records perf cannot take (wire.PerfTakes) that
	// the passes noted as lost runs: the session's too-large count, which
	// the daemon keeps for the records its drainers deliver.
	tooLarge uint64

	// The pass in progress, to discard it: the output's length, the
	// lost runs and the too-large count before it.
	mark      int
	saved     [wire.MaxLostNotes + 1]wire.LostRun
	nsave     int
	markLarge uint64
}

// NewStream is an empty output; comm says the session names writers
// (wire.HandOver.SessionComm): PERF_RECORD_COMM before each thread's first
// sample.
func NewStream(comm bool) *Stream {
	o := &Stream{comm: comm}
	if comm {
		o.comms = make(map[int32]string)
	}
	return o
}

// Bytes are the records committed and not yet taken (Reset).
func (o *Stream) Bytes() []byte { return o.buf }

// Reset forgets the records committed, once the caller wrote them out;
// the buffer is kept for the next.
func (o *Stream) Reset() { o.buf = o.buf[:0] }

// Swap returns the records committed and makes empty the stream's buffer
// from then on: a caller that writes the records out while passes go on
// into the stream gives back the buffer it had from the swap before. Not
// during a pass.
func (o *Stream) Swap(empty []byte) []byte {
	b := o.buf
	o.buf = empty[:0]
	return b
}

// FlushLost writes the runs of records lost not yet told as
// PERF_RECORD_LOST records now, rather than before the next sample: what
// a session's stream does when its reader asks to be brought up to date
// (subsys.Session.TakeLost), before it ends a round or the recording.
// Not during a pass.
func (o *Stream) FlushLost() { o.flushLost() }

// reserve appends n bytes to the output and returns them, for the caller
// to fill whole.
func (o *Stream) reserve(n int) []byte {
	l := len(o.buf)
	o.buf = slices.Grow(o.buf, n)[:l+n]
	return o.buf[l:]
}

// note adds the run l to the lost runs: wire.AddLostRun, the session
// stream's rule, so that the same bytes come out.
func (o *Stream) note(l wire.LostRun) { o.lost = wire.AddLostRun(o.lost, l) }

// flushLost writes the lost runs as PERF_RECORD_LOST records (subsys's
// streamRing.flushLost: no thread, the run's first time and CPU).
func (o *Stream) flushLost() {
	for _, l := range o.lost {
		wire.PutLost(o.reserve(wire.LostSize), l.ID, l.N, 0, 0, l.Time, uint32(l.CPU))
	}
	clear(o.lost)
	o.lost = o.lost[:0]
}

// name writes a PERF_RECORD_COMM before a sample of thread tid of process
// pid named comm, of the event with sample id id at time on cpu, when the
// stream's reader does not have that name (subsys's sessionStreams.reserve):
// a thread's first sample in the stream, or its name changed. The names
// are bounded, whatever thread ids a producer makes up: forgetting costs
// only names sent again.
func (o *Stream) name(pid, tid int32, comm string, id, time uint64, cpu int) {
	if o.haveLast && o.lastTID == tid && o.lastComm == comm {
		return
	}
	if have, ok := o.comms[tid]; !ok || have != comm {
		wire.PutComm(o.reserve(wire.CommSize(comm)), uint32(pid), uint32(tid), comm, id, time, uint32(cpu))
		if !ok && len(o.comms) >= wire.MaxComms {
			clear(o.comms)
		}
		o.comms[tid] = comm
	}
	o.lastTID, o.lastComm, o.haveLast = tid, comm, true
}

// begin marks the start of a pass, which discard undoes.
func (o *Stream) begin() {
	o.mark = len(o.buf)
	o.nsave = copy(o.saved[:], o.lost)
	o.markLarge = o.tooLarge
}

// TooLarge is how many records the passes into o dropped as too large for
// perf's samples (told in PERF_RECORD_LOST records, as the drainers tell
// them); a pass discarded does not count.
func (o *Stream) TooLarge() uint64 { return o.tooLarge }

// discard undoes the pass since begin: its records are cut off, the lost
// runs are those before it (it may have told some, and noted others), and
// the names are forgotten — rolling them back would cost a copy a pass,
// and a name given again is harmless.
func (o *Stream) discard() {
	o.buf = o.buf[:o.mark]
	o.tooLarge = o.markLarge
	clear(o.lost)
	o.lost = append(o.lost[:0], o.saved[:o.nsave]...)
	clear(o.comms)
	o.haveLast = false
}
