package subsys

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/subsys/ftrace"
	"github.com/uetrace/uetrace/internal/subsys/tracefilter"
)

// Registration flags (include/uapi/linux/user_events.h).
const (
	RegPersist     = abi.RegPersist     // USER_EVENT_REG_PERSIST: the event outlives its users
	RegMultiFormat = abi.RegMultiFormat // USER_EVENT_REG_MULTI_FORMAT: one tracepoint per (name, format)
	regMax         = abi.RegMax         // USER_EVENT_REG_MAX: this and above are invalid
)

// TASK_SIZE_MAX of x86-64 with 4-level and 5-level paging: the values of
// Options.UserAddrMax.
const (
	UserAddrMax4Level = 1<<47 - 4096
	UserAddrMax5Level = 1<<56 - 4096
)

// DefaultMaxEvents is the default of /proc/sys/kernel/user_events_max.
const DefaultMaxEvents = 32768

// DefaultFirstID and DefaultLastID bound the trace event type IDs a
// Subsystem hands out by default, the highest free first: 16384..32767,
// where no kernel hands out its own and KernelShark's signed 16-bit event
// ids reach (see the package doc).
const (
	DefaultFirstID = 1 << 14
	DefaultLastID  = 1<<15 - 1
)

// Options configure a Subsystem. The zero value gives Linux's defaults.
type Options struct {
	// MaxEvents is user_events_max (0: DefaultMaxEvents).
	MaxEvents int
	// LastID is the first trace event type ID handed out, the highest
	// (0: DefaultLastID); IDs go down from it, the highest free one first
	// (see the package doc).
	LastID int
	// FirstID is the lowest ID handed out (0: DefaultFirstID).
	FirstID int
	// NumCPU is the number of CPUs the trace buffer has (0: 1).
	NumCPU int
	// BufferKB is the trace buffer size per CPU in KiB. 0 starts with
	// Linux's unexpanded boot-time buffer, which grows to 1408 KiB when
	// the first event is enabled.
	BufferKB int
	// MaxBufferKB caps what buffer_size_kb may be set to, per CPU (0: 256
	// MiB). Linux fails a resize it cannot allocate with ENOMEM; a daemon
	// must not let one client make it allocate without bound, so larger
	// sizes are ENOMEM here.
	MaxBufferKB int
	// UserAddrMax is the highest enable_addr DIAG_IOCSREG accepts before
	// EFAULT: x86-64's USER_PTR_MAX, TASK_SIZE_MAX of the machine's paging
	// mode (0: 1<<47 - 4096, 4-level paging; 5-level is 1<<56 - 4096).
	UserAddrMax uint64
	// Clock returns the trace clock in nanoseconds (nil: CLOCK_MONOTONIC,
	// like the kernel's "local" clock since boot).
	Clock func() uint64
}

// Cred is what the kernel checks of a caller: perfmon_capable(), i.e.
// CAP_PERFMON or CAP_SYS_ADMIN in its effective set. PERSIST registration,
// "u:" creates and deletes of persistent events need it (EPERM otherwise).
type Cred struct {
	PerfmonCapable bool
}

// Subsystem is one user_events group: every event, process and consumer.
type Subsystem struct {
	opts Options

	// mu is the kernel's event_mutex and reg_mutex in one: it guards the
	// registry, reference counts, enablers and consumer attachment. The
	// write path does not take it.
	mu       sync.Mutex
	buckets  [256][]*Event // register_table; newest first in each bucket
	created  []*Event      // dynamic_events order: creation order
	nEvents  int           // current_user_events
	maxEv    int           // user_events_max
	multiID  uint64        // the group's multi_id counter
	ids      idAllocator
	sessions []*Session // perf-like sessions, for Follow

	sysFilters map[string]tracefilter.SystemState // events/<system>/filter
	errLog     []errLogEntry                      // error_log, oldest first

	trace *traceBuffer

	stats Stats
	dirty []*Process // processes with enable bits to write at unlock (enablewrite.go)

	syncHooks     hookList[func(Scope)] // run before a state change (enablewrite.go)
	countHooks    hookList[func()]      // run before the events' counts are read (AppendCounts)
	handed        map[*File]struct{}    // Files handed to sessions' readers (handover.go)
	statusWatches []*statusWatch        // v10 status pages (v10.go)
}

