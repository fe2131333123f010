package userevents

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/uerror"
)

// Backend says where user_events_data is.
type Backend int

const (
	// Auto is the kernel when its tracefs has user_events_data and it can
	// be opened, else the daemon when one answers at the socket.
	Auto Backend = iota
	// Kernel is Linux's own user_events (CONFIG_USER_EVENTS).
	Kernel
	// Daemon is a uetrace daemon (uetrace serve) over its Unix socket.
	Daemon
	// Other is the user_events_data Options.OpenData opened: an in-process
	// kernel (package usereventstest) or a test double. Open never
	// selects it by itself.
	Other
)

var backendNames = [...]string{"auto", "kernel", "daemon", "other"}

func (b Backend) String() string {
	if b >= 0 && int(b) < len(backendNames) {
		return backendNames[b]
	}
	return "Backend(" + strconv.Itoa(int(b)) + ")"
}

// ParseBackend parses "auto", "kernel" or "daemon".
func ParseBackend(s string) (Backend, error) {
	for i, n := range backendNames[:Other] {
		if s == n {
			return Backend(i), nil
		}
	}
	return 0, &Error{Op: "backend", Input: s, Errno: unix.EINVAL, Reason: "unknown backend: want auto, kernel or daemon"}
}

// Flags are registration flags.
type Flags uint16

const (
	// Persist keeps the event after its last user is gone
	// (USER_EVENT_REG_PERSIST). It needs CAP_PERFMON or CAP_SYS_ADMIN.
	Persist Flags = abi.RegPersist
	// MultiFormat gives each (name, fields) its own tracepoint "name.<hexid>"
	// in system user_events_multi (USER_EVENT_REG_MULTI_FORMAT), so that
	// programs with different versions of an event can coexist.
	MultiFormat Flags = abi.RegMultiFormat
)

// Options say which user_events to open. A nil *Options is Auto with the
// default locations.
type Options struct {
	Backend Backend
	// Tracefs is the kernel's tracefs mount ("": /sys/kernel/tracing, else
	// the first tracefs or debugfs in /proc/self/mountinfo).
	Tracefs string
	// Socket is the daemon's socket ("": $UETRACE_SOCKET, else
	// /run/uetrace/uetrace.sock for root, else
	// $XDG_RUNTIME_DIR/uetrace/uetrace.sock).
	Socket string
	// Transport is how the Daemon backend sends writes: RingTransport (the
	// default), which falls back to the socket when the ring cannot be set
	// up, or SocketTransport. Other backends ignore it.
	Transport Transport
	// RingKB is the size in KiB of each of the daemon backend's rings —
	// one per CPU index the daemon drains apart (its ring set) — a power
	// of two (0: $UETRACE_RING_KB, else each ring's share of
	// DefaultRingKB). What a ring holds is what may wait while its reader
	// is not running: a thread writing millions of records a second wants
	// rings of 2–4 MiB, as many records as LTTng-UST's default buffer per
	// CPU holds (BENCHMARKS.md, "Data path": into uetrace record, one
	// producer kept 2.8 M records/s whole with rings of 512 KiB, 5.7 M/s
	// with 2 MiB and 7.7–8.1 M/s with 4 MiB on two CPUs).
	RingKB int
	// OpenData, when set, opens the user_events_data a File uses in place
	// of the kernel's or a daemon's, whatever Backend says: an in-process
	// kernel (package usereventstest) or a test double. The File's
	// backend is Other.
	OpenData func() (DataFile, error)
}

// File is an open user_events_data: the events registered through it and
// their write indices. Close it to drop its events, as closing the fd does.
// A File is safe for concurrent use.
type File struct {
	backend Backend
	arena   *arena
	data    DataFile // kernel.go, daemon.go, or Options.OpenData's

	dc      *client.Conn               // Daemon
	ring    atomic.Pointer[clientRing] // Daemon with RingTransport; nil once closed
	ringErr error                      // why a File asked for a ring has none

	mu     sync.Mutex
	events map[*Event]struct{}
	closed bool
}

// Open opens user_events_data on the backend opts select (nil: Auto).
func Open(opts *Options) (*File, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.OpenData != nil {
		return openOther(opts.OpenData)
	}
	switch opts.Backend {
	case Kernel:
		return openKernel(opts.Tracefs)
	case Daemon:
		return openDaemon(opts)
	case Auto:
		f, kerr := openKernel(opts.Tracefs)
		if kerr == nil {
			return f, nil
		}
		f, derr := openDaemon(opts)
		if derr == nil {
			return f, nil
		}
		return nil, uerror.NoBackend(kerr, derr)
	}
	return nil, fmt.Errorf("open user_events_data: unknown backend %v: %w", opts.Backend, unix.EINVAL)
}

func openKernel(root string) (*File, error) {
	k, err := openKernelData(root)
	if err != nil {
		return nil, err
	}
	a, err := privateArena()
	if err != nil {
		k.Close()
		return nil, err
	}
	return &File{backend: Kernel, arena: a, data: k, events: map[*Event]struct{}{}}, nil
}

