package subsys

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys/tracefilter"
)

// Record is one sample a Session received: what perf_event_open gives for a
// tracepoint with PERF_SAMPLE_RAW|TIME|TID|CPU|IDENTIFIER.
type Record struct {
	TS    uint64 // trace clock, ns
	PID   int32  // process id (perf's pid)
	TID   int32  // thread id (perf's tid; also common_pid in Raw)
	CPU   int32
	Event *Event // the event; its ID may since have been reused if it was deleted
	ID    int    // the event's type ID when the record was written
	// Raw is the record as perf's raw data carries it: the 8-byte common
	// header, the payload, and zeros up to perf's 8-byte alignment of the
	// raw size field and data (so len(Raw)%8 == 4). It aliases the buffer
	// passed to Read.
	//
	// A task's name (SessionOptions.Comm) is a record with no Event and
	// ID 0 whose Raw is the name, NUL-terminated and NUL-padded the same
	// way.
	Raw []byte
}

// Comm returns the task name a record of SessionOptions.Comm carries.
func (r *Record) Comm() (string, bool) {
	if r.Event != nil || r.ID != 0 {
		return "", false
	}
	name := r.Raw
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	return string(name), true
}

// SessionOptions configure a Session.
type SessionOptions struct {
	// BufferBytes bounds the records waiting to be read (0: 1 MiB). When it
	// is full new records are dropped and counted, as a full perf ring does.
	// As in perf's ring, where each sample's header and fields take their
	// share, a record takes its raw data and pendingCost bytes of it: the
	// session holds at most 2·BufferBytes of memory, however small the
	// records a writer sends.
	BufferBytes int
	// Other makes the session count as an "other" consumer (status bit
	// StatusOther) instead of perf.
	Other bool
	// Comm asks for the writers' names, which perf gets from attr.comm's
	// COMM records and the names perf record reads at its start: before a
	// thread's first record, and again when its name changes, the session
	// receives a record of its name (Record.Comm), with the time of the
	// record that follows. The name is the writer's Writer.Comm.
	Comm bool
	// Synchronous says the session's reader takes records from memory
	// without a call the subsystem's server sees (a perf ring that the
	// program reading it maps): a record must be the session's when its
	// write returns, as the kernel's are. Writers that hand the server
	// their records later — the interposer's rings — write its events
	// synchronously while it is attached (WatchSync).
	Synchronous bool
}

// Session is a perf-like consumer: attached to some events, it receives
// their records through a bounded buffer that counts what it had to drop.
// The first session attached to an event is the kernel's
// TRACE_REG_PERF_REGISTER (the event becomes enabled, its bits are set),
// the last one to leave is PERF_UNREGISTER.
type Session struct {
	s    *Subsystem
	kind uint32
	sync bool // SessionOptions.Synchronous

	// Under s.mu.
	attached map[*Event]struct{}
	follow   []string
	closed   bool

	mu       sync.Mutex
	bufBytes int               // the buffer's size, mapped at the first record (a session with streams has none)
	mem      *sessionMem       // the mapping ring and queue are in; nil before the first record and once freed
	shut     bool              // Close was called: nothing more is buffered, and the mapping goes once read
	ring     []byte            // raw bytes of buffered records, circular
	head     int               // where the oldest record's raw bytes start
	used     int               // raw bytes in use; with pendingCost a record, what counts against bufBytes
	queue    []pending         // metadata of buffered records, circular
	evs      []*Event          // pending.ev indexes it; evs[0] is nil (a task's name)
	evIdx    map[*Event]uint32 // each event's index in evs
	qhead    int
	qlen     int
	lost     uint64
	tooLarge uint64
	comms    map[int32]string // the name last given of each thread, up to wire.MaxComms; nil without Comm
	notify   chan struct{}
	done     chan struct{}

	// With streams (DeliverToStreams), records go there instead; see
	// session_stream.go. With a DeliverFunc (DeliverTo), to it.
	streams atomic.Pointer[sessionStreams]
	fn      atomic.Pointer[DeliverFunc] // DeliverTo's

	// filters are the session's filters by event (SetFilter), replaced
	// whole under s.mu and read by the write path without a lock.
	filters atomic.Pointer[map[*Event]*tracefilter.Filter]
}

