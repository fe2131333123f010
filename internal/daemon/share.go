package daemon

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/subsys"
)

// A Share is one process's share of a user_events_data opened through FUSE,
// set up by the interposer preloaded into it (package preload): a ring set
// the process publishes its writes into, one ring per CPU index, which the
// drainers drain as they drain a connection's set (drainers.attach) — and
// hand to a session's reader as they hand a connection's (handover.go) —
// and the validation table the daemon keeps for it, from which the
// process answers its writes without asking. The table says what the
// process answers, never what the daemon delivers: every record is checked
// again at delivery as a hostile client's (subsys.File.Deliver), its write
// index resolved in this file only, its process the FUSE caller's.
type Share struct {
	s       *Server
	set     *ringSet
	table   []byte   // the table's memfd, mapped read-write here
	nslots  uint32   // slots of the table
	ringMax uint32   // the longest payload a record of a ring may carry
	words   []uint32 // each slot's word less its status: what Status rewrites with the new one
	stop    func()   // the file's watch
	uid     uint32   // whose Limits.SharedKBPerUID the set and table count in
	bytes   int64    // the table's, counted there (the set's: set.shared)
	once    sync.Once
}

// maxTableSlots bounds a share's table: the write indexes of one file the
// ring path serves (more go through FUSE). The library asks for
// preload.TableSlots.
const maxTableSlots = 4096

// Rings is R, the rings of the ring set a connection or a FUSE share
// shares: the drainers' count (the Hello reply's; UET_IOC_ID's for the
// interposer).
func (s *Server) Rings() int { return s.drainers.n }

// FUSEShare takes the share a process set up for f (the interposer's
// UET_IOC_SHARE): set, table and wake are the daemon's own descriptors for
// the ring set's memfd, the table's memfd and the set's wake eventfd,
// which the FUSE server took from the calling process itself
// (procmem.Mem.GetFD) — FUSEShare takes them over, closing them whatever
// happens. w is the process as the FUSE server found it (TGID and Comm; a
// record's thread id is checked to be one of its threads), uid and cred
// whose limits the set and table count in (Limits.SharedKBPerUID).
//
// All three are hostile input: the set and its eventfd are checked and
// mapped as a connection's Ring request's are (drainers.attach: sealed
// shmem of R rings of a size the daemon takes, an eventfd); the table must
// be sealed shmem of whole pages holding a header and 1 to maxTableSlots
// slots. Anything else is EINVAL, and changes nothing. The table is filled
// for the write indexes f has before FUSEShare returns, and kept for each
// one it gains before the DIAG_IOCSREG that adds it returns.
func (s *Server) FUSEShare(f *subsys.File, w subsys.Writer, uid uint32, cred subsys.Cred, set, table, wake int) (*Share, error) {
	defer func() {
		for _, fd := range []int{set, table, wake} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	limited := !exempt(uid) && !cred.PerfmonCapable
	reserve := func(n int64) error {
		if err := s.shareMem(uid, limited, "share", n); err != nil {
			s.count.overLimit.Add(1)
			return err
		}
		return nil
	}
	tsize, err := preload.SharedMemfd(table, "share: the table")
	if err != nil {
		return nil, err
	}
	if tsize < preload.TableHeader+preload.SlotSize || tsize%int64(unix.Getpagesize()) != 0 ||
		tsize > int64(preload.TableHeader+maxTableSlots*preload.SlotSize+unix.Getpagesize()) {
		return nil, fmt.Errorf("share: the table's memfd has %d bytes, not whole pages holding a header and 1 to %d slots: %w", tsize, maxTableSlots, unix.EINVAL)
	}
	if err := reserve(tsize); err != nil {
		return nil, err
	}
	sh := &Share{s: s, uid: uid, bytes: tsize}
	ok := false
	defer func() {
		if !ok {
			sh.release()
		}
	}()
	sh.set, err = s.drainers.attach(s.log, f, w, set, wake, reserve)
	if err != nil {
		return nil, fmt.Errorf("share: %w", err)
	}
	sh.table, err = unix.Mmap(table, 0, int(tsize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("share: mapping the table: %w", err)
	}
	sh.nslots = uint32(min((tsize-preload.TableHeader)/preload.SlotSize, maxTableSlots))
	sh.words = make([]uint32, sh.nslots)
	ne := wire.LE
	ne.PutUint32(sh.table[preload.TableOffVersion:], preload.TableVersion)
	ne.PutUint32(sh.table[preload.TableOffNSlots:], sh.nslots)
	ne.PutUint32(sh.table[preload.TableOffSlotSize:], preload.SlotSize)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&sh.table[preload.TableOffMagic])), preload.TableMagic)
	// ringMax is the longest payload a record of the set may carry: one a
	// ring holds, and a drainer reads whole.
	sh.ringMax = uint32(min(sh.set.srcs[0].cons.Size()-shmring.HeaderSize, wire.MaxWrite-4))
	sh.stop = f.Watch(sh)
	ok = true
	s.count.shares.Add(1)
	s.count.sharesOpen.Add(1)
	return sh, nil
}

