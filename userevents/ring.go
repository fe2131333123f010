package userevents

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/uerror"
)

// Transport is how the daemon backend carries writes to the daemon.
type Transport int

const (
	// RingTransport, the default, publishes each write into memory shared
	// with the daemon (a ring, internal/shmring) without a system call;
	// the daemon drains it. Payloads are validated here first, with the
	// kernel's rules, so Write returns the errors the kernel would. A full
	// ring drops the record, as the kernel's ring buffer does: Write
	// succeeds, the drop is counted (Event.Dropped) and told to the
	// daemon with the next write, which counts it for the event's
	// consumers ("LOST n EVENTS" in the trace, the sessions' lost counts).
	// When the ring cannot be set up — a daemon that predates it, one that
	// refuses it — the File writes over the socket instead (File.Transport
	// says which, File.RingError why).
	RingTransport Transport = iota
	// SocketTransport sends each write to the daemon in a message and
	// waits for its answer: a round trip per write, some 20–40 µs — a
	// hundred times the ring's cost — but the record is in the trace
	// buffer when Write returns, and nothing is ever dropped on the way.
	SocketTransport
)

func (t Transport) String() string {
	switch t {
	case RingTransport:
		return "ring"
	case SocketTransport:
		return "socket"
	}
	return "Transport(" + strconv.Itoa(int(t)) + ")"
}

// DefaultRingKB is the ring's size when neither Options.RingKB nor the
// environment says: room for some 20 000 records of 34 bytes while the
// daemon is not draining.
const DefaultRingKB = 1024

// RingKBEnv names the environment variable that sets the ring's size in
// KiB when Options.RingKB is 0.
const RingKBEnv = "UETRACE_RING_KB"

// ringSize is the ring's data size in bytes for opts: a power of two from
// the page size to the daemon's MaxRing.
func ringSize(kb int) (int, error) {
	src := "Options.RingKB"
	if kb == 0 {
		kb = DefaultRingKB
		if v := os.Getenv(RingKBEnv); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return 0, &Error{Op: "open", Input: RingKBEnv + "=" + v, Errno: unix.EINVAL, Reason: "not a number of KiB"}
			}
			kb, src = n, RingKBEnv
		}
	}
	lo, hi := unix.Getpagesize()/1024, wire.MaxRing/1024
	if kb < lo || kb > hi || kb&(kb-1) != 0 {
		return 0, &Error{Op: "open", Input: src + "=" + strconv.Itoa(kb), Errno: unix.EINVAL,
			Reason: fmt.Sprintf("the ring size must be a power of two from %d to %d KiB", lo, hi)}
	}
	return kb * 1024, nil
}

// clientRing is a File's ring. Writers reach the producer only through it
// and keep it alive (keepAlive) until their record is published:
// the mapping is released by a cleanup once no File and no Write in
// flight holds it, so a Write racing with Close publishes into memory
// that is still mapped, never into a hole.
type clientRing struct {
	p *shmring.Producer

	// Records dropped because the ring was full, that the daemon has not
	// been told of yet (see wire.LostIndex): the events that have some,
	// and a flag a Write checks with one load of a line written only when
	// a record is dropped.
	lossy    atomic.Bool
	lossMu   sync.Mutex
	lossList []*Event
	// retry publishes the losses when no write comes to do it: a
	// program that stops writing after its ring filled up still has its
	// drops told. Armed by the first drop after the list was empty.
	retry     retryTimer
	retryWait time.Duration
	closed    bool
}

// Retrying an unpublished loss: after lossRetryMin, then ever more
// rarely while the ring stays full, up to lossRetryMax.
const (
	lossRetryMin = time.Millisecond
	lossRetryMax = 100 * time.Millisecond
)

// setupRing creates a ring of size bytes and shares it on c. On failure the
// File writes over the socket; the error says why.
func setupRing(c *client.Conn, size int) (*clientRing, error) {
	p, err := shmring.Create(size)
	if err != nil {
		return nil, err
	}
	if err := c.ShareRing(p); err != nil {
		p.Close()
		return nil, err
	}
	r := &clientRing{p: p}
	runtime.AddCleanup(r, func(p *shmring.Producer) { p.Close() }, p)
	return r, nil
}

// Transport is how a File of the daemon backend sends its writes:
// RingTransport when its ring was set up, else SocketTransport. On the
// other backends, which have neither, it returns SocketTransport.
func (f *File) Transport() Transport {
	if f.ring.Load() != nil {
		return RingTransport
	}
	return SocketTransport
}