// pending is a buffered record's metadata; its raw bytes are in the ring.
// It holds no pointer: it lives in memory the collector does not scan.
type pending struct {
	ts       uint64
	pid, tid int32
	cpu      int32
	id       int32  // a type ID (≤ 65535)
	n        int32  // ≤ wire.MaxPerfRecord+4 (the raw data of an 8192-byte record)
	ev       uint32 // index into Session.evs
}

// pendingCost is what a buffered record's metadata takes of the session's
// BufferBytes besides its raw data — perf's ring, likewise, holds each
// sample's header, time, ids and CPU with its raw data. Without it the
// queue of metadata was bounded only by how many records the raw bytes
// could hold: 3.5 times the buffer for the smallest records, grown by
// doubling, outside every limit.
const pendingCost = int(unsafe.Sizeof(pending{}))

// sessionMem is a session's buffer: ring and queue in one anonymous
// mapping, as the kernel's perf buffer is memory of its own, given back to
// the system when the session is closed and read — not garbage for the Go
// heap to grow by and keep its busiest size (a daemon's clients make and
// close sessions in bursts). Its pages are the system's until written:
// the queue is mapped whole, at its largest.
type sessionMem struct{ b []byte }

// mapBuffer maps the session's buffer. Called with ss.mu held.
func (ss *Session) mapBuffer() error {
	entries := ss.bufBytes / pendingCost // fits bounds qlen by this
	b, err := unix.Mmap(-1, 0, ss.bufBytes+entries*pendingCost, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	ss.mem = &sessionMem{b: b}
	ss.ring = b[:ss.bufBytes:ss.bufBytes]
	if entries > 0 {
		ss.queue = unsafe.Slice((*pending)(unsafe.Pointer(&b[ss.bufBytes])), entries)
	}
	ss.evs, ss.evIdx = []*Event{nil}, map[*Event]uint32{}
	// A closed session nobody read to the end is unmapped when the
	// collector finds it unreachable.
	runtime.AddCleanup(ss, (*sessionMem).unmap, ss.mem)
	return nil
}

// unmap gives the mapping back; once only.
func (m *sessionMem) unmap() {
	if m.b != nil {
		unix.Munmap(m.b)
		m.b = nil
	}
}

// freeBuffer unmaps the buffer of a closed session read to its end.
// Called with ss.mu held.
func (ss *Session) freeBuffer() {
	if ss.mem == nil {
		return
	}
	ss.mem.unmap()
	ss.mem, ss.ring, ss.queue = nil, nil, nil
	ss.head, ss.used, ss.qhead, ss.qlen = 0, 0, 0, 0
	ss.evs, ss.evIdx = nil, nil
}

// evIndex is ev's index in ss.evs, added if new. Called with ss.mu held.
func (ss *Session) evIndex(ev *Event) uint32 {
	i, ok := ss.evIdx[ev]
	if !ok {
		i = uint32(len(ss.evs))
		ss.evs = append(ss.evs, ev)
		ss.evIdx[ev] = i
	}
	return i
}

// fits reports whether records of n raw bytes in all, k of them, fit the
// buffer with those queued. Called with ss.mu held.
func (ss *Session) fits(n, k int) bool {
	return ss.used+(ss.qlen+k)*pendingCost+n <= len(ss.ring)
}

// NewSession returns a session attached to nothing.
func (s *Subsystem) NewSession(opts SessionOptions) *Session {
	if opts.BufferBytes <= 0 {
		opts.BufferBytes = 1 << 20
	}
	ss := &Session{
		s:        s,
		kind:     StatusPerf,
		attached: make(map[*Event]struct{}),
		bufBytes: opts.BufferBytes,
		notify:   make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if opts.Other {
		ss.kind = StatusOther
	}
	ss.sync = opts.Synchronous
	if opts.Comm {
		ss.comms = make(map[int32]string)
	}
	return ss
}

// Attach attaches the session to ev.
func (ss *Session) Attach(ev *Event) error {
	s := ss.s
	s.syncProcesses(eventScope(ev))
	s.mu.Lock()
	defer s.unlock()
	return ss.attachLocked(ev)
}

func (ss *Session) attachLocked(ev *Event) error {
	if ss.closed {
		return fmt.Errorf("session is closed: %w", unix.EBADF)
	}
	if ev.deleted {
		return fmt.Errorf("event %s was deleted: %w", ev.tp, unix.ENOENT)
	}
	if _, ok := ss.attached[ev]; ok {
		return nil
	}
	ss.attached[ev] = struct{}{}
	if ss.sync {
		ev.syncUsers++
	}
	ev.s.addConsumer(ev, ss.kind, +1)
	ev.addSession(ss)
	if ss.sync && ev.syncUsers == 1 {
		ev.notifyWatches(ev.watchStatus())
	}
	return nil
}

// Detach detaches the session from ev.
func (ss *Session) Detach(ev *Event) {
	s := ss.s
	s.syncProcesses(eventScope(ev))
	s.mu.Lock()
	defer s.unlock()
	ss.detachLocked(ev)
}

func (ss *Session) detachLocked(ev *Event) {
	if _, ok := ss.attached[ev]; !ok {
		return
	}
	delete(ss.attached, ev)
	ss.dropFilterLocked(ev)
	ev.removeSession(ss)
	if ss.sync {
		ev.syncUsers--
	}
	ev.s.addConsumer(ev, ss.kind, -1)
	if ss.sync && ev.syncUsers == 0 {
		ev.notifyWatches(ev.watchStatus())
	}
}

// MatchEvent reports whether pattern selects ev. A pattern is a glob
// (path.Match) over "system:tracepoint", or over the tracepoint alone when
// it has no ':'; a multi-format event also answers to its registered name,
// so "name" selects every "name.<hexid>" version.
func MatchEvent(pattern string, ev *Event) bool {
	sys, name, hasSys := strings.Cut(pattern, ":")
	if !hasSys {
		name, sys = pattern, "*"
	}
	if ok, _ := path.Match(sys, ev.System()); !ok {
		return false
	}
	if ok, _ := path.Match(name, ev.tp); ok {
		return true
	}
	ok, _ := path.Match(name, ev.def.Name)
	return ok && ev.multi
}

// AttachMatching attaches the session to every existing event the pattern
// selects (see MatchEvent) and returns them. With follow set, events created
// later that the pattern selects are attached when they are created — which
// perf cannot do on a real kernel.
func (ss *Session) AttachMatching(pattern string, follow bool) ([]*Event, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("event pattern %q: %v: %w", pattern, err, unix.EINVAL)
	}
	ss.s.syncProcesses(patternScope(pattern))
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	if ss.closed {
		return nil, fmt.Errorf("session is closed: %w", unix.EBADF)
	}
	var got []*Event
	for _, ev := range s.created {
		if MatchEvent(pattern, ev) {
			if err := ss.attachLocked(ev); err != nil {
				return got, err
			}
			got = append(got, ev)
		}
	}
	if follow {
		ss.follow = append(ss.follow, pattern)
		if !containsSession(s.sessions, ss) {
			s.sessions = append(s.sessions, ss)
		}
	}
	return got, nil
}

func containsSession(list []*Session, ss *Session) bool {
	for _, x := range list {
		if x == ss {
			return true
		}
	}
	return false
}

// followNew attaches a new event to the sessions that follow a pattern it
// matches. Called with s.mu held.
func (s *Subsystem) followNew(ev *Event) {
	for _, ss := range s.sessions {
		for _, p := range ss.follow {
			if MatchEvent(p, ev) {
				_ = ss.attachLocked(ev)
				break
			}
		}
	}
}

// Events returns the events the session is attached to.
func (ss *Session) Events() []*Event {
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	out := make([]*Event, 0, len(ss.attached))
	for ev := range ss.attached {
		out = append(out, ev)
	}
	return out
}

// Close detaches the session from everything and wakes its readers.
func (ss *Session) Close() error {
	s := ss.s
	s.syncProcesses(sessionScope(ss))
	s.mu.Lock()
	if !ss.closed {
		ss.closed = true
		for ev := range ss.attached {
			ss.detachLocked(ev)
		}
		s.sessions = removeSession(s.sessions, ss)
		close(ss.done)
	}
	s.unlock()
	// What is buffered can still be read; the buffer goes once it has
	// been, or now if nothing is.
	ss.mu.Lock()
	ss.shut = true
	if ss.qlen == 0 {
		ss.freeBuffer()
	}
	ss.mu.Unlock()
	return nil
}

// removeSession removes ss from list in place. The vacated slot is
// cleared (slices.Delete): the collector scans a slice's whole array, so a
// pointer left past its length would keep a closed session — its buffer,
// its streams' mappings — alive until another took the slot.
func removeSession(list []*Session, ss *Session) []*Session {
	if i := slices.Index(list, ss); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// Lost is the number of records dropped because the buffer was full.
func (ss *Session) Lost() uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.lost
}

// TooLarge is the number of records dropped because they exceeded perf's
// raw sample limit (PERF_MAX_TRACE_SIZE).
func (ss *Session) TooLarge() uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.tooLarge
}