// Stats count what the subsystem did that no caller sees as an error.
type Stats struct {
	// EnableWriteFailures counts enable-bit updates a process's Memory
	// refused after registration (the kernel would retry from a worker).
	EnableWriteFailures uint64
}

// New returns an empty Subsystem.
func New(opts Options) *Subsystem {
	if opts.MaxEvents == 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.FirstID == 0 {
		opts.FirstID = DefaultFirstID
	}
	if opts.LastID == 0 {
		opts.LastID = DefaultLastID
	}
	if opts.UserAddrMax == 0 {
		opts.UserAddrMax = UserAddrMax4Level
	}
	if opts.MaxBufferKB == 0 {
		opts.MaxBufferKB = 256 << 10
	}
	if opts.NumCPU == 0 {
		opts.NumCPU = 1
	}
	if opts.Clock == nil {
		opts.Clock = ftrace.LocalClock
	}
	s := &Subsystem{opts: opts, maxEv: opts.MaxEvents}
	s.ids = idAllocator{first: opts.FirstID, last: opts.LastID}
	s.trace = newTraceBuffer(s)
	return s
}

// Now is the trace clock (Options.Clock): the time records are stamped
// with.
func (s *Subsystem) Now() uint64 { return s.opts.Clock() }

// NumCPU is the number of CPUs the subsystem was made for, its trace
// buffer's: a writer on CPU c writes into buffer c mod NumCPU.
func (s *Subsystem) NumCPU() int { return s.opts.NumCPU }

// EventByID returns the event whose trace event type ID is id, or nil.
func (s *Subsystem) EventByID(id int) *Event {
	s.mu.Lock()
	defer s.unlock()
	var found *Event
	s.eachEvent(func(e *Event) {
		if e.id == id && !e.deleted {
			found = e
		}
	})
	return found
}

// Stats returns the counters.
func (s *Subsystem) Stats() Stats {
	s.mu.Lock()
	defer s.unlock()
	return s.stats
}

// MaxEvents is /proc/sys/kernel/user_events_max.
func (s *Subsystem) MaxEvents() int {
	s.mu.Lock()
	defer s.unlock()
	return s.maxEv
}

// SetMaxEvents sets user_events_max. Lowering it below the number of events
// deletes nothing; it only makes further creations fail with EMFILE.
func (s *Subsystem) SetMaxEvents(n int) {
	s.mu.Lock()
	s.maxEv = n
	s.unlock()
}

// Status bits of an event: what is attached to it (user_event_reg).
const (
	StatusFtrace = 1 << 0 // EVENT_STATUS_FTRACE
	StatusPerf   = 1 << 1 // EVENT_STATUS_PERF
	StatusOther  = 1 << 7 // EVENT_STATUS_OTHER
)

// Event is one registered user event: a tracepoint.
type Event struct {
	s        *Subsystem
	def      *eventdef.Event
	tp       string // tracepoint name: Name, or Name.<hexid> for multi-format
	id       int
	persist  bool
	multi    bool
	refs     int // under s.mu
	deleted  bool
	enablers map[*enabler]struct{} // every process's enablers of this event
	watches  []indexWatch          // the FileWatches of files that have it (watch.go); under s.mu

	// The write path reads these without s.mu.
	status   atomic.Uint32 // Status* bits; non-zero means enabled
	ftrace   atomic.Bool   // the ftrace probe is registered (enable file)
	sessions atomic.Pointer[[]*Session]
	// filter is the ftrace filter in force (nil: none); filterState is
	// what the filter file shows, under s.mu.
	filter      atomic.Pointer[tracefilter.Filter]
	filterState tracefilter.State
	// counts are the records written to it (write returned their length)
	// and those of them a session then dropped (its buffer full, or the
	// record over perf's size limit) or that a writer's ring dropped
	// (File.WriteLost), in shards by the writer's CPU: as
	// the per-CPU trace rings do, this keeps writers on different CPUs
	// from sharing a cache line. Linux keeps no such per-event count: they
	// are uetrace's own, for FileCounts.
	counts []eventCounts

	// Consumer counts, under s.mu.
	perfUsers  int
	otherUsers int
	syncUsers  int  // of the sessions, those SessionOptions.Synchronous
	wasEnabled bool // the ftrace probe was ever registered (EVENT_FILE_FL_WAS_ENABLED)
}