// openOther opens the user_events_data open gives. Its enable words are
// in the private arena: the other kernel writes this process's memory, as
// Linux does.
func openOther(open func() (DataFile, error)) (*File, error) {
	a, err := privateArena()
	if err != nil {
		return nil, err
	}
	d, err := open()
	if err != nil {
		return nil, uerror.Wrap("open", "user_events_data", "", err)
	}
	return &File{backend: Other, arena: a, data: d, events: map[*Event]struct{}{}}, nil
}

// Backend is the backend the File was opened on.
func (f *File) Backend() Backend { return f.backend }

// Register registers an event from a command, "name[:flags] [field;...]"
// as the kernel takes it (for example "myapp_request u32 status; char[16]
// path"), with Persist and MultiFormat flags. The event's enable word is
// a slot of this process's arena. Registering the same command again
// returns another Event for the same tracepoint, with its own write index.
//
// Errors are *Error values wrapping the errno the kernel gives, in its
// precedence: EINVAL for a malformed command (the error says what is
// wrong), EADDRINUSE for a name registered with other fields, EPERM for
// Persist without the privilege, EMFILE past user_events_max.
func (f *File) Register(cmd string, flags Flags) (*Event, error) {
	if strings.IndexByte(cmd, 0) >= 0 {
		return nil, &Error{Op: "register", Input: cmd, Errno: unix.EINVAL, Reason: "the command contains a NUL byte"}
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return nil, &Error{Op: "register", Input: cmd, Errno: unix.EBADF, Reason: "the file is closed"}
	}
	slot, err := f.arena.alloc()
	if err != nil {
		return nil, &Error{Op: "register", Input: cmd, Errno: unix.ENOMEM, Reason: err.Error()}
	}
	reg := abi.UserReg{Size: abi.UserRegSize, EnableBit: 0, EnableSize: slotSize, Flags: uint16(flags), EnableAddr: f.arena.addr(slot)}
	idx, err := f.data.Register(reg.Bytes(), cmd)
	if err != nil {
		f.arena.release(slot)
		return nil, uerror.Wrap("register", "", cmd, err)
	}
	e := &Event{f: f, slot: slot, index: idx, cmd: cmd, flags: flags}
	e.word.Store(f.arena.word(slot))
	e.def, _ = eventdef.Parse(cmd)
	e.disabled = &Error{Op: "write", Input: e.Name(), Errno: unix.EBADF, Reason: "the event is not enabled"}
	f.mu.Lock()
	f.events[e] = struct{}{}
	f.mu.Unlock()
	return e, nil
}

// Delete deletes the event registered as name (DIAG_IOCSDEL): EBUSY while
// anything uses it — this File's own Events included — ENOENT when there
// is none, EPERM for a persistent event without the privilege.
func (f *File) Delete(name string) error {
	err := f.data.Delete(name)
	if err != nil {
		return uerror.Wrap("delete", "", name, err)
	}
	return nil
}

// Close unregisters every Event registered through f and closes the
// file, which drops its events' references: events nothing else holds are
// deleted.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	evs := make([]*Event, 0, len(f.events))
	for e := range f.events {
		evs = append(evs, e)
	}
	f.mu.Unlock()
	var errs []error
	for _, e := range evs {
		if err := e.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if f.dc != nil {
		// The daemon delivers what the ring holds before it closes the
		// connection; the mapping goes when no Write uses it any more.
		// Records dropped and not yet told are told first, making room
		// in a full ring if need be.
		if r := f.ring.Load(); r != nil {
			r.stopRetry()
			r.tell(f.dc) // what cannot be told stays in Event.Dropped
		}
		f.ring.Store(nil)
	}
	errs = append(errs, f.data.Close())
	return errors.Join(errs...)
}

// Hangup returns a channel closed when the daemon a File of the daemon
// backend is connected to hangs up — it exited, and the File's
// registrations went with it — or when the File is closed. On the other
// backends, whose registrations live as long as the File, it is nil:
// never ready.
func (f *File) Hangup() <-chan struct{} {
	if f.dc == nil {
		return nil
	}
	return f.dc.Hangup()
}

// zeroWord is where a closed Event's enable pointer points: nothing ever
// sets it, so a stale Enabled reads false.
var zeroWord uint32

// Event is a registered event. Check Enabled before building a payload;
// Write sends one record.
type Event struct {
	f     *File
	word  atomic.Pointer[uint32] // the enable word: a slot, or zeroWord once closed
	slot  int
	index uint32
	cmd   string
	flags Flags
	def   *eventdef.Event

	disabled *Error     // preallocated: a disabled write must not allocate
	closeMu  sync.Mutex // serialises Close; word == &zeroWord says it was done
	dropped  atomic.Uint64
}

// Enabled reports whether anything — ftrace, perf, a uetrace session — is
// attached to the event: one atomic load of the enable word and a bit test.
// It is false once the Event is closed.
func (e *Event) Enabled() bool {
	return atomic.LoadUint32(e.word.Load())&1 != 0
}

