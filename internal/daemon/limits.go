package daemon

import (
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/subsys"
)

// Limits bound what one client — a connection, and all the connections of
// one uid — can make the daemon hold. A zero field takes its default; a
// negative one means no limit. Root, perfmon-capable callers and the
// daemon's own user are held only to the per-connection limits (Handles;
// and the handshake), as Linux's per-user limits spare CAP_SYS_RESOURCE
// and CAP_IPC_LOCK; ConnsPerUID spares root and the daemon's user.
type Limits struct {
	// ConnsPerUID bounds the connections of one uid, those still shaking
	// hands included (default 1024). Beyond it a connection is answered
	// EMFILE and closed, as inotify_init is beyond max_user_instances; the
	// other uids are served on. Server-wide, Config.MaxConns (ENFILE).
	ConnsPerUID int
	// Handshake is how long a connection may take to send its Hello
	// (default 10 s); then it is closed, and counted.
	Handshake time.Duration
	// Handles bounds the tracefs files and sessions one connection holds
	// open (default 1024): EMFILE beyond, as RLIMIT_NOFILE gives.
	Handles int
	// RegistrationsPerConn bounds one connection's registrations — the
	// events its user_events_data refers to, and the enablers registered
	// through it not unregistered (default 4096) — and
	// RegistrationsPerUID those of a uid: the events all its connections'
	// user_events_data refer to, and the enablers all its processes hold,
	// each (default DefaultRegistrationsPerUID, or a quarter of the
	// Subsystem's user_events_max when the Server is made, if less):
	// ENOMEM beyond, as the kernel's allocations would fail. An event a
	// failed registration left in the file's array, as Linux leaves it
	// (user_events_ref_add comes before user_event_enabler_create), counts
	// as any other. With the default, what one uid holds is at most half
	// of user_events_max — the events its files refer to and those only
	// its enablers hold — so that it cannot take the table within its
	// limits and others, root among them, still register.
	RegistrationsPerConn int
	RegistrationsPerUID  int
	// SessionsPerUID bounds the sessions a uid holds (default 64: EMFILE
	// beyond), and SessionKBPerUID the buffers and rings they hold (default
	// 256 MiB: EPERM beyond, as perf_mmap is beyond perf_event_mlock_kb);
	// a session's buffer counts twice its size, what it may hold with its
	// records' metadata.
	SessionsPerUID  int
	SessionKBPerUID int
	// BufferKB is the largest buffer_size_kb a tracer that is neither root
	// nor perfmon-capable may set (default 16384 per CPU): ENOMEM beyond,
	// as an allocation that fails. Root's is the subsystem's limit.
	BufferKB int
	// SharedKBPerUID bounds the client memory a uid's connections make the
	// daemon map and keep alive — enable-word arenas (at most MaxArena
	// each) and producer rings (wire.MaxRing each) — default 1 GiB: ENOMEM
	// beyond, as io_uring answers rings and registered buffers it would
	// pin for a user over RLIMIT_MEMLOCK (__io_account_mem), the kernel's
	// nearest case of user memory it maps and holds for a client. Linux's
	// own bounds on such memory are lower (RLIMIT_MEMLOCK 8 MiB,
	// perf_event_mlock_kb 516 KiB per CPU) but count pinned pages, while
	// these are the client's own memfd pages, charged to its memory
	// cgroup and swappable; what this bounds is what the daemon keeps
	// mapped for one user: without it, ConnsPerUID connections of
	// MaxArena + wire.MaxRing each, 128 GiB. 1 GiB is some 500 connections of
	// the userevents package's default sizes (a 1 MiB arena per process,
	// a 1 MiB ring per connection), or 8 of the largest.
	SharedKBPerUID int
	// FilesPerUID bounds the files of the tracefs tree served through
	// FUSE (package fusefs) that one uid holds open, directories
	// included (default 4096): EMFILE beyond, as the other per-user
	// counts of open objects (inotify's max_user_instances). Their
	// registrations count with the uid's RegistrationsPerUID (ENOMEM),
	// whether made over the socket or through FUSE.
	FilesPerUID int
}

// Default limits (Limits' zero fields).
const (
	DefaultConnsPerUID          = 1024
	DefaultHandshake            = 10 * time.Second
	DefaultHandles              = 1024
	DefaultRegistrationsPerConn = 4096
	DefaultRegistrationsPerUID  = subsys.DefaultMaxEvents / 4
	DefaultSessionsPerUID       = 64
	DefaultSessionKBPerUID      = 256 << 10
	DefaultBufferKB             = 16 << 10
	DefaultSharedKBPerUID       = 1 << 20
	DefaultFilesPerUID          = 4096
)

