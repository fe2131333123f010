package userevents

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
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
	// InProcess is a subsystem inside this process (see InProcessSubsystem):
	// for tests, demos and programs that trace themselves.
	InProcess
)

var backendNames = [...]string{"auto", "kernel", "daemon", "inprocess"}

func (b Backend) String() string {
	if b >= 0 && int(b) < len(backendNames) {
		return backendNames[b]
	}
	return "Backend(" + strconv.Itoa(int(b)) + ")"
}

// ParseBackend parses "auto", "kernel", "daemon" or "inprocess".
func ParseBackend(s string) (Backend, error) {
	for i, n := range backendNames {
		if s == n {
			return Backend(i), nil
		}
	}
	return 0, &Error{Op: "backend", Input: s, Errno: unix.EINVAL, Reason: "unknown backend: want auto, kernel, daemon or inprocess"}
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

// Options say which user_events to open. The zero value is Auto with the
// default locations.
type Options struct {
	Backend Backend
	// Tracefs is the kernel's tracefs mount ("": /sys/kernel/tracing, else
	// the first tracefs or debugfs in /proc/self/mountinfo).
	Tracefs string
	// Socket is the daemon's socket ("": wire.DefaultSocket()).
	Socket string
	// Subsystem is the InProcess backend's subsystem (nil:
	// InProcessSubsystem()).
	Subsystem *subsys.Subsystem
	// Transport is how the Daemon backend sends writes: RingTransport (the
	// default), which falls back to the socket when the ring cannot be set
	// up, or SocketTransport. Other backends ignore it.
	Transport Transport
	// RingKB is the size of the daemon backend's ring in KiB, a power of
	// two (0: $UETRACE_RING_KB, else DefaultRingKB).
	RingKB int
}

var (
	inprocOnce sync.Once
	inprocSys  *subsys.Subsystem
)

// InProcessSubsystem is the subsystem the InProcess backend uses when
// Options.Subsystem is nil: one per process, created on first use.
func InProcessSubsystem() *subsys.Subsystem {
	inprocOnce.Do(func() { inprocSys = subsys.New(subsys.Options{NumCPU: runtime.NumCPU()}) })
	return inprocSys
}

// File is an open user_events_data: the events registered through it and
// their write indices. Close it to drop its events, as closing the fd does.
// A File is safe for concurrent use.
type File struct {
	backend Backend
	arena   *arena

	kfd int // Kernel: the user_events_data descriptor

	dc      *client.Conn               // Daemon
	ring    atomic.Pointer[clientRing] // Daemon with RingTransport; nil once closed
	ringErr error                      // why a File asked for a ring has none

	sys  *subsys.Subsystem // InProcess
	sf   *subsys.File
	sp   *subsys.Process
	cred subsys.Cred

	mu     sync.Mutex
	events map[*Event]struct{}
	closed bool
}

// Open opens user_events_data on the backend opts select.
func Open(opts Options) (*File, error) {
	switch opts.Backend {
	case Kernel:
		return openKernel(opts.Tracefs)
	case Daemon:
		return openDaemon(opts)
	case InProcess:
		return openInProcess(opts.Subsystem)
	case Auto:
		f, kerr := openKernel(opts.Tracefs)
		if kerr == nil {
			return f, nil
		}
		f, derr := openDaemon(opts)
		if derr == nil {
			return f, nil
		}
		return nil, noBackend(kerr, derr)
	}
	return nil, fmt.Errorf("open user_events_data: unknown backend %v: %w", opts.Backend, unix.EINVAL)
}

// noBackend explains why Auto found nothing, and what to do about it. A
// daemon that is there but refuses this user is the answer itself: its
// error says whom to ask.
func noBackend(kerr, derr error) error {
	var pe *client.PermissionError
	var ie *client.IdentityError
	if errors.As(derr, &pe) || errors.As(derr, &ie) {
		return derr
	}
	hint := ""
	if errors.Is(kerr, unix.EACCES) || errors.Is(kerr, unix.EPERM) {
		hint = "the kernel has user_events but this user may not open user_events_data: run as root, " +
			"give the user access to tracefs, or start a daemon with `uetrace serve`"
	}
	return &NoBackendError{Kernel: kerr, Daemon: derr, Hint: hint}
}

// NoBackendError is Auto's failure: neither backend could be opened.
type NoBackendError struct {
	Kernel, Daemon error
	Hint           string // what the user can do, when the causes do not say
}

func (e *NoBackendError) Error() string {
	s := "no user_events: kernel: " + e.Kernel.Error() + "; daemon: " + e.Daemon.Error()
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Unwrap returns both causes.
func (e *NoBackendError) Unwrap() []error { return []error{e.Kernel, e.Daemon} }

func openDaemon(opts Options) (*File, error) {
	sock := opts.Socket
	var size int
	switch opts.Transport {
	case RingTransport:
		var err error
		if size, err = ringSize(opts.RingKB); err != nil {
			return nil, err
		}
	case SocketTransport:
	default:
		return nil, &Error{Op: "open", Input: opts.Transport.String(), Errno: unix.EINVAL, Reason: "unknown transport: want RingTransport or SocketTransport"}
	}
	a, err := memfdArena()
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(sock, &client.Arena{FD: a.fd, Addr: a.base(), Size: uint64(len(a.mem))})
	if err != nil {
		return nil, dialErr(sock, err)
	}
	f := &File{backend: Daemon, arena: a, kfd: -1, dc: c, events: map[*Event]struct{}{}}
	if size != 0 {
		r, err := setupRing(c, size)
		if err != nil {
			f.ringErr = fmt.Errorf("the daemon's ring transport could not be set up, writing over the socket: %w", err)
		} else {
			f.ring.Store(r)
		}
	}
	return f, nil
}

// dialErr words a failed connection to the daemon at sock: with what to
// do when no daemon answers there. A client.PermissionError or
// IdentityError already says whose socket it is and what to do, and is
// returned as it is.
func dialErr(sock string, err error) error {
	var pe *client.PermissionError
	var ie *client.IdentityError
	if errors.As(err, &pe) || errors.As(err, &ie) {
		return err
	}
	if sock == "" {
		sock = wire.DefaultSocket()
	}
	e := &Error{Op: "connect", Path: sock, Errno: errnoOf(err)}
	switch e.Errno {
	case unix.ENOENT, unix.ECONNREFUSED:
		e.Reason = "no uetrace daemon there: start one with `uetrace serve`"
	default:
		e.Reason = reasonOf(strings.TrimPrefix(err.Error(), "dial "+sock+": "), e)
	}
	return e
}

func openInProcess(s *subsys.Subsystem) (*File, error) {
	if s == nil {
		s = InProcessSubsystem()
	}
	a, err := privateArena()
	if err != nil {
		return nil, err
	}
	return &File{
		backend: InProcess, arena: a, kfd: -1,
		sys: s, sf: s.Open(), sp: inProcessProcess(s, a), cred: selfCred(),
		events: map[*Event]struct{}{},
	}, nil
}

var (
	procsMu sync.Mutex
	procs   = map[*subsys.Subsystem]*subsys.Process{}
)

// inProcessProcess is this process as a subsystem sees it: one per
// subsystem, shared by every File on it, as a process's user_event_mm is.
func inProcessProcess(s *subsys.Subsystem, a *arena) *subsys.Process {
	procsMu.Lock()
	defer procsMu.Unlock()
	p := procs[s]
	if p == nil {
		p = s.NewProcess(a)
		procs[s] = p
	}
	return p
}

// selfCred is perfmon_capable() of this process.
func selfCred() subsys.Cred { return subsys.Cred{PerfmonCapable: caps.PerfmonCapable(0)} }

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
	var idx uint32
	switch f.backend {
	case Kernel:
		err = onRegisterThread(func() error { return abi.RegisterName(f.kfd, &reg, cmd) })
		idx = reg.WriteIndex
	case Daemon:
		var ret int64
		idx, ret, err = f.dc.Register(reg.Bytes(), cmd, false)
		if err == nil && ret != 0 {
			err = abi.RetError(ret)
		}
	case InProcess:
		idx, err = f.sf.Register(f.sp, f.cred, subsys.RegisterArgs{Reg: reg.Bytes(), Name: cmd})
	}
	if err != nil {
		f.arena.release(slot)
		return nil, wrapErr("register", "", cmd, err)
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
	var err error
	switch f.backend {
	case Kernel:
		err = abi.Delete(f.kfd, name)
	case Daemon:
		err = f.dc.Delete(name)
	case InProcess:
		err = f.sf.Delete(name, f.cred)
	}
	if err != nil {
		return wrapErr("delete", "", name, err)
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
	switch f.backend {
	case Kernel:
		errs = append(errs, unix.Close(f.kfd))
	case Daemon:
		// The daemon delivers what the ring holds before it closes the
		// connection; the mapping goes when no Write uses it any more.
		// Records dropped and not yet told are told first, making room
		// in a full ring if need be.
		if r := f.ring.Load(); r != nil {
			r.stopRetry()
			r.tell(f.dc) // what cannot be told stays in Event.Dropped

		}
		f.ring.Store(nil)
		errs = append(errs, f.dc.Close())
	case InProcess:
		errs = append(errs, f.sf.Close())
	}
	return errors.Join(errs...)
}

// Hangup returns a channel closed when the daemon a File of the daemon
// backend is connected to hangs up — it exited, and the File's
// registrations went with it — or when the File is closed. On the other
// backends, whose registrations live as long as the File, it is nil:
// never ready.
func (f *File) Hangup() <-chan struct{} {
	if f.backend != Daemon {
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
	// lostPending are dropped records the daemon has not been told of.
	lostPending atomic.Uint64
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
	name, _, _ := strings.Cut(strings.TrimLeft(e.cmd, " \t"), " ")
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

// writev writes iov, the write index and the payload, to the daemon or the
// in-process subsystem.
func (f *File) writev(iov [][]byte) error {
	// Who and where without a system call each (internal/stamp).
	tid, cpu := stamp.TidCPU()
	if f.backend == Daemon {
		_, err := f.dc.Writev(tid, int(cpu), iov...)
		return err
	}
	_, err := f.sf.Writev(subsys.Writer{PID: tid, TGID: int32(pid), Comm: comm(), CPU: int(cpu)}, iov...)
	return err
}

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
		runtime.KeepAlive(r)
		if ok {
			return err
		}
	}
	var err error
	switch f.backend {
	case Kernel:
		err = kernelWritev(f.kfd, e.index, payload)
	default:
		// The index and the payload slices in one stack array, filled by a
		// loop: copy() — or a helper taking the array by pointer — makes
		// escape analysis send them, and the caller's buffers, to the heap.
		// A small array for the usual few slices: the array is zeroed on
		// every write.
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
			err = f.writev(iov[:n])
			break
		}
		var iov [maxIov + 1][]byte
		iov[0] = idx[:]
		n := 1
		for _, p := range payload {
			iov[n] = p
			n++
		}
		err = f.writev(iov[:n])
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EBADF) {
		return e.disabled
	}
	return wrapErr("write", "", e.Name(), err)
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
		return wrapErr("encode", "", e.Name(), err)
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
	var err error
	switch f.backend {
	case Kernel:
		err = onRegisterThread(func() error { return abi.Unregister(f.kfd, &un) })
	case Daemon:
		err = f.dc.Unregister(un.Bytes())
	case InProcess:
		err = f.sf.Unregister(f.sp, un.Bytes())
	}
	if err != nil {
		// The bit may still be written: never hand the slot out again.
		return wrapErr("unregister", "", e.Name(), err)
	}
	f.arena.release(e.slot)
	return nil
}

var pid = os.Getpid()

var (
	commOnce sync.Once
	commStr  string
)

func comm() string {
	commOnce.Do(func() {
		b, _ := os.ReadFile("/proc/self/comm")
		commStr = strings.TrimSuffix(string(b), "\n")
		if commStr == "" {
			commStr = "<...>"
		}
	})
	return commStr
}
