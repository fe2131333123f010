package subsys

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys/ftrace"
	"github.com/uetrace/uetrace/internal/subsys/tracefilter"
)

// Writer is who writes a record: what the kernel takes from current.
type Writer struct {
	PID  int32  // the writing thread's id: common_pid, and perf's tid
	TGID int32  // its process id: perf's pid
	Comm string // its command name, as the trace shows it
	CPU  int    // the CPU it runs on
}

// errDisabled is the write path's EBADF: preallocated, because writing to a
// disabled event is routine.
var errDisabled = fmt.Errorf("write: nothing is attached to the event (it is disabled): %w", unix.EBADF)

// Writev is writev(2) on user_events_data: the iovecs together are
// [u32 write_index][payload]. Vectors adding up to 0 bytes return 0 without
// reaching user_events, as the VFS does.
func (f *File) Writev(w Writer, iov ...[]byte) (int, error) {
	total := 0
	for _, v := range iov {
		total += len(v)
	}
	if total == 0 {
		return 0, nil
	}
	return f.writeIov(w, iov, total, 0, false)
}

// Deliver is a write that already happened, its record still in a
// client's ring: the daemon's drainers hand over the
// committed record v of a producer's ring
// (read in place, its header's words loaded once), at time ts, by w — its
// thread and CPU as the daemon checked them. The payload is copied once,
// straight from the ring into the space each consumer that takes the
// record reserved for it — the trace buffer's page, a session's stream —
// and validated there, never in the ring, which the producer may be
// rewriting; then committed, or discarded leaving the consumer's buffer as
// it was (trace_event_buffer_reserve, perf_output_begin). The record
// carries the time it was written at (ts, in the subsystem's clock: the
// daemon's is CLOCK_MONOTONIC, which the clients' rings carry); records
// of one writer reach the consumers with the times given, which need not
// be in order across writers; idx is resolved against this File's events
// only, so a record cannot reach another file's events. A record some
// consumers filter, or that goes to several, is copied once into a scratch
// buffer, validated and filtered there, then copied into each consumer
// that takes it, as the kernel's trace_buffered_event and perf_trace_buf
// do: a record a filter rejects takes no consumer's space. The checks,
// their order and their errors are a write's.
//
// b, when not nil, is the deliverer's Batch: see Batch.
func (f *File) Deliver(w Writer, ts uint64, v *shmring.View, b *Batch) (int, error) {
	return f.write(w, payload{v: v, batch: b}, v.WriteIndex, 4+v.Len, ts, true)
}

// Write is write(2) or pwrite(2) at offset off: a non-zero offset is EFAULT
// (user_events_write checks *ppos), and so is a write of fewer than 4 bytes,
// 0 included.
func (f *File) Write(w Writer, b []byte, off int64) (int, error) {
	if off != 0 {
		return 0, fmt.Errorf("write at offset %d: %w", off, unix.EFAULT)
	}
	iov := [1][]byte{b}
	return f.writeIov(w, iov[:], len(b), 0, false)
}

// scratch holds records being assembled; pooled so that writes do not
// allocate.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// scratchRecord assembles the record of ev by w, size bytes — its header,
// then p's payload, copied once — in a scratch buffer, bp, which the
// caller gives back with putScratch once done with rec.
func scratchRecord(ev *Event, w *Writer, size int, p payload) (rec []byte, bp *[]byte) {
	bp = scratch.Get().(*[]byte)
	rec = *bp
	if cap(rec) < size {
		rec = make([]byte, 0, size)
	}
	rec = rec[:size]
	wire.PutRawHeader(rec, ev.id, w.PID)
	p.copyTo(rec[eventdef.HeaderSize:])
	return rec, bp
}

// putScratch gives back bp, the scratch buffer rec was assembled in.
func putScratch(bp *[]byte, rec []byte) {
	*bp = rec[:0]
	scratch.Put(bp)
}

// payload is where a write's payload is: the bytes of iov after the write
// index (a writev's vectors), or the record v in a client's ring.
type payload struct {
	iov   [][]byte
	v     *shmring.View
	batch *Batch // the deliverer's, or nil
}

// copyTo copies the payload into dst, once.
func (p payload) copyTo(dst []byte) {
	if p.v != nil {
		p.v.CopyPayload(dst)
		return
	}
	gather(dst, p.iov, 4)
}

