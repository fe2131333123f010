package daemon

import (
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/internal/testutil"
)

// shareSide is what the interposer makes for a share: the ring set of the
// daemon's ring count (this test's producer; ring is its ring 0), its
// wake eventfd, and the table's memfd mapped read-only.
type shareSide struct {
	set     *shmring.SetProducer
	ring    *shmring.Producer
	tableFD int
	table   []byte
	wake    int
}

func newShareSide(t *testing.T, rings, ringSize, tableSize int) *shareSide {
	t.Helper()
	set, err := shmring.CreateSet(rings, ringSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	wake, err := set.WakeByEventfd()
	if err != nil {
		t.Fatal(err)
	}
	fd := sealedMemfd(t, tableSize, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	table, err := unix.Mmap(fd, 0, tableSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(table) })
	return &shareSide{set: set, ring: set.Ring(0), tableFD: fd, table: table, wake: wake}
}

func sealedMemfd(t *testing.T, size, seals int) int {
	t.Helper()
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if seals != 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
			t.Fatal(err)
		}
	}
	return fd
}

// dup is a duplicate of fd: FUSEShare takes its descriptors over.
func dup(t *testing.T, fd int) int {
	t.Helper()
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// shareServer is a Server with no socket: shares come through FUSE.
func shareServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Subsystem == nil {
		cfg.Subsystem = subsys.New(subsys.Options{NumCPU: 1})
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

func (sd *shareSide) take(t *testing.T, s *Server, f *subsys.File) (*Share, error) {
	return s.FUSEShare(f, subsys.Writer{TGID: int32(os.Getpid()), Comm: "share_test"}, uint32(os.Getuid()), subsys.Cred{},
		dup(t, sd.set.Fd()), dup(t, sd.tableFD), dup(t, sd.wake))
}

// slot is write index i's slot of the table as the process reads it.
func (sd *shareSide) slot(i int) (word, minSize, ringMax uint32, typeID uint16, locs [4]uint32) {
	b := sd.table[preload.TableHeader+i*preload.SlotSize:]
	word = atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0])))
	ne := wire.LE
	for k := range locs {
		locs[k] = ne.Uint32(b[preload.SlotOffLoc+4*k:])
	}
	return word, ne.Uint32(b[preload.SlotOffMinSize:]), ne.Uint32(b[preload.SlotOffRingMax:]), ne.Uint16(b[preload.SlotOffTypeID:]), locs
}

