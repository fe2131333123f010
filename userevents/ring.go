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

// DefaultRingKB is what the rings of a File take together when neither
// Options.RingKB nor the environment says: each of the R rings of its ring
// set gets DefaultRingKB/R KiB, rounded down to a power of two, and at
// least minRingKB. A record of 34 bytes takes 72 in a ring (a 32-byte
// header, padded to 8): 1024 KiB is room for some 14 500 of them while the
// daemon is not draining, across the rings — a thread writing on one CPU
// has its ring's share.
const DefaultRingKB = 1024

// minRingKB is the least a ring of a set gets by default.
const minRingKB = 64

// RingKBEnv names the environment variable that sets the size of each ring
// in KiB when Options.RingKB is 0.
const RingKBEnv = "UETRACE_RING_KB"

// ringKB is the size of each ring in KiB for opts, a power of two from the
// page size to the daemon's MaxRing; 0 when neither Options.RingKB nor the
// environment says (DefaultRingKB is shared out then).
func ringKB(kb int) (int, error) {
	src := "Options.RingKB"
	if kb == 0 {
		v := os.Getenv(RingKBEnv)
		if v == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, &Error{Op: "open", Input: RingKBEnv + "=" + v, Errno: unix.EINVAL, Reason: "not a number of KiB"}
		}
		kb, src = n, RingKBEnv
	}
	lo, hi := unix.Getpagesize()/1024, wire.MaxRing/1024
	if kb < lo || kb > hi || kb&(kb-1) != 0 {
		return 0, &Error{Op: "open", Input: src + "=" + strconv.Itoa(kb), Errno: unix.EINVAL,
			Reason: fmt.Sprintf("the ring size must be a power of two from %d to %d KiB", lo, hi)}
	}
	return kb, nil
}

// clientRing is a File's ring set. A write publishes into the ring of the
// CPU it runs on. Writers reach the producers only through it and keep it
// alive (keepAlive) until their record is published: the mapping is
// released by a cleanup once no File and no Write in flight holds it, so a
// Write racing with Close publishes into memory that is still mapped,
// never into a hole.
type clientRing struct {
	set *shmring.SetProducer

	// Records dropped because their ring was full, that the daemon has
	// not been told of yet (see wire.LostIndex): each is told in the ring
	// it was dropped from, before the next record that finds room there,
	// so that the trace's "LOST n EVENTS" is on the CPU it happened on.
	// lossy[k] says ring k has some: a Write checks it with one load of a
	// line written only when a record is dropped.
	lossy    []atomic.Bool
	lossMu   sync.Mutex
	lossList []lostCount
	// retry publishes the losses when no write comes to do it: a
	// program that stops writing after its ring filled up still has its
	// drops told. Armed by the first drop after the list was empty.
	retry     retryTimer
	retryWait time.Duration
	closed    bool
}

// lostCount is an event's records dropped from ring k, not yet told.
type lostCount struct {
	e *Event
	k int
	n uint64
}

// Retrying an unpublished loss: after lossRetryMin, then ever more
// rarely while the ring stays full, up to lossRetryMax.
const (
	lossRetryMin = time.Millisecond
	lossRetryMax = 100 * time.Millisecond
)

// setupRing shares a ring set of the daemon's ring count on c, each ring
// kb KiB (0: its share of DefaultRingKB). A daemon before ring sets gets
// none: the File writes over the socket. On failure the File writes over
// the socket; the error says why.
func setupRing(c *client.Conn, kb int) (*clientRing, error) {
	n := c.Rings()
	if n == 0 {
		return nil, errNoRingSets
	}
	if kb == 0 {
		// Each ring's share of DefaultRingKB, a power of two, at least
		// minRingKB.
		kb = minRingKB
		for kb*2 <= DefaultRingKB/n {
			kb *= 2
		}
	}
	sp, err := shmring.CreateSet(n, kb<<10)
	if err != nil {
		return nil, err
	}
	if err := c.ShareRingSet(sp); err != nil {
		sp.Close()
		return nil, err
	}
	r := &clientRing{set: sp, lossy: make([]atomic.Bool, n)}
	runtime.AddCleanup(r, func(sp *shmring.SetProducer) { sp.Close() }, sp)
	return r, nil
}