// eventCounts is one shard of an event's counts, a cache line of its own
// (64 bytes on amd64 and most arm64).
type eventCounts struct {
	written atomic.Uint64
	dropped atomic.Uint64
	_       [64 - 16]byte
}

// maxCountShards bounds an event's count shards (a cache line each): past
// it, CPUs share shards.
const maxCountShards = 16

// newCounts makes the count shards of an event: a power of two, so that
// a CPU's shard is a mask away.
func newCounts(numCPU int) []eventCounts {
	n := 1
	for n < numCPU && n < maxCountShards {
		n *= 2
	}
	return make([]eventCounts, n)
}

// shard is the count shard of a writer on cpu.
func (e *Event) shard(cpu int) *eventCounts {
	return &e.counts[uint(cpu)&uint(len(e.counts)-1)]
}

// Counts returns the records written to the event and those dropped. They
// saturate at the largest uint64 rather than wrap (satAdd).
func (e *Event) Counts() (written, dropped uint64) {
	for i := range e.counts {
		written = satAdd(written, e.counts[i].written.Load())
		dropped = satAdd(dropped, e.counts[i].dropped.Load())
	}
	return written, dropped
}

// satAdd is a + b, or the largest uint64 where that would wrap. The counts
// a client's number feeds (File.WriteLost's n) add so: a claim, however
// large, can never wrap a count to less than the losses others added —
// the daemon bounds the claims themselves (daemon.RingStats.LostCapped);
// this keeps any caller's from wrapping.
func satAdd(a, b uint64) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return sum
}

// satAddAtomic adds n to c, saturating (satAdd).
func satAddAtomic(c *atomic.Uint64, n uint64) {
	for {
		old := c.Load()
		if old == math.MaxUint64 || c.CompareAndSwap(old, satAdd(old, n)) {
			return
		}
	}
}

// Name is the registered name (without ".<hexid>").
func (e *Event) Name() string { return e.def.Name }

// Tracepoint is the name tracefs shows: Name for a single-format event,
// Name + ".<hexid>" for a multi-format one.
func (e *Event) Tracepoint() string { return e.tp }

// System is "user_events" or "user_events_multi".
func (e *Event) System() string {
	if e.multi {
		return eventdef.MultiSystem
	}
	return eventdef.System
}

// ID is the event's trace event type: the "ID:" of its format file.
func (e *Event) ID() int { return e.id }

// Def is the event's definition.
func (e *Event) Def() *eventdef.Event { return e.def }

// Persistent reports whether the event was created with PERSIST.
func (e *Event) Persistent() bool { return e.persist }

// MultiFormat reports whether the event was registered with MULTI_FORMAT.
func (e *Event) MultiFormat() bool { return e.multi }

// Status returns the Status* bits: what is attached now.
func (e *Event) Status() uint32 { return e.status.Load() }

// Enabled reports whether anything is attached.
func (e *Event) Enabled() bool { return e.status.Load() != 0 }

// idAllocator hands out the highest free ID of first..last: the kernel's
// IDA for trace event types (alloc_trace_event_type) reused the other way
// round, from the top of the range down, so that no ID is one a kernel
// hands out (see the package doc).
type idAllocator struct {
	first, last int
	used        map[int]bool
	next        int // every ID above next is used
}

func (a *idAllocator) get() (int, bool) {
	if a.used == nil {
		a.used = make(map[int]bool)
		a.next = a.last
	}
	for id := a.next; id >= a.first; id-- {
		if !a.used[id] {
			a.used[id] = true
			a.next = id - 1
			return id, true
		}
	}
	return 0, false
}

func (a *idAllocator) put(id int) {
	delete(a.used, id)
	if id > a.next {
		a.next = id
	}
}