// Slots is the number of write indexes the table describes.
func (sh *Share) Slots() uint32 { return sh.nslots }

// Wake has the drainers look at their rings now: the process lost its
// eventfd (UET_IOC_WAKE).
func (sh *Share) Wake() {
	for _, d := range sh.s.drainers.d {
		d.poke()
	}
}

// Close releases the share: the set is taken back if it is handed to a
// session's reader, the drainers deliver what the process committed — its
// events still the file's — and let the set go, the table stops
// being written and is unmapped, and the uid gets its memory back. The FUSE
// server calls it when the process exits or execs and at the file's
// release, before the file is closed. Later calls do nothing.
func (sh *Share) Close() {
	sh.once.Do(func() {
		sh.release()
		sh.s.count.sharesOpen.Add(-1)
	})
}

func (sh *Share) release() {
	if sh.stop != nil {
		sh.stop()
	}
	if sh.set != nil {
		sh.s.drainers.close(sh.set)
		sh.s.unshare(sh.uid, sh.set.shared)
	}
	if sh.table != nil {
		unix.Munmap(sh.table)
	}
	sh.s.unshare(sh.uid, sh.bytes)
}

// The table, as subsys.FileWatch: called with the subsystem's lock held,
// each a few stores into the daemon's own mapping, which cannot fault (the
// memfd is sealed against shrinking).

// Index fills the slot of write index idx, then sets its word, ready,
// with a release store (Go's atomic store): the process that loads the
// word sees the fields.
func (sh *Share) Index(idx uint32, ev *subsys.Event, status uint32) {
	if idx >= sh.nslots {
		return // the process writes it through FUSE
	}
	slot := sh.table[preload.TableHeader+int(idx)*preload.SlotSize:][:preload.SlotSize]
	def := ev.Def()
	ne := wire.LE
	minSize := ^uint32(0) // no payload is long enough
	if def.MinSize >= 0 {
		minSize = uint32(def.MinSize)
	}
	locs, flags := slotLocs(def)
	ne.PutUint32(slot[preload.SlotOffMinSize:], minSize)
	ne.PutUint32(slot[preload.SlotOffRingMax:], sh.ringMax)
	ne.PutUint16(slot[preload.SlotOffTypeID:], uint16(ev.ID()))
	for i := range preload.SlotLocs {
		var l uint32
		if i < len(locs) {
			l = locs[i]
		}
		ne.PutUint32(slot[preload.SlotOffLoc+4*i:], l)
	}
	sh.words[idx] = preload.SlotWord(0, uint8(len(locs)), flags)
	sh.Status(idx, status)
}

// Status rewrites the slot's word with the event's new status. While a
// synchronous consumer is attached (subsys.WatchSync: a program reading a
// perf ring it maps, which sees a record when the write returns or never),
// the slot says SlotFUSE: the process writes the event through FUSE, whose
// answer comes once the record is delivered.
func (sh *Share) Status(idx uint32, status uint32) {
	if idx >= sh.nslots {
		return
	}
	w := sh.words[idx] | (status&0xff)<<8
	if status&subsys.WatchSync != 0 {
		w |= preload.SlotFUSE << 24
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&sh.table[preload.TableHeader+int(idx)*preload.SlotSize+preload.SlotOffWord])), w)
}

// slotLocs are an event's __data_loc and __rel_loc fields as the table's
// loc rules, or flags SlotFUSE where they do not fit one: more than
// preload.SlotLocs, or one at an offset over 16 bits.
func slotLocs(def *eventdef.Event) ([]uint32, uint8) {
	var locs []uint32
	for i := range def.Fields {
		f := &def.Fields[i]
		if f.Kind != eventdef.DataLoc && f.Kind != eventdef.RelLoc {
			continue
		}
		if len(locs) == preload.SlotLocs || f.Offset < 0 || f.Offset > 0xffff {
			return nil, preload.SlotFUSE
		}
		l := uint32(f.Offset)
		if f.Kind == eventdef.RelLoc {
			l |= preload.LocRel
		}
		if f.CString {
			l |= preload.LocChar
		}
		locs = append(locs, l)
	}
	return locs, 0
}