// RingError says why a File of the daemon backend asked for the ring
// transport writes over the socket; nil when it does not.
func (f *File) RingError() error { return f.ringErr }

// Dropped is how many records of this Event the ring had no room for: the
// daemon was not draining fast enough. Write succeeded for each, as a
// write to the kernel does when its ring buffer is full. The daemon is
// told with the next write that finds room (or by File.Sync, or a retry
// within milliseconds when no write comes), and its consumers count them:
// "CPU:N [LOST n EVENTS]" in the trace, PERF_RECORD_LOST in perf.data,
// DROPPED in uetrace status.
func (e *Event) Dropped() uint64 { return e.dropped.Load() }

// maxStackRecord bounds the records of events with __data_loc or __rel_loc
// fields that are validated here; longer ones go over the socket, whose
// answer is the daemon's own validation.
const maxStackRecord = 512

// ringWrite is Write on the ring. It makes user_events_write_core's checks
// in its order, with its errnos, as the socket path would have the daemon
// make them: a payload shorter than the fields EINVAL, a disabled event
// EBADF. ok is false when the write must go over the socket instead: a
// record that fails validation (EFAULT or not depends on the daemon's
// consumers), one whose validation depends on what only the daemon knows
// (the event's type id, in the record's first two bytes), or one too large
// for the checks here.
func (e *Event) ringWrite(r *clientRing, payload [][]byte) (ok bool, err error) {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	if int32(e.index) < 0 || 4+n > wire.MaxWrite {
		return false, nil
	}
	if err := e.def.CheckSize(n); err != nil {
		return true, uerror.Wrap("write", "", e.Name(), err)
	}
	if !e.Enabled() {
		return true, e.disabled
	}
	tid := int32(-1)
	if e.def.HasValidators() {
		if 8+n > maxStackRecord {
			return false, nil
		}
		var rec [maxStackRecord]byte
		// The header the daemon will build: type id, flags 0, the thread
		// — a __data_loc may point into the header, so the bytes count;
		// the record carries this tid. The type id is the daemon's;
		// validate with it as 0 and as 0xffff — a string check is "is
		// this byte NUL" — and leave a record whose verdict differs to
		// the daemon.
		tid = stamp.Tid()
		binary.NativeEndian.PutUint32(rec[4:], uint32(tid))
		off := eventdef.HeaderSize
		for _, p := range payload {
			off += copy(rec[off:], p)
		}
		verr := e.def.Validate(rec[:off])
		rec[0], rec[1] = 0xff, 0xff
		if ferr := e.def.Validate(rec[:off]); (ferr == nil) != (verr == nil) || verr != nil && ferr.Error() != verr.Error() {
			return false, nil
		}
		if verr != nil {
			// Whether an invalid record is EFAULT depends on the
			// daemon's consumers: one the kernel's probes would not
			// reserve room for (tracing off, a buffer too small for it)
			// is never validated, and the write succeeds
			// (user_events_write_core). Only the daemon knows.
			return false, nil
		}
	}
	if r.lossy.Load() {
		r.publishLosses()
	}
	v, ok := r.p.Reserve(shmring.Meta{WriteIndex: e.index}, n)
	if !ok {
		r.lose(e)
		return true, nil
	}
	// Stamped after the reservation, as the daemon's merge wants (see
	// shmring.Reservation.Stamp).
	st := stamp.Take()
	if tid >= 0 {
		st.TID = tid
	}
	v.Stamp(st.Time, uint32(st.TID), st.CPU)
	dst := v.Payload()
	for _, p := range payload {
		dst = dst[copy(dst, p):]
	}
	v.Commit()
	return true, nil
}

// lose counts a record of e the ring had no room for, to be told to the
// daemon in a loss record (publishLosses).
func (r *clientRing) lose(e *Event) {
	e.dropped.Add(1)
	if e.lostPending.Add(1) == 1 {
		r.lossMu.Lock()
		r.lossList = append(r.lossList, e)
		r.armRetry()
		r.lossMu.Unlock()
	}
	r.lossy.Store(true)
}

// armRetry makes sure a retry of publishLosses is due. Called with
// r.lossMu held.
func (r *clientRing) armRetry() {
	if r.closed || r.retryWait != 0 {
		return // armed already
	}
	r.retryWait = lossRetryMin
	if r.retry.reset == nil {
		r.retry = newRetryTimer(r.retryWait, r.retryLosses)
	} else {
		r.retry.reset(r.retryWait)
	}
}