// register registers cmd on f for process p, as DIAG_IOCSREG does.
func register(t *testing.T, f *subsys.File, p *subsys.Process, cmd string, bit uint8) uint32 {
	t.Helper()
	idx, err := f.Register(p, subsys.Cred{PerfmonCapable: true}, subsys.RegisterArgs{
		Reg:  abi.UserReg{Size: abi.UserRegSize, EnableBit: bit, EnableSize: 8, EnableAddr: 0x1000}.Bytes(),
		Name: cmd})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

type noMemory struct{}

func (noMemory) SetBit(uint64, uint, bool) error { return nil }

// TestFUSEShareTable: the table describes every write index of the file —
// those it had when shared and those registered after, before Register
// returns — and follows each event's enabling; the share's records reach
// the file's events under the process, a void record is skipped and
// counted, and Close gives everything back.
func TestFUSEShareTable(t *testing.T) {
	s := shareServer(t, Config{})
	sys := s.Subsystem()
	f := sys.Open()
	defer f.Close()
	p := sys.NewProcess(noMemory{})
	a := register(t, f, p, "sh_a u32 a; u64 b", 0)
	sd := newShareSide(t, s.Rings(), 1<<16, 4096*2)
	sh, err := sd.take(t, s, f)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32((4096*2 - preload.TableHeader) / preload.SlotSize); sh.Slots() != want {
		t.Errorf("Slots %d, want %d", sh.Slots(), want)
	}
	if m := wire.LE.Uint64(sd.table); m != preload.TableMagic {
		t.Errorf("the table's magic %#x", m)
	}
	word, minSize, ringMax, typeID, _ := sd.slot(int(a))
	ev := sys.Lookup("user_events", "sh_a")
	if word != preload.SlotWord(0, 0, 0) || minSize != 12 || ringMax != 1<<16-shmring.HeaderSize || typeID != uint16(ev.ID()) {
		t.Errorf("slot of sh_a: word %#x min %d ring max %d type %d", word, minSize, ringMax, typeID)
	}
	// Registered after the share: described before Register returns.
	l := register(t, f, p, "sh_l __rel_loc char[] s; __data_loc u8[] d", 1)
	word, minSize, _, _, locs := sd.slot(int(l))
	if word != preload.SlotWord(0, 2, 0) || minSize != 8 || locs != [4]uint32{8 | preload.LocRel | preload.LocChar, 12, 0, 0} {
		t.Errorf("slot of sh_l: word %#x min %d locs %#x", word, minSize, locs)
	}
	m := register(t, f, p, "sh_m __rel_loc char[] a; __rel_loc char[] b; __rel_loc char[] c; __rel_loc char[] d; __rel_loc char[] e", 2)
	if word, _, _, _, _ := sd.slot(int(m)); word != preload.SlotWord(0, 0, preload.SlotFUSE) {
		t.Errorf("slot of an event with 5 loc fields: word %#x, want FUSE's", word)
	}
	// Enabling, disabling.
	if err := sys.FS().WriteFile("events/user_events/sh_a/enable", []byte("1"), 0, subsys.Cred{PerfmonCapable: true}); err != nil {
		t.Fatal(err)
	}
	if word, _, _, _, _ := sd.slot(int(a)); word != preload.SlotWord(subsys.StatusFtrace, 0, 0) {
		t.Errorf("enabled: word %#x", word)
	}
	// Records: one of sh_a, one void.
	pay := make([]byte, 12)
	sd.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: a, TID: uint32(os.Getpid())}, pay)
	sd.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: preload.VoidIndex, TID: uint32(os.Getpid())}, pay)
	s.Flush()
	if st := s.RingStats(); st.Delivered != 1 || st.Voided != 1 || st.Rejected != 0 {
		t.Errorf("ring stats %+v", st)
	}
	if w, _ := ev.Counts(); w != 1 {
		t.Errorf("sh_a: %d records", w)
	}
	if err := sys.FS().WriteFile("events/user_events/sh_a/enable", []byte("0"), 0, subsys.Cred{PerfmonCapable: true}); err != nil {
		t.Fatal(err)
	}
	if word, _, _, _, _ := sd.slot(int(a)); word != preload.SlotWord(0, 0, 0) {
		t.Errorf("disabled: word %#x", word)
	}
	// A synchronous consumer (a perf ring mapped by its reader) sends
	// the process's writes of the event through FUSE while attached.
	ss := sys.NewSession(subsys.SessionOptions{Synchronous: true})
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	if word, _, _, _, _ := sd.slot(int(a)); word != preload.SlotWord(subsys.StatusPerf, 0, preload.SlotFUSE) {
		t.Errorf("a synchronous consumer attached: word %#x", word)
	}
	ss.Close()
	if word, _, _, _, _ := sd.slot(int(a)); word != preload.SlotWord(0, 0, 0) {
		t.Errorf("the synchronous consumer gone: word %#x", word)
	}
	sh.Close()
	sh.Close()
	st := s.Stats()
	if rs := s.RingStats(); rs.Released != 1 || st.SharedKB != 0 {
		t.Errorf("after Close: %d ring sets released, %d KiB still counted", rs.Released, st.SharedKB)
	}
	// A closed share's table is written no more.
	if err := sys.FS().WriteFile("events/user_events/sh_a/enable", []byte("1"), 0, subsys.Cred{PerfmonCapable: true}); err != nil {
		t.Fatal(err)
	}
	if word, _, _, _, _ := sd.slot(int(a)); word != preload.SlotWord(0, 0, 0) {
		t.Errorf("a closed share's table was written: word %#x", word)
	}
}