// withDefaults fills in the defaults; negative fields become "none" (the
// largest int).
func (l Limits) withDefaults() Limits {
	set := func(v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = int(^uint(0) >> 1)
		}
	}
	set(&l.ConnsPerUID, DefaultConnsPerUID)
	set(&l.Handles, DefaultHandles)
	set(&l.RegistrationsPerConn, DefaultRegistrationsPerConn)
	if l.RegistrationsPerUID < 0 {
		set(&l.RegistrationsPerUID, 0)
	} // 0: New derives it from the Subsystem's user_events_max
	set(&l.SessionsPerUID, DefaultSessionsPerUID)
	set(&l.SessionKBPerUID, DefaultSessionKBPerUID)
	set(&l.BufferKB, DefaultBufferKB)
	set(&l.SharedKBPerUID, DefaultSharedKBPerUID)
	set(&l.FilesPerUID, DefaultFilesPerUID)
	switch {
	case l.Handshake == 0:
		l.Handshake = DefaultHandshake
	case l.Handshake < 0:
		l.Handshake = 1<<63 - 1
	}
	return l
}

// uidUse is what the connections of one uid hold. Guarded by Server.mu.
type uidUse struct {
	conns        int
	regs         int // enablers its processes hold
	refs         int // events its connections' user_events_data refer to
	sessions     int
	sessionBytes int64
	sharedBytes  int64 // arenas and rings mapped (Limits.SharedKBPerUID)
	files        int   // files open through FUSE (Limits.FilesPerUID)
}

// Stats are the daemon's counts of what its clients hold and of what it
// refused them (uetrace status prints them).
type Stats struct {
	Conns      int   // connections served now, those shaking hands included
	Handshakes int   // of those, still shaking hands
	Pending    int   // requests read ahead of a blocking read, held
	Handles    int   // open tracefs files and sessions
	Regs       int   // enablers held (Limits.RegistrationsPerConn)
	Refs       int   // events clients' user_events_data refer to (the same limits)
	Sessions   int   // sessions
	SessionKB  int64 // their buffers and rings
	BufferKB   int   // buffer_size_kb (per CPU)
	SharedKB   int64 // clients' arenas and rings mapped (Limits.SharedKBPerUID)
	FUSEFiles  int   // files open through FUSE (Limits.FilesPerUID)
	RefusedUID int64 // connections refused by Limits.ConnsPerUID
	RefusedAll int64 // by Config.MaxConns
	Timeouts   int64 // connections closed for want of a Hello in time
	Denied     int64 // requests refused EACCES or EPERM by the access model
	OverLimit  int64 // requests refused by a Limits field
	// LostCapped and UncheckedTID are the rings' (RingStats): loss
	// records cut to what their producer could have dropped, and records
	// delivered under their process id, their thread ids unchecked.
	LostCapped, UncheckedTID uint64
	// Shares are the interposer's shares taken since the daemon started
	// (FUSEShare): processes writing a FUSE user_events_data through a
	// ring; SharesOpen those not released yet.
	Shares     uint64
	SharesOpen int64
	// HandOvers are the producers' ring sets handed to sessions' readers
	// since the daemon started (handover.go), HandedNow those not taken
	// back yet, ForcedBack the rings taken from a reader that did not
	// finish its pass within the bound.
	HandOvers, ForcedBack uint64
	HandedNow             int
	// ByUID is each uid's share, for the uids holding anything.
	ByUID map[uint32]UIDStats
}

// UIDStats is one uid's share of Stats.
type UIDStats struct {
	Conns, Regs, Sessions int
	Refs                  int
	SessionKB             int64
	SharedKB              int64
	FUSEFiles             int
}

// counters are the Server's refusal counts.
type counters struct {
	refusedUID, refusedAll, timeouts, denied, overLimit atomic.Int64
	pending                                             atomic.Int64
	shares                                              atomic.Uint64
	sharesOpen                                          atomic.Int64
}