// writeIov is write for the bytes of iov, [u32 write_index][payload].
func (f *File) writeIov(w Writer, iov [][]byte, total int, ts uint64, stamped bool) (int, error) {
	if total < 4 {
		return 0, fmt.Errorf("write of %d bytes has no 4-byte write index: %w", total, unix.EFAULT)
	}
	var index uint32
	if len(iov) > 0 && len(iov[0]) >= 4 {
		index = binary.NativeEndian.Uint32(iov[0])
	} else {
		var ib [4]byte
		gather(ib[:], iov, 0)
		index = binary.NativeEndian.Uint32(ib[:])
	}
	return f.write(w, payload{iov: iov}, index, total, ts, stamped)
}

// write is user_events_write_core. Its checks, in order: fewer than 4 bytes
// EFAULT; a negative index EINVAL; an index this file does not have ENOENT;
// a payload shorter than the event's fields EINVAL; nothing attached EBADF.
// Then each consumer's probe runs as the kernel's does: it reserves room
// for the record (header and payload) first and validates the record only
// if it got some, so a record no consumer can take — over the trace
// buffer's page (ftraceTakes), over perf's PERF_MAX_TRACE_SIZE (wire.PerfTakes),
// tracing off — is dropped unvalidated and the write succeeds; a record a
// consumer took that fails validation is EFAULT and reaches no consumer.
// Drops for size are counted (the event's dropped count, a session's
// TooLarge). It returns the full length, index included. With stamped, ts
// is the record's time; otherwise the subsystem's clock says.
func (f *File) write(w Writer, p payload, index uint32, total int, ts uint64, stamped bool) (int, error) {
	ev, err := f.check(index, total-4)
	if err != nil {
		return 0, err
	}
	size := eventdef.HeaderSize + total - 4
	toFtrace := ev.ftrace.Load()
	flt := ev.filter.Load()
	ss := ev.sessions.Load()
	ftraceTakes := toFtrace && f.s.trace.takes(size, flt != nil, w.CPU)
	sessionsTake := ss != nil && wire.PerfTakes(size)

	// With the trace buffer the event's only consumer, the record is
	// assembled where it is stored, as the kernel's user_event_ftrace
	// does: reserved in the buffer, validated there, then committed — or
	// discarded, which leaves the buffer as it was. Any other case — a
	// filter (which decides before the record is copied into the buffer,
	// so a record it rejects costs no copy there), sessions, a record that
	// does not fit on the sub-buffer being written — goes through a
	// scratch copy below.
	if ftraceTakes && ss == nil && flt == nil {
		if !stamped {
			ts = f.s.opts.Clock()
			stamped = true
		}
		var res ftrace.Reservation
		if f.s.trace.reserve(&res, &w, ts, size) {
			rec := res.Record
			wire.PutRawHeader(rec, ev.id, w.PID)
			p.copyTo(rec[eventdef.HeaderSize:])
			if err := ev.def.Validate(rec); err != nil {
				res.Discard()
				return 0, fmt.Errorf("write to %s: %w", ev.tp, err)
			}
			ev.shard(w.CPU).written.Add(1)
			commit(&res, ev, &w)
			return total, nil
		}
	}

	if !ftraceTakes && !sessionsTake {
		// No probe reserved the record, so none copied or validated it.
		p.batch.Flush() // a session may count it: its stream's lock
		f.dropUntaken(ev, &w, ts, stamped, size, toFtrace, ss)
		return total, nil
	}

	// Likewise with one session the event's only consumer, unfiltered,
	// delivering into streams: the record is assembled in the sample
	// reserved in the stream of its CPU (perf_output_begin's space),
	// validated there, committed or discarded.
	if sessionsTake && !ftraceTakes && !(toFtrace && f.s.trace.tooLarge(size)) && len(*ss) == 1 {
		if s := (*ss)[0]; s.unfiltered(ev) {
			if r := s.streams.Load(); r != nil {
				if !stamped {
					ts = f.s.opts.Clock()
				}
				if err := s.deliverStreamFrom(r, ev, &w, ts, size, p); err != nil {
					return 0, fmt.Errorf("write to %s: %w", ev.tp, err)
				}
				return total, nil
			}
		}
	}
	// What follows takes the streams' locks itself.
	p.batch.Flush()

	rec, bp := scratchRecord(ev, &w, size, p)
	err = ev.def.Validate(rec)
	if err == nil {
		ev.shard(w.CPU).written.Add(1)
		if !stamped {
			ts = f.s.opts.Clock()
		}
		if ftraceTakes {
			// The event's filter decides before the record is copied
			// into the buffer (filter_match_preds, on the kernel's
			// buffered event); the buffer then drops what its page
			// cannot hold.
			if flt == nil || flt.Match(rec, &tracefilter.Env{CPU: w.CPU, Comm: w.Comm}) {
				if f.s.trace.tooLarge(size) {
					ev.shard(w.CPU).dropped.Add(1)
				} else {
					f.s.trace.write(ev, &w, ts, rec)
				}
			}
		} else if toFtrace && f.s.trace.tooLarge(size) {
			ev.shard(w.CPU).dropped.Add(1)
		}
		for _, s := range sessionsOf(ss) {
			if sessionsTake {
				s.deliver(ev, &w, ts, rec)
			} else {
				s.dropTooLarge(ev, &w, ts)
			}
		}
	}
	putScratch(bp, rec)
	if err != nil {
		return 0, fmt.Errorf("write to %s: %w", ev.tp, err)
	}
	return total, nil
}

