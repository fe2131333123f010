package harness

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// The daemon-ring backend is the daemon backend with the ring transport:
// each user_events_data connection shares a ring set (internal/shmring's
// sets, of the daemon's ring count) with the daemon, and a write goes where the userevents library's daemon
// backend with Options.Transport = RingTransport sends it
// (userevents.Event.ringWrite): checked here with the kernel's rules —
// eventdef's CheckSize and Validate, in user_events_write_core's order —
// and published into the ring of the CPU it runs on when it passes, the errno returned at once
// when it does not. Like the library, the writer trusts its own enable word
// for "is anything attached" (EBADF). What the library cannot write through
// the ring goes over the socket, as it does there: a write whose index this
// connection did not register (a library never has one), a record the
// daemon's type id decides (a __data_loc pointing into the header) or one
// too large to check here, and — since the library knows the word of each
// event it registered — a write of an event whose every enabler was
// unregistered.
//
// Everything else — registration, tracefs, perf sessions — is the daemon
// backend's. What the scenarios then read is what the daemon delivered
// from the rings: its flush before each trace, session or tracefs access
// must make a write that returned visible, as the kernel's synchronous
// write is.

// ringSize is each ring of a connection's set: the scenarios write a few
// records.
const ringSize = 64 << 10

// maxCheckedRecord is userevents' maxStackRecord: the largest record with
// __data_loc or __rel_loc fields checked on the client side.
const maxCheckedRecord = 512

// ringData is a user_events_data of the daemon-ring backend.
type ringData struct {
	daemonData
	p      *daemonProc
	ring   *shmring.SetProducer
	events map[uint32]*ringEvent // what this connection registered
}

// ringEvent is an event a ringData registered: its fields, and the enable
// words it knows for it.
type ringEvent struct {
	def      *eventdef.Event
	enablers []enabler
}

type enabler struct {
	addr uint64
	bit  uint8
	size uint8 // 4 or 8
}

// openRing makes c a connection of the daemon-ring backend: it shares a
// new ring, which must succeed — a backend that silently wrote over the
// socket would test nothing.
func (d *daemonProc) openRing(c *client.Conn) (dataFile, error) {
	ring, err := shmring.CreateSet(c.Rings(), ringSize)
	if err != nil {
		return nil, err
	}
	if err := c.ShareRingSet(ring); err != nil {
		ring.Close()
		return nil, fmt.Errorf("the daemon refused the ring: %w", err)
	}
	f := &ringData{daemonData: daemonData{c: c}, p: d, ring: ring, events: map[uint32]*ringEvent{}}
	d.ringFiles = append(d.ringFiles, f)
	return f, nil
}

func (f *ringData) reg(raw []byte, name string, nameFault bool) (uint32, error) {
	idx, err := f.daemonData.reg(raw, name, nameFault)
	if err != nil {
		return idx, err
	}
	ev := f.events[idx]
	if ev == nil {
		ev = &ringEvent{}
		// The command the daemon accepted; one it parses differently
		// from eventdef (it does not) leaves the event to the socket.
		ev.def, _ = eventdef.Parse(cut(name))
		f.events[idx] = ev
	}
	// The daemon took the struct, so its first 16 bytes were there; an
	// enable word outside the page would have been refused.
	if len(raw) >= 16 {
		e := enabler{addr: binary.LittleEndian.Uint64(raw[8:]), bit: raw[4], size: raw[5]}
		if f.p.wordAt(e) != nil {
			ev.enablers = append(ev.enablers, e)
		}
	}
	return idx, nil
}

// unreg drops the enabler from every file of the process: DIAG_IOCSUNREG
// removes the process's enabler at that address and bit, whichever file
// registered it.
func (f *ringData) unreg(raw []byte) error {
	if err := f.daemonData.unreg(raw); err != nil || len(raw) < 16 {
		return err
	}
	addr, bit := binary.LittleEndian.Uint64(raw[8:]), raw[4]
	for _, g := range f.p.ringFiles {
		for _, ev := range g.events {
			kept := ev.enablers[:0]
			for _, e := range ev.enablers {
				if e.addr != addr || e.bit != bit {
					kept = append(kept, e)
				}
			}
			ev.enablers = kept
		}
	}
	return nil
}

func (f *ringData) writev(iov []iovec) (int, error) {
	bufs := make([][]byte, 0, len(iov))
	for _, v := range iov {
		if v.fault != 0 {
			return 0, errUnsupported
		}
		bufs = append(bufs, v.b)
	}
	if n, ok, err := f.ringWrite(bufs); ok {
		return n, err
	}
	return f.daemonData.writev(iov)
}