// retryLosses is the timer's publishLosses.
func (r *clientRing) retryLosses() {
	r.publishLosses()
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	if len(r.lossList) == 0 || r.closed {
		r.retryWait = 0
		return
	}
	r.retryWait = min(2*r.retryWait, lossRetryMax)
	r.retry.reset(r.retryWait)
}

// stopRetry ends the retries: the File is closing.
func (r *clientRing) stopRetry() {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	r.closed = true
	if r.retry.stop != nil {
		r.retry.stop()
	}
}

// publishLosses publishes a loss record (wire.LostIndex) for every event
// with records dropped since it last did, where there is room; what does
// not fit waits for the next write. The daemon counts them for the event's
// consumers, as if the kernel's ring buffer had dropped them.
func (r *clientRing) publishLosses() {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	r.lossy.Store(false)
	keep := r.lossList[:0]
	for _, e := range r.lossList {
		n := e.lostPending.Load()
		if n != 0 {
			// TryReserve: a loss record that does not fit is not a
			// dropped record; it is kept and tried again.
			v, ok := r.p.TryReserve(shmring.Meta{WriteIndex: wire.LostIndex}, wire.LostPayload)
			if !ok {
				keep = append(keep, e)
				continue
			}
			st := stamp.Take()
			v.Stamp(st.Time, uint32(st.TID), st.CPU)
			b := v.Payload()
			binary.NativeEndian.PutUint32(b, e.index)
			binary.NativeEndian.PutUint32(b[4:], 0)
			binary.NativeEndian.PutUint64(b[8:], n)
			v.Commit()
			// Drops since the load above stay counted, and keep the
			// event in the list.
			if e.lostPending.Add(^(n - 1)) != 0 {
				keep = append(keep, e)
			}
		}
	}
	clear(r.lossList[len(keep):])
	r.lossList = keep
	if len(keep) > 0 {
		r.lossy.Store(true)
	}
}

// tell publishes the losses not yet told, having the daemon empty a full
// ring first if they do not fit.
func (r *clientRing) tell(dc *client.Conn) error {
	if !r.lossy.Load() {
		return nil
	}
	r.publishLosses()
	if !r.pendingLosses() {
		return nil
	}
	if err := dc.FlushRing(); err != nil {
		return err
	}
	r.publishLosses()
	return nil
}

// pendingLosses reports whether some dropped records are still to be
// told to the daemon.
func (r *clientRing) pendingLosses() bool {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	return len(r.lossList) > 0
}

// Sync returns once the daemon has delivered every record written
// through f so far, and has been told of every record f's ring dropped —
// so that a consumer reading then sees each write as a record or in a
// lost count. Writes on the kernel and other backends, and over the
// daemon's socket, are delivered when Write returns: Sync returns nil at
// once for them.
func (f *File) Sync() error {
	r := f.ring.Load()
	if r == nil {
		return nil
	}
	defer keepAlive(r)
	if err := r.tell(f.dc); err != nil {
		return uerror.Wrap("sync", "", "", err)
	}
	if err := f.dc.FlushRing(); err != nil {
		return uerror.Wrap("sync", "", "", err)
	}
	if r.pendingLosses() {
		// Writers on other goroutines filled the ring again meanwhile.
		return &Error{Op: "sync", Errno: unix.EAGAIN, Reason: "the ring filled up again before the daemon was told of its drops; they are still counted in Event.Dropped and will be told with the next write"}
	}
	return nil
}

// keepAlive is runtime.KeepAlive(r) through an unsafe.Pointer: r itself in
// KeepAlive's interface would mark clientRing's field types as used in an
// interface — its timer's, and with them time's formatting and time zones —
// and link them into every producer.
func keepAlive(r *clientRing) { runtime.KeepAlive(unsafe.Pointer(r)) }

// retryTimer is a *time.Timer by its two methods: a *time.Timer field would
// make the time.Time of its channel a type every producer's binary carries
// with its formatting and time zones, once a File is in an interface.
type retryTimer struct {
	reset func(time.Duration) bool
	stop  func() bool
}

func newRetryTimer(d time.Duration, f func()) retryTimer {
	t := time.AfterFunc(d, f)
	return retryTimer{t.Reset, t.Stop}
}
