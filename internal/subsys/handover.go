package subsys

import (
	"slices"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// # Hand-over
//
// A File's records may be read by a session's own reader instead of the
// server that delivers them (the daemon hands a producer's ring set to
// `uetrace record`: internal/handover), as long as delivering them there
// is exactly what File.write would do: the session is the only consumer
// of every event of the file that has one — no trace buffer, no other
// session, no filter of its own on them — and it delivers into streams.
// HandTo checks that and returns what the reader needs to do File.write's
// work itself: each write index's sample id and format. The subsystem
// then keeps it true: before anything that would change where a record of
// the file goes — an event of it enabled in the trace buffer, a session
// attached to or detached from one, a session's filter set on one, an
// event added to the file — it calls the hand-over's back, under its lock,
// and the hand-over ends. back must not block: the daemon ends the
// reader's ownership of the rings with a compare-and-swap and queues them
// back to its drainers.

// HandedEvent is a write index of a handed File.
type HandedEvent struct {
	// SampleID is the session's sample id of the event (wire.SampleID of
	// its type), or 0 when nothing consumes the event: its records are
	// delivered to no one and counted disabled, as File.write's EBADF.
	SampleID uint64
	Def      *eventdef.Event

	ev *Event
}

// Count adds records the reader of a handed set counted to the event's
// counts (FileCounts): written of them written to it, dropped of those
// dropped — what File.write and File.WriteLost would have counted of the
// same records. The counts are the reader's claims; they saturate.
func (e HandedEvent) Count(written, dropped uint64) {
	if e.ev == nil {
		return
	}
	// One shard: the reader's counts come in batches, not per record.
	sh := e.ev.shard(0)
	satAddAtomic(&sh.written, written)
	satAddAtomic(&sh.dropped, dropped)
}

// HandOver is what a session's reader needs to deliver a handed File's
// records as File.write would.
type HandOver struct {
	Events []HandedEvent // by write index
	Comm   bool          // the session names writers (SessionOptions.Comm)
}

// handing is a hand-over of a File's records — of one process's ring set,
// where several write through the File (after a fork) — to a session's
// reader.
type handing struct {
	ss   *Session
	key  any
	back func()
}

// HandTo hands f's records to ss's reader if ss is the only consumer of
// every event of f that has any, and of at least one, unfiltered, and
// delivers into streams: see Hand-over. back is called, under the
// subsystem's lock, when that stops being true; it must not block. key
// names the hand-over for HandBack. A File may be handed more than once
// — a hand-over of each process that writes through it, the processes a
// program forked sharing its open file — each to that one session, and
// each key once.
func (f *File) HandTo(ss *Session, key any, back func()) (HandOver, bool) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	if ss.closed || ss.streams.Load() == nil {
		return HandOver{}, false
	}
	for _, h := range f.handed {
		// (Another session cannot pass the checks below while ss is
		// the only consumer: said here, not left to them.)
		if h.ss != ss || h.key == key {
			return HandOver{}, false
		}
	}
	p := f.events.Load()
	if p == nil {
		return HandOver{}, false
	}
	ho := HandOver{Events: make([]HandedEvent, len(*p)), Comm: ss.comms != nil}
	mine := false
	for i, ev := range *p {
		ho.Events[i].Def = ev.def
		ho.Events[i].ev = ev
		if ev.ftrace.Load() {
			return HandOver{}, false
		}
		sp := ev.sessions.Load()
		if sp == nil {
			continue
		}
		if len(*sp) != 1 || (*sp)[0] != ss || !ss.unfiltered(ev) {
			return HandOver{}, false
		}
		ho.Events[i].SampleID = wire.SampleID(ev.id)
		mine = true
	}
	if !mine {
		return HandOver{}, false
	}
	f.handed = append(f.handed, handing{ss: ss, key: key, back: back})
	if s.handed == nil {
		s.handed = map[*File]struct{}{}
	}
	s.handed[f] = struct{}{}
	return ho, true
}

// HandBack ends f's hand-over key, if it is still on, without calling its
// back: the caller takes the records back itself.
func (f *File) HandBack(key any) {
	s := f.s
	s.mu.Lock()
	defer s.unlock()
	for i, h := range f.handed {
		if h.key == key {
			f.handed = append(f.handed[:i], f.handed[i+1:]...)
			clear(f.handed[len(f.handed):cap(f.handed)]) // the back's closure
			break
		}
	}
	if len(f.handed) == 0 {
		s.endHandOvers(f)
	}
}

// Handed reports how many hand-overs of f are on now.
func (f *File) Handed() int {
	f.s.mu.Lock()
	defer f.s.unlock()
	return len(f.handed)
}

// endHandOvers ends f's hand-overs. Called with s.mu held.
func (s *Subsystem) endHandOvers(f *File) {
	clear(f.handed)
	f.handed = f.handed[:0]
	delete(s.handed, f)
}

// changing is called, with s.mu held, before where ev's records go
// changes: the hand-over of every File that has ev ends, its back called.
func (s *Subsystem) changing(ev *Event) {
	for f := range s.handed {
		p := f.events.Load()
		if p == nil {
			continue
		}
		for _, e := range *p {
			if e == ev {
				s.handBackLocked(f)
				break
			}
		}
	}
}

// handBackLocked ends f's hand-overs and calls their backs. Called with
// s.mu held.
func (s *Subsystem) handBackLocked(f *File) {
	if len(f.handed) == 0 {
		return
	}
	hs := slices.Clone(f.handed)
	s.endHandOvers(f)
	for _, h := range hs {
		h.back()
	}
}