// Stats returns the daemon's counts.
func (s *Server) Stats() Stats {
	st := Stats{
		RefusedUID: s.count.refusedUID.Load(),
		RefusedAll: s.count.refusedAll.Load(),
		Timeouts:   s.count.timeouts.Load(),
		Denied:     s.count.denied.Load(),
		OverLimit:  s.count.overLimit.Load(),
		Pending:    int(s.count.pending.Load()),
		Shares:     s.count.shares.Load(),
		SharesOpen: s.count.sharesOpen.Load(),
		HandOvers:  s.handOvers.handed.Load(),
		ForcedBack: s.handOvers.forced.Load(),
		ByUID:      map[uint32]UIDStats{},
	}
	s.handOvers.mu.Lock()
	st.HandedNow = len(s.handOvers.live)
	s.handOvers.mu.Unlock()
	s.mu.Lock()
	st.Conns = len(s.conns)
	for c := range s.conns {
		if !c.shook.Load() {
			st.Handshakes++
		}
		st.Handles += int(c.nhandles.Load())
	}
	for uid, u := range s.uids {
		st.Regs += u.regs
		st.Refs += u.refs
		st.Sessions += u.sessions
		st.SessionKB += u.sessionBytes >> 10
		st.SharedKB += u.sharedBytes >> 10
		st.FUSEFiles += u.files
		st.ByUID[uid] = UIDStats{Conns: u.conns, Regs: u.regs, Refs: u.refs, Sessions: u.sessions, SessionKB: u.sessionBytes >> 10,
			SharedKB: u.sharedBytes >> 10, FUSEFiles: u.files}
	}
	s.mu.Unlock()
	st.BufferKB = s.bufferKB()
	rs := s.RingStats()
	st.LostCapped, st.UncheckedTID = rs.LostCapped, rs.UncheckedTID
	return st
}

// bufferKB reads buffer_size_kb.
func (s *Server) bufferKB() int {
	b, err := s.sys.FS().ReadFile(subsys.FileBufferSizeKB, subsys.Cred{})
	if err != nil {
		return 0
	}
	// "1408\n", or "7 (expanded: 1408)\n" before the first enable.
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	kb, _ := strconv.Atoi(f[0])
	return kb
}

// AppendText appends the counts as "name value" lines, the per-uid ones
// last. It is the Stats request's reply, read by name: a count added later
// is a line added before the per-uid ones and a "name value" pair added at
// the end of the per-uid line, so that what read the older text reads the
// newer.
func (st Stats) AppendText(b []byte) []byte {
	add := func(name string, v any) { b = fmt.Appendf(b, "%s %v\n", name, v) }
	add("connections", st.Conns)
	add("handshaking", st.Handshakes)
	add("refused_per_uid", st.RefusedUID)
	add("refused_total", st.RefusedAll)
	add("handshake_timeouts", st.Timeouts)
	add("pending_messages", st.Pending)
	add("handles", st.Handles)
	add("registrations", st.Regs)
	add("sessions", st.Sessions)
	add("session_kb", st.SessionKB)
	add("buffer_size_kb", st.BufferKB)
	add("denied", st.Denied)
	add("over_limit", st.OverLimit)
	add("shared_kb", st.SharedKB)
	add("fuse_files", st.FUSEFiles)
	add("event_refs", st.Refs)
	add("ring_lost_capped", st.LostCapped)
	add("ring_unchecked_tid", st.UncheckedTID)
	add("interposer_shares", st.Shares)
	add("interposer_shares_open", st.SharesOpen)
	add("handovers", st.HandOvers)
	add("handovers_now", st.HandedNow)
	add("handovers_forced", st.ForcedBack)
	uids := make([]uint32, 0, len(st.ByUID))
	for u := range st.ByUID {
		uids = append(uids, u)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, u := range uids {
		x := st.ByUID[u]
		b = fmt.Appendf(b, "uid %d connections %d registrations %d sessions %d session_kb %d shared_kb %d fuse_files %d event_refs %d\n",
			u, x.Conns, x.Regs, x.Sessions, x.SessionKB, x.SharedKB, x.FUSEFiles, x.Refs)
	}
	return b
}

// limited reports whether the per-uid limits hold a connection: not for
// root, perfmon-capable callers or the daemon's own user (who may stop it).
func (c *conn) limited() bool { return !exempt(c.uid) && !c.cred.PerfmonCapable }

// exempt reports whether uid is spared the per-uid limits whatever its
// capabilities: root, and the daemon's own user.
func exempt(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// overLimit counts a refusal and returns err.
func (c *conn) overLimit(err error) error {
	c.s.count.overLimit.Add(1)
	c.log.Info("limit reached", "err", err)
	return err
}

// denied counts an access refusal and returns err.
func (c *conn) denied(err error) error {
	c.s.count.denied.Add(1)
	c.log.Info("access denied", "err", err)
	return err
}

// addRegs accounts n more registrations through this connection (n may be
// negative), checking its limit when n > 0. Its uid's are the enablers its
// process holds, charged by the process (Server.charge) whichever
// connection made them, until the process's last connection goes.
func (c *conn) addRegs(n int) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 && c.limited() && c.regs+n > s.limits.RegistrationsPerConn {
		return fmt.Errorf("register: this connection holds %d registrations, the most one may (`uetrace serve --max-registrations`): %w", c.regs, unix.ENOMEM)
	}
	c.regs += max(n, -c.regs)
	return nil
}

// chargeRefs is the Charge of the connection's user_events_data
// (subsys.OpenCharged): the events it refers to, those a failed
// registration left there included, count in the connection's
// RegistrationsPerConn and its uid's RegistrationsPerUID. Called with the
// Subsystem's lock held.
func (c *conn) chargeRefs(n int, force bool) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.uids[c.uid]
	if n > 0 && !force && c.limited() {
		var err error
		switch {
		case c.refs+n > s.limits.RegistrationsPerConn:
			err = fmt.Errorf("register: this connection's user_events_data refers to %d events, the most one may (`uetrace serve --max-registrations`): %w", c.refs, unix.ENOMEM)
		case u.refs+n > s.limits.RegistrationsPerUID:
			err = fmt.Errorf("register: uid %d's connections refer to %d events, the most one user's may (`uetrace serve --max-registrations-per-uid`): %w", c.uid, u.refs, unix.ENOMEM)
		}
		if err != nil {
			s.count.overLimit.Add(1)
			c.log.Info("limit reached", "err", err)
			return err
		}
	}
	c.refs += n
	u.refs += n
	return nil
}