// errNoRingSets is setupRing's answer for a daemon before ring sets.
var errNoRingSets = &Error{Op: "open", Errno: unix.EPROTONOSUPPORT, Reason: "the daemon predates ring sets"}

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
	// The thread and CPU, read before the reservation: the CPU picks the
	// ring, and the record says it — the records of a ring are those of
	// its CPUs (a thread that migrates meanwhile publishes into the ring
	// it picked: harmless). The time is taken after the reservation, as
	// the daemon's merge wants (see shmring.Reservation.Stamp).
	tid, cpu := stamp.TidCPU()
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
	k := r.set.Index(cpu)
	p := r.set.Ring(k)
	if r.lossy[k].Load() {
		r.publishLosses(k, cpu)
	}
	v, ok := p.Reserve(shmring.Meta{WriteIndex: e.index}, n)
	if !ok {
		r.lose(k, e)
		return true, nil
	}
	v.Stamp(stamp.Now(), uint32(tid), cpu)
	dst := v.Payload()
	for _, p := range payload {
		dst = dst[copy(dst, p):]
	}
	v.Commit()
	return true, nil
}

// lose counts a record of e that ring k had no room for, to be told to the
// daemon in a loss record in that ring (publishLosses).
func (r *clientRing) lose(k int, e *Event) {
	e.dropped.Add(1)
	r.lossMu.Lock()
	i := 0
	for i < len(r.lossList) && (r.lossList[i].e != e || r.lossList[i].k != k) {
		i++
	}
	if i == len(r.lossList) {
		r.lossList = append(r.lossList, lostCount{e: e, k: k})
	}
	r.lossList[i].n++
	r.lossy[k].Store(true)
	if !r.closed && r.retryWait == 0 { // else the retry is armed already
		r.retryWait = lossRetryMin
		if r.retry.reset == nil {
			r.retry = newRetryTimer(r.retryWait, r.retryLosses)
		} else {
			r.retry.reset(r.retryWait)
		}
	}
	r.lossMu.Unlock()
}

// retryLosses is the timer's publishLosses, for every ring.
func (r *clientRing) retryLosses() {
	r.publishLosses(-1, 0)
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
// with records dropped from ring k (every ring, for k < 0) since it last
// did, into that ring, where there is room; what does not fit waits for
// the next write. The daemon counts them for the event's consumers, as if
// the kernel's ring buffer had dropped them. cpu is the writer's CPU, one
// of ring k's, which the records say (for k < 0, each ring's first).
func (r *clientRing) publishLosses(k int, cpu uint32) {
	r.lossMu.Lock()
	defer r.lossMu.Unlock()
	if k >= 0 {
		r.lossy[k].Store(false)
	} else {
		for i := range r.lossy {
			r.lossy[i].Store(false)
		}
	}
	keep := r.lossList[:0]
	for _, l := range r.lossList {
		if k >= 0 && l.k != k {
			keep = append(keep, l)
			continue
		}
		c := cpu
		if k < 0 {
			c = uint32(l.k)
		}
		// TryReserve: a loss record that does not fit is not a
		// dropped record; it is kept and tried again.
		v, ok := r.set.Ring(l.k).TryReserve(shmring.Meta{WriteIndex: wire.LostIndex}, wire.LostPayload)
		if !ok {
			keep = append(keep, l)
			continue
		}
		tid, _ := stamp.TidCPU()
		v.Stamp(stamp.Now(), uint32(tid), c)
		b := v.Payload()
		binary.NativeEndian.PutUint32(b, l.e.index)
		binary.NativeEndian.PutUint32(b[4:], 0)
		binary.NativeEndian.PutUint64(b[8:], l.n)
		v.Commit()
	}
	clear(r.lossList[len(keep):])
	r.lossList = keep
	for _, l := range keep {
		r.lossy[l.k].Store(true)
	}
}

// tell publishes the losses not yet told, having the daemon empty the
// full rings first if they do not fit.
func (r *clientRing) tell(dc *client.Conn) error {
	r.publishLosses(-1, 0)
	if !r.pendingLosses() {
		return nil
	}
	if err := dc.FlushRing(); err != nil {
		return err
	}
	r.publishLosses(-1, 0)
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