// dropTooLarge counts a record of ev that user_event_perf could not
// allocate (wire.PerfTakes is false): dropped unvalidated and unfiltered, as
// the kernel drops it before either.
func (ss *Session) dropTooLarge(ev *Event, w *Writer, ts uint64) {
	ev.shard(w.CPU).dropped.Add(1)
	if ss.fn.Load() != nil {
		return // the kernel's perf event counts nothing of it either
	}
	if ss.streams.Load() != nil {
		ss.noteLostFlags(ev, ts, int32(w.CPU), 1, lostTooLarge)
		return
	}
	ss.mu.Lock()
	ss.tooLarge++
	ss.mu.Unlock()
}

// deliver stores one record (user_event_perf) that wire.PerfTakes. It never
// blocks a writer: when the buffer is full the record is dropped and
// counted.
func (ss *Session) deliver(ev *Event, w *Writer, ts uint64, rec []byte) {
	// The session's filter decides before anything is copied
	// (perf_tp_event_match → perf_tp_filter_match).
	if m := ss.filters.Load(); m != nil {
		if flt := (*m)[ev]; flt != nil && !flt.Match(rec, &tracefilter.Env{CPU: w.CPU, Comm: w.Comm}) {
			return
		}
	}
	if r := ss.streams.Load(); r != nil {
		ss.deliverStream(r, ev, w, ts, rec)
		return
	}
	if fn := ss.fn.Load(); fn != nil {
		(*fn)(ev, *w, ts, rec)
		return
	}
	// The raw data perf hands out — its u32 size and the record, 8-byte
	// aligned — includes the zero padding, so Raw does.
	size := (len(rec)+4+7)&^7 - 4
	ss.mu.Lock()
	if ss.shut {
		// Closed while the write path still had it in its copy of the
		// event's sessions: the record is not its any more.
		ss.mu.Unlock()
		return
	}
	if ss.mem == nil {
		if err := ss.mapBuffer(); err != nil {
			ss.mu.Unlock()
			ev.shard(w.CPU).dropped.Add(1)
			ss.noteLost(ev, ts, int32(w.CPU), 1) // no memory for it, as perf_output_begin without a buffer
			return
		}
	}
	if ss.comms != nil {
		if name, ok := ss.comms[w.PID]; !ok || name != w.Comm {
			// perf's comm record: the name and a NUL, 8-byte padded.
			var b [32]byte
			comm := append(append(b[:0], w.Comm...), 0)
			csize := (len(comm)+4+7)&^7 - 4
			if !ss.fits(csize+size, 2) {
				ss.mu.Unlock()
				ev.shard(w.CPU).dropped.Add(1)
				ss.noteLost(ev, ts, int32(w.CPU), 1) // the name waits for a record that fits
				return
			}
			ss.push(pending{ts: ts, pid: w.TGID, tid: w.PID, cpu: int32(w.CPU), n: int32(csize)}, comm)
			if !ok && len(ss.comms) >= wire.MaxComms {
				// Bounded, whatever thread ids clients make up:
				// forgetting costs only names sent again.
				clear(ss.comms)
			}
			ss.comms[w.PID] = w.Comm
		}
	}
	if !ss.fits(size, 1) {
		ss.mu.Unlock()
		ev.shard(w.CPU).dropped.Add(1)
		ss.noteLost(ev, ts, int32(w.CPU), 1)
		return
	}
	ss.push(pending{ts: ts, pid: w.TGID, tid: w.PID, cpu: int32(w.CPU), id: int32(ev.id), n: int32(size), ev: ss.evIndex(ev)}, rec)
	ss.mu.Unlock()
	select {
	case ss.notify <- struct{}{}:
	default:
	}
}