// TestFUSEShareRefuses: what a process hands over is checked as hostile
// input — the set and its eventfd by the code that checks a connection's
// (drainers.attach) — and refused with EINVAL (or EACCES, ENOMEM), nothing
// kept, nothing counted.
func TestFUSEShareRefuses(t *testing.T) {
	s := shareServer(t, Config{Limits: Limits{SharedKBPerUID: 128}, Rings: 2})
	f := s.Subsystem().Open()
	defer f.Close()
	w := subsys.Writer{TGID: int32(os.Getpid())}
	good := newShareSide(t, 2, 1<<14, 4096)
	memfd := func(size, seals int) int { return dup(t, sealedMemfd(t, size, seals)) }
	stream, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stream[1])
	defer unix.Close(stream[0])
	dgram, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dgram[1])
	defer unix.Close(dgram[0])
	seal := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	pg := unix.Getpagesize()
	// An unsealed set: the good set's bytes, in a memfd without seals.
	unsealed := func() int {
		fd := memfd(pg+2*(pg+1<<14), 0)
		b, err := unix.Mmap(good.set.Fd(), 0, pg+2*(pg+1<<14), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(b)
		unix.Pwrite(fd, b, 0)
		return fd
	}
	hugetlb := func() int {
		fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_HUGETLB)
		if err != nil {
			return memfd(0, seal) // no huge pages here: a set of no bytes, refused as well
		}
		unix.Ftruncate(fd, 2<<20)
		unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seal)
		return fd
	}
	for _, tc := range []struct {
		name              string
		ring, table, wake func() int
		uid               uint32
		want              error
	}{
		{"an unsealed table", func() int { return dup(t, good.set.Fd()) }, func() int { return memfd(4096, 0) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a table sealed against writing", func() int { return dup(t, good.set.Fd()) }, func() int { return memfd(4096, seal|unix.F_SEAL_WRITE) }, func() int { return dup(t, good.wake) }, 0, unix.EACCES},
		{"a table of no slot", func() int { return dup(t, good.set.Fd()) }, func() int { return memfd(0, seal) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a table not of whole pages", func() int { return dup(t, good.set.Fd()) }, func() int { return memfd(4000, seal) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a huge table", func() int { return dup(t, good.set.Fd()) }, func() int { return memfd(1<<20, seal) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a set of one ring, where the daemon has 2", func() int { return dup(t, newShareSide(t, 1, 1<<14, 4096).set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a set of 3 rings", func() int { return dup(t, newShareSide(t, 3, 1<<14, 4096).set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a set of rings too large", func() int { return dup(t, newShareSide(t, 2, 2*wire.MaxRing, 4096).set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"an unsealed set", unsealed, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a set sealed against writing", func() int { return memfd(pg+2*(pg+1<<14), seal|unix.F_SEAL_WRITE) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EACCES},
		{"a hugetlbfs set", hugetlb, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a pipe for a ring", func() int { var p [2]int; unix.Pipe2(p[:], unix.O_CLOEXEC); unix.Close(p[0]); return p[1] }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a set that is not a set", func() int { return memfd(pg+2*(pg+1<<14), seal) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 0, unix.EINVAL},
		{"a stream socket to wake", func() int { return dup(t, good.set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, stream[0]) }, 0, unix.EINVAL},
		{"a datagram socket to wake (ABI 1's)", func() int { return dup(t, good.set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, dgram[0]) }, 0, unix.EINVAL},
		{"a memfd to wake", func() int { return dup(t, good.set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return memfd(4096, 0) }, 0, unix.EINVAL},
		{"over the uid's shared memory", func() int { return dup(t, newShareSide(t, 2, 1<<16, 4096).set.Fd()) }, func() int { return dup(t, good.tableFD) }, func() int { return dup(t, good.wake) }, 4242, unix.ENOMEM},
	} {
		_, err := s.FUSEShare(f, w, tc.uid, subsys.Cred{}, tc.ring(), tc.table(), tc.wake())
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if st := s.Stats(); st.SharedKB != 0 || s.RingStats().Rings != 0 {
		t.Errorf("refused shares left %d KiB counted, %d rings", st.SharedKB, s.RingStats().Rings)
	}
	// The good one is taken, after all that.
	sh, err := s.FUSEShare(f, w, 0, subsys.Cred{}, dup(t, good.set.Fd()), dup(t, good.tableFD), dup(t, good.wake))
	if err != nil {
		t.Fatalf("the good share: %v", err)
	}
	sh.Close()
}

// FuzzShareRing drives a share's ring — the interposer's, handed over
// through FUSE — with arbitrary operations: records of any write index
// (the file's, preload.VoidIndex, wire.LostIndex with any payload),
// garbage anywhere in the ring, the head moved anywhere, records reserved
// and never committed, writes to the set's eventfd, and scribbles over
// the validation table (which the daemon never reads). The daemon must not
// crash or block, a flush must return, and Close must release the ring
// and every byte it counted. (What it delivers is checked as any write is,
// by subsys.File.Deliver; TestHostileTable shows a scribbled table
// gets nothing that breaks a layout delivered.)
func FuzzShareRing(f *testing.F) {
	f.Add([]byte{0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0, 0xfe, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 1, 0, 0, 0, 0})
	f.Add([]byte{1, 200, 1, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 1, 2, 3, 4, 5, 0, 0, 0, 0, 6, 255, 255, 255, 255, 255})
	holdMax = 100 * time.Microsecond // a record never committed must not slow every iteration
	f.Cleanup(func() { holdMax = holdMaxDefault })
	s := shareServer(f, Config{})
	sys := s.Subsystem()
	f.Fuzz(func(t *testing.T, ops []byte) {
		before := s.RingStats().Released
		file := sys.Open()
		defer file.Close()
		p := sys.NewProcess(noMemory{})
		rl := register(t, file, p, "fz_rl __rel_loc char[] s", 0)
		if err := sys.FS().WriteFile("events/user_events/fz_rl/enable", []byte("1"), 0, subsys.Cred{PerfmonCapable: true}); err != nil {
			t.Fatal(err)
		}
		sd := newShareSide(t, s.Rings(), 1<<14, 4096)
		sh, err := sd.take(t, s, file)
		if err != nil {
			t.Fatal(err)
		}
		// Ring 0 of the set: its header page at P (set.go).
		pg := unix.Getpagesize()
		set, err := unix.Mmap(sd.set.Fd(), 0, 2*pg+sd.ring.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(set)
		mem := set[pg:]
		table, err := unix.Mmap(sd.tableFD, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(table)
		data := mem[unix.Getpagesize():]
		next := func(n int) []byte {
			if len(ops) < n {
				ops = append(ops, make([]byte, n-len(ops))...)
			}
			b := ops[:n]
			ops = ops[n:]
			return b
		}
		for len(ops) > 0 {
			switch next(1)[0] % 6 {
			case 0: // a record of any index: the file's, void, lost, another
				m := next(9)
				idx := rl
				switch m[0] % 4 {
				case 1:
					idx = preload.VoidIndex
				case 2:
					idx = wire.LostIndex
				case 3:
					idx = wire.LE.Uint32(m[1:])
				}
				sd.ring.Write(shmring.Meta{Time: stamp.Now(), WriteIndex: idx, TID: uint32(os.Getpid())}, m[5:5+int(m[5])%4])
			case 1: // garbage anywhere in the data
				m := next(5)
				copy(data[int(wire.LE.Uint16(m))%len(data):], m[2:])
			case 2: // head moved anywhere
				m := next(9)
				wire.LE.PutUint64(mem[64:], wire.LE.Uint64(m[1:])^uint64(m[0]))
			case 3: // reserved, never committed
				sd.ring.Reserve(shmring.Meta{WriteIndex: rl}, int(next(1)[0])%64)
			case 4: // the eventfd written, up to its limit
				for range next(1)[0] % 8 {
					unix.Write(sd.wake, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
				}
			case 5: // the table scribbled
				m := next(3)
				table[int(wire.LE.Uint16(m))%len(table)] = m[2]
			}
		}
		s.Flush()
		sh.Close()
		if st := s.RingStats(); st.Released != before+1 || s.Stats().SharedKB != 0 {
			t.Errorf("after Close: %+v, %d KiB counted", st, s.Stats().SharedKB)
		}
	})
}

// TestFUSEShareHandedEach: the processes of a program that forked write
// through the FUSE file they share, each into a ring set of its own; when
// a session is the only consumer of the file's events, each set is handed
// to its reader — not only the first — and a change of where the records
// go (an enable) takes every one of them back.
func TestFUSEShareHandedEach(t *testing.T) {
	s := shareServer(t, Config{Rings: 2})
	sys := s.Subsystem()
	f := sys.Open()
	defer f.Close()
	p := sys.NewProcess(noMemory{})
	register(t, f, p, "sh_fork u32 n", 0)
	var shares []*Share
	for range 2 {
		sd := newShareSide(t, s.Rings(), 1<<16, 4096)
		sh, err := sd.take(t, s, f)
		if err != nil {
			t.Fatal(err)
		}
		defer sh.Close()
		shares = append(shares, sh)
	}
	streams, err := shmring.CreateStreamSet(s.Rings(), 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer streams.Close()
	ss := sys.NewSession(subsys.SessionOptions{})
	defer ss.Close()
	if err := ss.DeliverToStreams(streams); err != nil {
		t.Fatal(err)
	}
	if err := ss.Attach(sys.Lookup("user_events", "sh_fork")); err != nil {
		t.Fatal(err)
	}
	for i, sh := range shares {
		hs, ho := s.handOver(sh.set, ss)
		if hs == nil {
			t.Fatalf("process %d's set not handed", i)
		}
		unix.Close(hs.ctlFd)
		if ho.PID != int32(os.Getpid()) || len(ho.Events) != 1 {
			t.Errorf("hand-over %d: %+v", i, ho)
		}
	}
	if n := f.Handed(); n != 2 {
		t.Fatalf("%d hand-overs of the file on, want 2", n)
	}
	if err := sys.FS().WriteFile("events/user_events/sh_fork/enable", []byte("1"), 0, subsys.Cred{PerfmonCapable: true}); err != nil {
		t.Fatal(err)
	}
	testutil.Wait(t, "both sets resumed", func() bool {
		s.handOvers.mu.Lock()
		defer s.handOvers.mu.Unlock()
		return len(s.handOvers.live) == 0
	})
	if n := f.Handed(); n != 0 {
		t.Errorf("%d hand-overs of the file on after the enable", n)
	}
}
