package wire

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// OpSessionHandOver asks for a producer's ring set to read in place (issue
// 31's hand-over; internal/handover). Arg: session handle, a session that
// delivers into streams; no body. When the session is the only consumer
// of every event a producer connection registered (no trace buffer, no
// other session, no filter), the daemon's drainers let go of that
// connection's ring set and the daemon hands it to the session's reader,
// which reads its records where they lie, checks them and lays them out as
// the daemon would have in the session's streams. The daemon takes the set
// back, without waiting for the reader, when that stops being true, through
// the control memfd's ownership words (internal/handover). Reply: Result 0
// — nothing to hand over now: ask again later — or 1, followed by a
// HandOver (AppendHandOver) and SCM_RIGHTS with three descriptors: the ring
// set's memfd, the control memfd and the set's wake eventfd. A daemon
// before hand-overs answers EPROTO; so does one that will not hand over to
// this reader (it runs in another pid namespace, whose /proc shows other
// threads).
const OpSessionHandOver = OpSessionStreams + 1

// HandOver is a ring set handed to a session's reader.
type HandOver struct {
	ID    uint64 // the daemon's name of the hand-over, for its log
	Rings int    // R: the set's rings
	PID   int32  // the producer's process, as the daemon sees it
	Comm  string // its name, for PERF_RECORD_COMM
	// LossAge and LossClaimed are the ring set's loss budget so far
	// (ringcheck.LossBudget): nanoseconds since it was shared, and what
	// its loss records claimed, as cut.
	LossAge, LossClaimed uint64
	// SessionComm says the session names writers (PERF_RECORD_COMM).
	SessionComm bool
	// Events are the connection's write indices, in order.
	Events []HandOverEvent
}

// HandOverEvent is a write index of a handed set.
type HandOverEvent struct {
	// SampleID is the session's sample id of the event, or 0 when nothing
	// consumes it: its records are counted disabled.
	SampleID uint64
	// Command is the event's definition (eventdef.Event.String), which
	// the reader parses to check records as the daemon does.
	Command string
}

// handOverHead is a HandOver's fixed part: id, rings, pid, loss age and
// claimed, flags, the comm's length.
const handOverHead = 8 + 4 + 4 + 8 + 8 + 4 + 2

// handOverMessage is the size of the Result message that carries h.
func handOverMessage(h *HandOver) int {
	n := HeaderSize + 8 + handOverHead + len(h.Comm) + 4
	for _, e := range h.Events {
		n += 8 + 2 + len(e.Command)
	}
	return n
}

// HandOverFits reports whether h fits a message: a set whose table does
// not is not handed over.
func HandOverFits(h *HandOver) bool {
	return handOverMessage(h) <= MaxMessage && len(h.Comm) <= 0xffff
}

// AppendHandOver appends h's body to b. It fails, appending nothing, when
// h does not fit a message (HandOverFits).
func AppendHandOver(b []byte, h *HandOver) ([]byte, error) {
	if !HandOverFits(h) {
		return b, fmt.Errorf("hand-over: %d events need a message of %d bytes, over %d: %w", len(h.Events), handOverMessage(h), MaxMessage, unix.EMSGSIZE)
	}
	b = LE.AppendUint64(b, h.ID)
	b = LE.AppendUint32(b, uint32(h.Rings))
	b = LE.AppendUint32(b, uint32(h.PID))
	b = LE.AppendUint64(b, h.LossAge)
	b = LE.AppendUint64(b, h.LossClaimed)
	var flags uint32
	if h.SessionComm {
		flags |= 1
	}
	b = LE.AppendUint32(b, flags)
	b = LE.AppendUint16(b, uint16(len(h.Comm)))
	b = append(b, h.Comm...)
	b = LE.AppendUint32(b, uint32(len(h.Events)))
	for _, e := range h.Events {
		b = LE.AppendUint64(b, e.SampleID)
		b = LE.AppendUint16(b, uint16(len(e.Command)))
		b = append(b, e.Command...)
	}
	return b, nil
}

// ParseHandOver reads a HandOver body. Anything that does not add up —
// short, a length past the end, bytes left over, rings or events that
// could not be — is EPROTO.
func ParseHandOver(b []byte) (*HandOver, error) {
	bad := func(what string) (*HandOver, error) {
		return nil, fmt.Errorf("hand-over: %s: %w", what, unix.EPROTO)
	}
	if len(b) < handOverHead {
		return bad(fmt.Sprintf("%d bytes, not even the fixed part's %d", len(b), handOverHead))
	}
	h := &HandOver{
		ID: LE.Uint64(b), Rings: int(LE.Uint32(b[8:])), PID: int32(LE.Uint32(b[12:])),
		LossAge: LE.Uint64(b[16:]), LossClaimed: LE.Uint64(b[24:]),
	}
	flags := LE.Uint32(b[32:])
	h.SessionComm = flags&1 != 0
	if flags&^1 != 0 || h.Rings <= 0 || h.Rings > 1024 || h.PID <= 0 {
		return bad(fmt.Sprintf("flags %#x, %d rings, pid %d", flags, h.Rings, h.PID))
	}
	n := int(LE.Uint16(b[36:]))
	b = b[handOverHead:]
	if len(b) < n+4 {
		return bad("the name runs past the end")
	}
	h.Comm = string(b[:n])
	count := LE.Uint32(b[n:])
	b = b[n+4:]
	// Each event takes at least 10 bytes: a count the body cannot hold
	// allocates nothing.
	if uint64(count)*10 > uint64(len(b)) {
		return bad(fmt.Sprintf("%d events in %d bytes", count, len(b)))
	}
	h.Events = make([]HandOverEvent, count)
	for i := range h.Events {
		if len(b) < 10 {
			return bad(fmt.Sprintf("event %d runs past the end", i))
		}
		h.Events[i].SampleID = LE.Uint64(b)
		m := int(LE.Uint16(b[8:]))
		b = b[10:]
		if len(b) < m {
			return bad(fmt.Sprintf("event %d's command runs past the end", i))
		}
		h.Events[i].Command = string(b[:m])
		b = b[m:]
	}
	if len(b) != 0 {
		return bad(fmt.Sprintf("%d bytes left over", len(b)))
	}
	return h, nil
}