// DeliverFunc takes a session's records as they are written: in the
// writer's goroutine, the record (common header and payload, rec) valid
// only during the call, which must not block. The writer comes as a copy:
// a pointer handed to a function value would make every write's Writer
// escape to the heap — an allocation a write, where the write path has
// none.
type DeliverFunc func(ev *Event, w Writer, ts uint64, rec []byte)

// DeliverTo makes the session hand each record to fn, after its filter,
// instead of buffering it (Read then finds nothing): a perf event of the
// tree (package perfevent) counts and samples it itself, as the kernel's
// perf_tp_event hands it to each event. Records too large for perf
// (PERF_MAX_TRACE_SIZE) are dropped before fn, counted only in the
// event's drops, as the kernel counts them nowhere. It must be called
// before the session is attached to anything.
func (ss *Session) DeliverTo(fn DeliverFunc) error {
	s := ss.s
	s.mu.Lock()
	defer s.unlock()
	if err := ss.mayChooseDelivery("session"); err != nil {
		return err
	}
	ss.fn.Store(&fn)
	return nil
}

// mayChooseDelivery says why the session cannot be told where to deliver
// now (DeliverTo, DeliverToStreams), or nil: it is closed, delivers elsewhere
// already, or is attached. Called with s.mu held.
func (ss *Session) mayChooseDelivery(what string) error {
	switch {
	case ss.closed:
		return fmt.Errorf("%s: the session is closed: %w", what, unix.EBADF)
	case ss.streams.Load() != nil || ss.fn.Load() != nil:
		return fmt.Errorf("%s: the session already delivers elsewhere: %w", what, unix.EBUSY)
	case len(ss.attached) > 0 || len(ss.follow) > 0:
		return fmt.Errorf("%s: the session is already attached to events; choose where it delivers before attaching: %w", what, unix.EBUSY)
	}
	return nil
}