// WriteIndex is the index the kernel gave the registration.
func (e *Event) WriteIndex() uint32 { return e.index }

// Command is the command the event was registered with.
func (e *Event) Command() string { return e.cmd }

// Name is the event's name: the command's first word without ":flags".
func (e *Event) Name() string {
	if e.def != nil {
		return e.def.Name
	}
	name := e.cmd
	for name != "" && (name[0] == ' ' || name[0] == '\t') {
		name = name[1:]
	}
	name, _, _ = strings.Cut(name, " ")
	name, _, _ = strings.Cut(name, ":")
	return name
}

// Def is the event's parsed definition: its fields, their offsets and
// sizes. Use it with eventdef.Encoder to build payloads.
func (e *Event) Def() *eventdef.Event { return e.def }

// maxIov is the number of payload slices a Write passes as they are; more
// are joined into one buffer first.
const maxIov = wire.MaxIov - 1

// smallIov is the size of the array a Write of up to smallIov-1 payload
// slices passes them in.
const smallIov = 4

func join(payload [][]byte) []byte {
	var b []byte
	for _, p := range payload {
		b = append(b, p...)
	}
	return b
}

// Write writes one record: the write index followed by the payload slices,
// in one writev. It returns an error wrapping EBADF when nothing is
// attached (a caller that raced with a disable can ignore it), EINVAL when the payload is shorter than the
// event's fields, EFAULT when a __data_loc or __rel_loc field points
// outside the record or a char one is not NUL-terminated.
func (e *Event) Write(payload ...[]byte) error {
	if e.word.Load() == &zeroWord {
		return &Error{Op: "write", Input: e.Name(), Errno: unix.EBADF, Reason: "the event is closed"}
	}
	var joined [1][]byte
	if len(payload) > maxIov {
		joined[0] = join(payload)
		payload = joined[:]
	}
	f := e.f
	if r := f.ring.Load(); r != nil && e.def != nil {
		ok, err := e.ringWrite(r, payload)
		keepAlive(r)
		if ok {
			return err
		}
	}
	// The index and the payload slices in one stack array, filled by a
	// loop: copy() — or a helper taking the array by pointer — makes
	// escape analysis send them, and the caller's buffers, to the heap;
	// noescape keeps the interface call from doing the same. A small
	// array for the usual few slices: the array is zeroed on every write.
	var err error
	var idx [4]byte
	*(*uint32)(unsafe.Pointer(&idx)) = e.index
	if len(payload) < smallIov {
		var iov [smallIov][]byte
		iov[0] = idx[:]
		n := 1
		for _, p := range payload {
			iov[n] = p
			n++
		}
		_, err = f.data.Writev(noescape(iov[:n])...)
	} else {
		var iov [maxIov + 1][]byte
		iov[0] = idx[:]
		n := 1
		for _, p := range payload {
			iov[n] = p
			n++
		}
		_, err = f.data.Writev(noescape(iov[:n])...)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EBADF) {
		return e.disabled
	}
	return uerror.Wrap("write", "", e.Name(), err)
}

// Encode builds a payload with enc in buf and writes it: the typed path.
// fill sets the fields in order, as eventdef.Encoder documents.
//
//	err := ev.Encode(&enc, buf, func(e *eventdef.Encoder) {
//		e.Uint(200)
//		e.String("/index.html")
//	})
//
// buf is truncated and reused: with a capacity the payload fits in, encoding
// allocates nothing.
func (e *Event) Encode(enc *eventdef.Encoder, buf []byte, fill func(*eventdef.Encoder)) error {
	if e.def == nil {
		return &Error{Op: "encode", Input: e.Name(), Errno: unix.EINVAL, Reason: "the event's command does not parse here"}
	}
	enc.Reset(e.def, buf)
	fill(enc)
	p, err := enc.Payload()
	if err != nil {
		return uerror.Wrap("encode", "", e.Name(), err)
	}
	return e.Write(p)
}

// Close unregisters the event (DIAG_IOCSUNREG): its enable bit is no longer
// updated, Enabled reports false from now on, and its slot is reused. The
// write index stays valid in the kernel until the File is closed, but this
// Event writes no more. An event nothing else holds is deleted when its
// File is closed.
func (e *Event) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.word.Load() == &zeroWord {
		return nil
	}
	// Repoint first: from here on a concurrent Enabled reads zeroWord, so the
	// slot can be reused without a stale handle seeing another event's bit.
	e.word.Store(&zeroWord)
	f := e.f
	f.mu.Lock()
	delete(f.events, e)
	f.mu.Unlock()
	un := abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: 0, DisableAddr: f.arena.addr(e.slot)}
	err := f.data.Unregister(un.Bytes())
	if err != nil {
		// The bit may still be written: never hand the slot out again.
		return uerror.Wrap("unregister", "", e.Name(), err)
	}
	f.arena.release(e.slot)
	return nil
}