// share accounts bytes more of the client memory the connection's uid makes
// the daemon map (what: "arena", "ring"), or less (bytes < 0). What would
// go over Limits.SharedKBPerUID is refused ENOMEM.
func (c *conn) share(what string, bytes int64) error {
	return c.s.shareMem(c.uid, c.limited(), what, bytes)
}

// shareMem accounts to uid bytes more of client memory the daemon maps
// (fewer when negative), checking Limits.SharedKBPerUID if limited: a
// connection's arenas and ring, and the rings and tables of processes
// writing through the interposer (FUSEShare).
func (s *Server) shareMem(uid uint32, limited bool, what string, bytes int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.uids[uid]
	if u == nil {
		u = &uidUse{}
		s.uids[uid] = u
	}
	if bytes > 0 && limited && u.sharedBytes+bytes > int64(s.limits.SharedKBPerUID)<<10 {
		hint := ""
		if what != "arena" {
			hint = "; or share a smaller ring: $UETRACE_RING_KB"
		}
		s.tidy(uid, u)
		return fmt.Errorf("%s: uid %d shares %d KiB of memory with the daemon, and %d KiB more is over the %d KiB one user may, as io_uring refuses rings over RLIMIT_MEMLOCK (`uetrace serve --shared-kb`%s): %w",
			what, uid, u.sharedBytes>>10, bytes>>10, s.limits.SharedKBPerUID, hint, unix.ENOMEM)
	}
	u.sharedBytes += bytes
	return nil
}

// unshare gives back to uid bytes of client memory the daemon unmapped.
func (s *Server) unshare(uid uint32, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.uids[uid]; u != nil {
		u.sharedBytes -= bytes
		s.tidy(uid, u)
	}
}

// tidy forgets a uid that holds nothing any more. s.mu is held.
func (s *Server) tidy(uid uint32, u *uidUse) {
	if *u == (uidUse{}) {
		delete(s.uids, uid)
	}
}

// sessionBytes is what a session of buffer bytes holds at most: the raw
// bytes of its records and, for the smallest records, as much again of
// their metadata (subsys.SessionOptions.BufferBytes).
func sessionBytes(buffer uint32) int64 {
	if buffer == 0 {
		buffer = 1 << 20 // subsys.SessionOptions' default
	}
	return 2 * int64(buffer)
}