// dropUntaken is a write that no consumer reserved room for: the record
// is written as far as the writer knows, and each consumer that dropped it
// for its size counts it — the trace buffer's page (tracing off, which the
// kernel does not count either, is not a drop), a session's
// PERF_MAX_TRACE_SIZE.
func (f *File) dropUntaken(ev *Event, w *Writer, ts uint64, stamped bool, size int, toFtrace bool, ss *[]*Session) {
	sh := ev.shard(w.CPU)
	sh.written.Add(1)
	if toFtrace && f.s.trace.tooLarge(size) {
		sh.dropped.Add(1)
	}
	if ss == nil {
		return
	}
	if !stamped {
		ts = f.s.opts.Clock()
	}
	for _, s := range *ss {
		s.dropTooLarge(ev, w, ts)
	}
}

// WriteHead is a write of total bytes of which the caller hands over only
// the first len(head), the write index among them: what a transport that
// carries fewer bytes than a write holds (the daemon's messages: MaxWrite)
// sends of a longer one. It answers as the whole write would have been
// answered when no consumer can take a record that long, which is all it
// needs the bytes for — the index, the size (of all total bytes) and the
// event's state checked as Write checks them, then the record dropped
// unvalidated and counted, and total returned. A record some consumer
// could take (one no longer than any limit of theirs: a payload of at most
// 8184 bytes) is EMSGSIZE: its bytes are needed.
func (f *File) WriteHead(w Writer, head []byte, total int) (int, error) {
	if len(head) >= total {
		return f.Write(w, head[:total], 0)
	}
	if len(head) < 4 {
		return 0, fmt.Errorf("write of %d bytes: the first %d hold no write index: %w", total, len(head), unix.EINVAL)
	}
	ev, err := f.check(binary.NativeEndian.Uint32(head), total-4)
	if err != nil {
		return 0, err
	}
	size := eventdef.HeaderSize + total - 4
	toFtrace, ss := ev.ftrace.Load(), ev.sessions.Load()
	if toFtrace && f.s.trace.takes(size, ev.filter.Load() != nil, w.CPU) || ss != nil && wire.PerfTakes(size) {
		return 0, fmt.Errorf("write of %d bytes to %s: a consumer takes a record this long, and only %d bytes came: %w", total, ev.tp, len(head), unix.EMSGSIZE)
	}
	f.dropUntaken(ev, &w, 0, false, size, toFtrace, ss)
	return total, nil
}

// sessionsOf is the list ev.sessions points to, none for nil.
func sessionsOf(ss *[]*Session) []*Session {
	if ss == nil {
		return nil
	}
	return *ss
}