// push queues a record whose p.n bytes — rec and zero padding — fit the
// ring. Called with ss.mu held.
func (ss *Session) push(p pending, rec []byte) {
	ss.queue[(ss.qhead+ss.qlen)%len(ss.queue)] = p
	ss.qlen++
	tail := (ss.head + ss.used) % len(ss.ring)
	n := copy(ss.ring[tail:], rec)
	copy(ss.ring, rec[n:])
	for i := len(rec); i < int(p.n); i++ {
		ss.ring[(tail+i)%len(ss.ring)] = 0
	}
	ss.used += int(p.n)
}

// Read waits until records are buffered, the session is closed or ctx is
// done, then moves as many records as fit into buf and appends them to dst
// (their Raw slices alias buf). A closed session with nothing left returns
// ErrClosed; a buf too small for the next record is EINVAL.
func (ss *Session) Read(ctx context.Context, buf []byte, dst []Record) ([]Record, error) {
	return ss.ReadFramed(ctx, buf, 0, dst)
}

// ReadFramed is Read for a caller that sends each record on with frame
// bytes of its own: every record taken uses frame bytes of len(buf) besides
// its raw data, so that records and frames together fit len(buf). The raw
// data is packed at the start of buf as Read packs it.
func (ss *Session) ReadFramed(ctx context.Context, buf []byte, frame int, dst []Record) ([]Record, error) {
	if ss.streams.Load() != nil {
		return dst, errStreamSession
	}
	for {
		ss.mu.Lock()
		if ss.qlen > 0 {
			n := len(dst)
			dst = ss.drain(buf, frame, dst)
			if ss.shut && ss.qlen == 0 {
				ss.freeBuffer()
			}
			ss.mu.Unlock()
			if len(dst) == n {
				return dst, fmt.Errorf("read buffer of %d bytes is too small for the next record: %w", len(buf), unix.EINVAL)
			}
			return dst, nil
		}
		ss.mu.Unlock()
		select {
		case <-ss.notify:
		case <-ss.done:
			ss.mu.Lock()
			empty := ss.qlen == 0
			ss.mu.Unlock()
			if empty {
				return dst, ErrClosed
			}
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

// errStreamSession is Read's answer for a session that delivers into
// streams.
var errStreamSession = fmt.Errorf("read session: its records go to its shared-memory streams, read them there: %w", unix.EINVAL)

// ErrClosed is returned by reads of a closed consumer that has nothing left.
var ErrClosed = fmt.Errorf("consumer closed: %w", unix.EBADF)

// drain moves records into buf, each using frame bytes of its length
// besides its own. Called with ss.mu held.
func (ss *Session) drain(buf []byte, frame int, dst []Record) []Record {
	budget := len(buf)
	for ss.qlen > 0 {
		p := &ss.queue[ss.qhead]
		n := int(p.n)
		if n+frame > budget {
			break
		}
		budget -= n + frame
		b := buf[:n:n]
		k := copy(b, ss.ring[ss.head:])
		copy(b[k:], ss.ring)
		buf = buf[n:]
		ss.head = (ss.head + n) % len(ss.ring)
		ss.used -= n
		dst = append(dst, Record{TS: p.ts, PID: p.pid, TID: p.tid, CPU: p.cpu, Event: ss.evs[p.ev], ID: int(p.id), Raw: b})
		*p = pending{}
		ss.qhead = (ss.qhead + 1) % len(ss.queue)
		ss.qlen--
	}
	if ss.qlen == 0 && len(ss.evs) > 1 {
		// No record refers to an event any more: forget them, so that a
		// long session following events made and deleted neither grows
		// nor keeps deleted events alive.
		clear(ss.evs[1:])
		ss.evs = ss.evs[:1]
		clear(ss.evIdx)
	}
	return dst
}

// addSession and removeSession update the write path's view of the event's
// sessions (copy on write). Called with s.mu held.
func (ev *Event) addSession(ss *Session) {
	ev.s.changing(ev)
	var cur []*Session
	if p := ev.sessions.Load(); p != nil {
		cur = *p
	}
	next := append(append([]*Session(nil), cur...), ss)
	ev.sessions.Store(&next)
}

func (ev *Event) removeSession(ss *Session) {
	p := ev.sessions.Load()
	if p == nil {
		return
	}
	ev.s.changing(ev)
	next := removeSession(append([]*Session(nil), (*p)...), ss)
	if len(next) == 0 {
		ev.sessions.Store(nil)
		return
	}
	ev.sessions.Store(&next)
}

// addConsumer counts a consumer of kind in or out of ev. Crossing zero is
// the probe's register or unregister (user_event_reg): the event gains or
// loses a reference, its status is recomputed and every enabler written.
// Called with s.mu held.
func (s *Subsystem) addConsumer(ev *Event, kind uint32, delta int) {
	var n *int
	switch kind {
	case StatusPerf:
		n = &ev.perfUsers
	case StatusOther:
		n = &ev.otherUsers
	default:
		panic("subsys: unknown consumer kind")
	}
	before := *n
	*n += delta
	switch {
	case before == 0 && *n > 0:
		ev.refs++
		s.setStatus(ev)
	case before > 0 && *n == 0:
		s.setStatus(ev)
		s.put(ev)
	}
}

// setStatus recomputes the status bits from what is attached and writes
// every enabler. Called with s.mu held.
func (s *Subsystem) setStatus(ev *Event) {
	var st uint32
	if ev.ftrace.Load() {
		st |= StatusFtrace
	}
	if ev.perfUsers > 0 {
		st |= StatusPerf
	}
	if ev.otherUsers > 0 {
		st |= StatusOther
	}
	ev.status.Store(st)
	s.updateEnablers(ev)
	ev.notifyWatches(ev.watchStatus())
	s.notifyStatusWatches(ev, st)
}
