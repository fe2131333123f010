package ringcheck

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/pidns"
)

// Who wrote a record. The kernel knows: common_pid is current's thread id
// and the record goes to the CPU it runs on. A producer says both — the
// daemon's Write request's arg and flags, a ring record's header — so they
// are checked before they reach anyone's trace:
//
//   - the process is always the connection's SO_PEERCRED pid, never
//     anything the producer says;
//   - a thread id is believed when it is the process's own, a live thread
//     of it (/proc/TGID/task/TID), or an id below pid_max that no live
//     task has — a thread that wrote and exited before its record was
//     read. A live thread of another process, or an id no task can have,
//     is not: the record goes under the process id and is counted as
//     forged. Each id is checked once and remembered, up to MaxTIDs a
//     writer. A check costs two system calls, so a writer's checks are
//     rationed (CheckBurst, then CheckRate a second): a record of an id
//     not yet checked when its writer's ration is spent goes under the
//     process id and is counted unchecked — made-up thread ids cost their
//     producer its records' thread ids, never the reader's time (cycling
//     8 000 of them slowed the daemon's merger, which drained every
//     version-1 ring then, to ~200 000 records a second, every writer's);
//   - a writer in a pid namespace of its own (a container, uetrace run
//     inside one) stamps its records with the ids its namespace gives its
//     threads: each is looked up among the process's threads by its
//     NSpid (pidns.Threads) and delivered under the reader's id for it,
//     as Linux's trace shows the global pid; an id that is none of the
//     process's threads goes under the process id, counted as unchecked
//     (the thread may have exited before its record was read);
//   - a CPU cannot be checked: see CPU.

// MaxTIDs bounds the thread ids a writer remembers as checked.
const MaxTIDs = 4096

// A writer's checks of thread ids: CheckBurst at once, and CheckRate a
// second after that — a program starting thousands of threads at once,
// and hundreds a second after, has every one checked.
const (
	CheckBurst = MaxTIDs
	CheckRate  = 256
)

// Threads decides the thread ids of one process's records. Its methods
// but the counts are one goroutine's.
type Threads struct {
	tgid int32
	tids map[uint32]bool
	// ns, for a process in a pid namespace of its own, maps the ids its
	// namespace gives its threads to the reader's (pidns.Threads).
	ns   map[uint32]int32
	last uint32 // the last thread id accepted
	// checks are the checks left in the ration (CheckBurst at most), as
	// of refilled (nanoseconds on the monotonic clock since start).
	checks   int64
	refilled int64
	// forged counts the records delivered under tgid for a thread id not
	// the process's, unchecked those delivered under it for a thread id
	// not checked, the ration spent; checked the ids checked. Atomic, as
	// a ring's stats read them while its reader reads.
	forged, unchecked, checked atomic.Uint64
}

// start is the origin of Threads's clock.
var start = time.Now()

// Init makes t the check of process tgid's records.
func (t *Threads) Init(tgid int32) {
	t.tgid, t.tids = tgid, map[uint32]bool{}
	t.checks, t.refilled = CheckBurst, int64(time.Since(start))
	if _, own, _ := pidns.Threads(int(tgid)); own && tgid > 0 {
		t.ns = map[uint32]int32{}
	}
}

// Forged, Unchecked and Checked are the counts (see Threads); safe at any
// time.
func (t *Threads) Forged() uint64    { return t.forged.Load() }
func (t *Threads) Unchecked() uint64 { return t.unchecked.Load() }
func (t *Threads) Checked() uint64   { return t.checked.Load() }

// spend takes a check from the ration, refilled at CheckRate a second up
// to CheckBurst, and reports whether there was one. now is
// time.Since(start).
func (t *Threads) spend(now int64) bool {
	if t.checks == 0 {
		n := (now - t.refilled) * CheckRate / int64(time.Second)
		if n <= 0 {
			return false
		}
		t.checks = min(n, CheckBurst)
		t.refilled += n * int64(time.Second) / CheckRate
		if t.checks == CheckBurst {
			t.refilled = now
		}
	}
	t.checks--
	return true
}

// Thread returns the thread id a record of thread tid is delivered under.
func (t *Threads) Thread(tid uint32) int32 {
	if t.ns != nil {
		return t.nsThread(tid)
	}
	if int32(tid) == t.tgid {
		return t.tgid
	}
	if tid == t.last && tid != 0 {
		return int32(tid)
	}
	ok, seen := t.tids[tid]
	if !seen {
		if !t.spend(int64(time.Since(start))) {
			t.unchecked.Add(1)
			return t.tgid
		}
		t.checked.Add(1)
		if len(t.tids) >= MaxTIDs {
			clear(t.tids)
		}
		ok = t.tgid > 0 && int32(tid) > 0 && int(tid) < PIDMax() &&
			(unix.Access("/proc/"+strconv.Itoa(int(t.tgid))+"/task/"+strconv.Itoa(int(tid)), unix.F_OK) == nil ||
				unix.Access("/proc/"+strconv.Itoa(int(tid)), unix.F_OK) != nil)
		t.tids[tid] = ok
	}
	if !ok {
		t.forged.Add(1)
		return t.tgid
	}
	t.last = tid
	return int32(tid)
}

// nsThread is Thread for a process in a pid namespace of its own: tid is
// that namespace's. One look at the process's threads (rationed as a
// check) maps every thread it has then.
func (t *Threads) nsThread(tid uint32) int32 {
	if g, ok := t.ns[tid]; ok {
		return g
	}
	if !t.spend(int64(time.Since(start))) {
		t.unchecked.Add(1)
		return t.tgid
	}
	t.checked.Add(1)
	ids, _, _ := pidns.Threads(int(t.tgid))
	if len(t.ns)+len(ids) > MaxTIDs {
		clear(t.ns)
	}
	for nsid, g := range ids {
		t.ns[uint32(nsid)] = int32(g)
	}
	if g, ok := t.ns[tid]; ok {
		return g
	}
	t.unchecked.Add(1)
	return t.tgid
}

// PIDMax is /proc/sys/kernel/pid_max: thread ids are below it. The
// kernel's ceiling (PID_MAX_LIMIT, 4194304) when it cannot be read.
var PIDMax = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			return v
		}
	}
	return 4 << 20
})