func (f *ringData) write(b []byte, off int64) (int, error) {
	if off == 0 {
		if n, ok, err := f.ringWrite([][]byte{b}); ok {
			return n, err
		}
	}
	return f.daemonData.write(b, off)
}

func (f *ringData) close() error {
	err := f.daemonData.close()
	f.ring.Close()
	return err
}

// ringWrite is userevents' write through the ring, on a raw write: the
// 4-byte index and the payload. ok is false when the write must go over
// the socket.
func (f *ringData) ringWrite(bufs [][]byte) (n int, ok bool, err error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total < 4 || len(bufs) > wire.MaxIov || total > wire.MaxWrite {
		return 0, false, nil
	}
	var ib [4]byte
	payload := splitIndex(bufs, ib[:])
	idx := binary.NativeEndian.Uint32(ib[:])
	ev := f.events[idx]
	if int32(idx) < 0 || ev == nil || ev.def == nil || len(ev.enablers) == 0 {
		return 0, false, nil
	}
	size := total - 4
	if err := ev.def.CheckSize(size); err != nil {
		return 0, true, err
	}
	if !f.p.enabled(ev) {
		return 0, true, fmt.Errorf("write: nothing is attached to the event: %w", unix.EBADF)
	}
	tid := unix.Gettid()
	if ev.def.HasValidators() {
		if eventdef.HeaderSize+size > maxCheckedRecord {
			return 0, false, nil
		}
		// The header the daemon will build, with the type id only it
		// knows taken as 0 and as 0xffff: a record whose verdict differs
		// is the daemon's to judge.
		rec := make([]byte, eventdef.HeaderSize, eventdef.HeaderSize+size)
		binary.NativeEndian.PutUint32(rec[4:], uint32(tid))
		for _, p := range payload {
			rec = append(rec, p...)
		}
		verr := ev.def.Validate(rec)
		rec[0], rec[1] = 0xff, 0xff
		if ferr := ev.def.Validate(rec); (ferr == nil) != (verr == nil) || verr != nil && ferr.Error() != verr.Error() {
			return 0, false, nil
		}
		if verr != nil {
			// EFAULT or a dropped record: that depends on the
			// daemon's consumers (see userevents' ringWrite).
			return 0, false, nil
		}
	}
	// A full ring drops the record and the write succeeds, as a full
	// kernel ring buffer does. A scenario's few records never fill one;
	// if they did, the records missing from its trace would show it.
	cpu := stamp.CPU()
	f.ring.For(cpu).Writev(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: uint32(tid), CPU: cpu}, payload)
	return total, true, nil
}

// splitIndex copies the first len(idx) bytes of bufs into idx and returns the
// rest of bufs.
func splitIndex(bufs [][]byte, idx []byte) [][]byte {
	rest := make([][]byte, 0, len(bufs))
	need := len(idx)
	for _, b := range bufs {
		k := copy(idx[len(idx)-need:], b[:min(need, len(b))])
		need -= k
		if len(b) > k {
			rest = append(rest, b[k:])
		}
	}
	return rest
}

// cut is a name as the daemon takes it: up to its NUL.
func cut(name string) string {
	for i := range len(name) {
		if name[i] == 0 {
			return name[:i]
		}
	}
	return name
}

// wordAt is the enable word e names in the process's page, nil if it is
// not there.
func (d *daemonProc) wordAt(e enabler) unsafe.Pointer {
	base := d.mem.base()
	if e.addr < base || e.addr-base+uint64(e.size) > uint64(len(d.mem.mem)) || (e.size != 4 && e.size != 8) || e.addr%uint64(e.size) != 0 {
		return nil
	}
	return unsafe.Pointer(&d.mem.mem[e.addr-base])
}

// enabled is what a library writer reads before it writes: the event's
// enable bit in its own memory — any of its enablers', as the daemon sets
// and clears them all together.
func (d *daemonProc) enabled(ev *ringEvent) bool {
	for _, e := range ev.enablers {
		w := d.wordAt(e)
		if w == nil {
			continue
		}
		var v uint64
		if e.size == 4 {
			v = uint64(atomic.LoadUint32((*uint32)(w)))
		} else {
			v = atomic.LoadUint64((*uint64)(w))
		}
		if v>>e.bit&1 != 0 {
			return true
		}
	}
	return false
}