// addSession accounts n sessions more (or fewer, n < 0) holding bytes more
// (or fewer): a session made or closed, a ring made for one. What would
// go over the uid's limits is refused.
func (c *conn) addSession(n int, bytes int64) error {
	s := c.s
	s.mu.Lock()
	u := s.uids[c.uid]
	if c.limited() {
		if n > 0 && u.sessions+n > s.limits.SessionsPerUID {
			s.mu.Unlock()
			return fmt.Errorf("session: uid %d holds %d sessions, the most one user may (`uetrace serve --max-sessions`): %w", c.uid, u.sessions, unix.EMFILE)
		}
		if bytes > 0 && u.sessionBytes+bytes > int64(s.limits.SessionKBPerUID)<<10 {
			s.mu.Unlock()
			return fmt.Errorf("session: uid %d's sessions hold %d KiB, and %d KiB more is over the %d KiB one user may lock, as perf_event_mlock_kb limits perf's buffers (`uetrace serve --session-kb`): %w",
				c.uid, u.sessionBytes>>10, bytes>>10, s.limits.SessionKBPerUID, unix.EPERM)
		}
	}
	u.sessions += n
	u.sessionBytes += bytes
	s.mu.Unlock()
	// A session's buffer and ring are mappings of their own, unmapped
	// when it closes (subsys.SessionOptions.BufferBytes): nothing to hand
	// back here.
	return nil
}

// giveBack hands the pages the daemon no longer uses back to the system
// now, rather than when Go's scavenger gets to them: after a smaller
// buffer_size_kb and when the daemon becomes idle (idle).
func (s *Server) giveBack() {
	debug.FreeOSMemory()
}

// idle gives the daemon's free pages back to the system, in the
// background, when it has become idle: its last client gone (what
// sessions, requests and tracefs handles held is garbage then), and its
// drainers stopped with no client left (the rings they were still
// draining).
// Rather than keep the daemon's busiest size while it idles. One at a
// time, as clients come and go in bursts; but a call while one is under
// way makes it run once more after, since what became garbage in between
// may have been missed.
func (s *Server) idle() {
	s.freeMore.Store(true)
	if !s.freeing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for s.freeMore.Swap(false) {
			s.giveBack()
		}
		s.freeing.Store(false)
		if s.freeMore.Load() {
			s.idle() // a call between the last Swap and the Store
		}
	}()
}

// idleIfNoConns is idle when no client is connected: a drainer or the
// waker ends after the last client left, having let go
// of the last rings — memory the idle when that client left could not
// give back yet.
func (s *Server) idleIfNoConns() {
	s.mu.Lock()
	none := len(s.conns) == 0
	s.mu.Unlock()
	if none {
		s.idle()
	}
}

// writeBufferSize is a write to buffer_size_kb: over Limits.BufferKB is
// ENOMEM for a tracer that is neither root nor perfmon-capable; a smaller
// buffer than before hands the pages it gave up back to the system at
// once, as the kernel frees them.
func (c *conn) writeBufferSize(fh *subsys.Handle, body []byte) bool {
	if c.limited() {
		t := strings.TrimSuffix(strings.TrimPrefix(string(body[:min(len(body), 66)]), "+"), "\n")
		if kb, err := strconv.ParseUint(t, 10, 64); err == nil && kb > uint64(c.s.limits.BufferKB) {
			return c.result(0, c.overLimit(fmt.Errorf("buffer_size_kb %d is over the %d KiB a tracer without CAP_PERFMON may set (`uetrace serve --max-buffer-kb`): %w",
				kb, c.s.limits.BufferKB, unix.ENOMEM)))
		}
	}
	c.s.Flush()
	before := c.s.bufferKB()
	n, err := fh.Write(body)
	if err == nil {
		if after := c.s.bufferKB(); after < before {
			c.s.giveBack()
		}
	}
	return c.result(int64(n), err)
}

// stats serves wire.OpStats.
func (c *conn) stats() bool {
	st := c.s.Stats()
	if !c.tracer {
		own, ok := st.ByUID[c.uid]
		st.ByUID = map[uint32]UIDStats{}
		if ok {
			st.ByUID[c.uid] = own
		}
	}
	out := st.AppendText(wire.AppendHeader(c.out[:0], wire.OpData, 0, 0))
	if len(out) > wire.MaxMessage {
		out = out[:wire.MaxMessage]
	}
	c.out = out[:0]
	return c.reply(out)
}