// check is the part of user_events_write_core between reading the write
// index and copying the payload: a negative index EINVAL, an index this file
// does not have ENOENT, n payload bytes fewer than the event's fields EINVAL,
// nothing attached EBADF. It returns the event to write to.
func (f *File) check(index uint32, n int) (*Event, error) {
	idx := int32(index)
	if idx < 0 {
		return nil, fmt.Errorf("write index %d is negative: %w", idx, unix.EINVAL)
	}
	p := f.events.Load()
	if p == nil || int(idx) >= len(*p) {
		have := 0
		if p != nil {
			have = len(*p)
		}
		return nil, fmt.Errorf("write index %d: this file has %d events: %w", idx, have, unix.ENOENT)
	}
	ev := (*p)[idx]
	if err := ev.def.CheckSize(n); err != nil {
		return nil, fmt.Errorf("write to %s: %w", ev.tp, err)
	}
	if ev.status.Load() == 0 {
		return nil, errDisabled
	}
	return ev, nil
}

// WriteFaulted is a write(2) of total bytes of which only the first
// len(readable) could be read: the rest of the caller's buffer is unmapped.
// A FUSE server sees exactly this — the kernel sends the pages it could pin
// and nothing past the fault — while Linux's user_events_write reads the
// buffer itself. It answers as Linux does (user_events_write_core): a fault
// within the write index is EFAULT; then the index, the size (of all total
// bytes: the kernel checks the iterator's count before copying) and the
// event's state are checked as for Write, so a disabled event is EBADF; an
// enabled one EFAULT, the record being discarded when its copy faults.
// Nothing is written either way. With all total bytes readable it is Write.
func (f *File) WriteFaulted(w Writer, readable []byte, total int) (int, error) {
	if len(readable) >= total {
		return f.Write(w, readable[:total], 0)
	}
	if total < 4 || len(readable) < 4 {
		return 0, fmt.Errorf("write of %d bytes faulted after %d, within the write index: %w", total, len(readable), unix.EFAULT)
	}
	ev, err := f.check(binary.NativeEndian.Uint32(readable), total-4)
	if err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("write to %s: %d of %d bytes could be read, the rest faulted: %w", ev.tp, len(readable), total, unix.EFAULT)
}

// gather copies into dst the bytes of iov starting at offset off.
func gather(dst []byte, iov [][]byte, off int) {
	for _, v := range iov {
		if off >= len(v) {
			off -= len(v)
			continue
		}
		n := copy(dst, v[off:])
		dst = dst[n:]
		off = 0
		if len(dst) == 0 {
			return
		}
	}
}

// WriteLost counts n records that a writer wrote to the event at write
// index idx and that never reached the subsystem: a process publishing
// into a ring shared with the daemon found it full, and dropped them, as
// the kernel's ring buffer drops a record it has no room for while the
// write still succeeds. ts, w.PID and w.CPU place the loss: the time and
// thread of the record the producer published after it, and its CPU.
//
// The loss reaches whoever would have received the records, as the
// records would have: the event's "written" and "dropped" counts
// (user_events_status of the daemon, uetrace status), the trace buffer's
// "dropped events" and a "CPU:N [LOST n EVENTS]" line before the next
// record on w.CPU (see ftrace.Ring.Drop), and every attached session's
// lost count, which perf.data carries as PERF_RECORD_LOST. An index this
// file does not have is ENOENT and changes nothing: no writer can count
// losses under another file's events. n is the writer's number: every
// count it adds to saturates at the largest uint64 rather than wrap, so
// that no claim can lower what others' losses added (the daemon also
// bounds each claim by what its producer could have dropped).
func (f *File) WriteLost(w Writer, ts uint64, idx uint32, n uint64) error {
	if int32(idx) < 0 {
		return fmt.Errorf("write index %d is negative: %w", int32(idx), unix.EINVAL)
	}
	p := f.events.Load()
	if p == nil || int(idx) >= len(*p) {
		return fmt.Errorf("lost records of write index %d: this file has no such event: %w", idx, unix.ENOENT)
	}
	if n == 0 {
		return nil
	}
	ev := (*p)[idx]
	sh := ev.shard(w.CPU)
	satAddAtomic(&sh.written, n)
	satAddAtomic(&sh.dropped, n)
	if ev.ftrace.Load() {
		f.s.trace.ring.Drop(w.CPU, n)
	}
	if ss := ev.sessions.Load(); ss != nil {
		for _, s := range *ss {
			s.noteLost(ev, ts, int32(w.CPU), n)
		}
	}
	return nil
}
