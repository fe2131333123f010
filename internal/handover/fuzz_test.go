package handover

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/shmring/shmringtest"
	"github.com/uetrace/uetrace/internal/stamp"
)

// fuzzSize is the data size of FuzzHandoverPass's ring.
const fuzzSize = 4096

// FuzzHandoverPass gives a reader a handed ring whose data, head, tail,
// key and header are arbitrary bytes, as a hostile producer can make
// them (shmringtest), and passes over it until it gives nothing more —
// with forced, the daemon forces the ring back during the first pass.
// Pass must not panic or fault (nothing outside the ring is read: a
// fault would end the fuzzer), must end — each pass bounded, and all of
// them within a ring's worth of records — and every record it writes
// must be well formed: sizes that add up, a sample's id one of the
// set's events' and its raw type that id's, its process the producer's,
// its CPU one that can exist, its time not after the reader's clock; a
// LOST's id an event's, its count not zero; a name with its NUL. A pass
// discarded leaves nothing; and the counts say as many delivered as
// there are samples.
func FuzzHandoverPass(f *testing.F) {
	fx := newFixture(f, 1, fuzzSize)
	fx.set.Close()
	m := shmringtest.Map(f, fx.sp.Fd(), 1)
	// Each seed is the ring after the writes of those before and its own.
	seed := func(write func()) {
		write()
		data, head, tail, key := m.Save(0)
		f.Add(data, head, tail, key, []byte(nil), false)
		f.Add(data, head, tail, key, []byte(nil), true)
	}
	ts := stamp.Now() - 1_000_000
	seed(func() {})
	seed(func() {
		for i, r := range []struct {
			idx     uint32
			payload []byte
		}{
			{idxPlain, seqPayload(1)},
			{idxLoc, locPayload(2, "hi")},
			{wire.LostIndex, lossPayload(idxLoc, 3)},
			{idxPlain, seqPayload(3)},
			{idxOff, seqPayload(4)},
			{9, seqPayload(5)},
			{idxLoc, append(seqPayload(6), 0xff, 0xff, 0, 0)},
			{preload.VoidIndex, nil},
			{wire.LostIndex, lossPayload(idxPlain, 1<<40)},
		} {
			fx.write(f, 0, meta(r.idx, 0, ts+uint64(i)), r.payload)
		}
	})
	seed(func() {
		// A record reserved and never committed, records after it.
		fx.sp.Ring(0).Reserve(meta(idxPlain, 0, ts), 4)
		fx.write(f, 0, meta(idxPlain, 0, ts+1), seqPayload(1))
	})
	ids := map[uint64]bool{}
	for _, e := range fx.g.Events {
		if e.SampleID != 0 {
			ids[e.SampleID] = true
		}
	}
	pid := int32(os.Getpid())
	f.Fuzz(func(t *testing.T, ring []byte, head, tail, key uint64, header []byte, forced bool) {
		m.Load(0, ring, head, tail, key, header)
		fx.ctl.TakeBack(0, 0)
		fx.ctl.Give(0, tail)
		set, err := OpenSet(fx.g, fx.sp.Fd(), fx.ctl.Fd())
		if err != nil {
			return // a header the set's attach refused: that is the answer to it
		}
		defer set.Close()
		if forced {
			passHook = func(int) { fx.ctl.TakeBack(0, 0) }
			defer func() { passHook = nil }()
		}
		before := fx.ctl.Counts(0)
		out := NewStream(true)
		total := 0
		for pass := 0; ; pass++ {
			n, gone := set.Pass(0, out, 64)
			total += n
			if total > fuzzSize/shmring.HeaderSize+1 {
				t.Fatalf("%d records from a %d-byte ring", total, fuzzSize)
			}
			if gone {
				if !forced || pass > 0 {
					t.Fatalf("pass %d: the ring gone, forced %v", pass, forced)
				}
				break
			}
			if n == 0 {
				break
			}
		}
		now := stamp.Now()
		out.FlushLost()
		recs, err := readStream(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if forced && len(recs) > 0 {
			t.Fatalf("a discarded pass wrote %d records", len(recs))
		}
		samples := 0
		for _, r := range recs {
			switch r.typ {
			case 9:
				samples++
				if !ids[r.id] || r.pid != pid || r.cpu >= uint32(ringcheck.PossibleCPUs) || r.time > now {
					t.Fatalf("a sample of id %d, pid %d, cpu %d, time %d (now %d)", r.id, r.pid, r.cpu, r.time, now)
				}
			case 2:
				if !ids[r.id] || r.cpu >= uint32(ringcheck.PossibleCPUs) {
					t.Fatalf("a LOST of id %d, cpu %d", r.id, r.cpu)
				}
			case 3:
				if !ids[r.id] || r.pid != pid || r.name != fx.g.Comm {
					t.Fatalf("a COMM of id %d, pid %d, %q", r.id, r.pid, r.name)
				}
			}
		}
		// No record here is too large for perf: each delivered one is a
		// sample.
		after := fx.ctl.Counts(0)
		if got := after.Delivered - before.Delivered; got != uint64(samples) {
			t.Fatalf("%d samples, %d counted delivered", samples, got)
		}
	})
}

// FuzzControl writes arbitrary bytes into a handed ring's slot and events
// area, as a hostile reader can (the control memfd is mapped writable on
// both sides), and has the daemon take the ring back and its counts, for
// a set of events write indices: the daemon must not fault, its take-back
// must end within its bound (forced past it), and the counts it takes
// must be of the write indices it asked for, once — taken again, they
// give nothing.
func FuzzControl(f *testing.F) {
	ne := binary.NativeEndian
	f.Add([]byte{}, uint16(1))
	slot := ne.AppendUint64(nil, 4096|Owned)
	slot = ne.AppendUint64(slot, 4096)
	slot = ne.AppendUint64(slot, 7)
	f.Add(slot, uint16(2))
	f.Add(append(slot, make([]byte, slotSize)...), uint16(MaxCountedEvents+1))
	f.Add(bytes.Repeat([]byte{0xff}, slotSize+64), uint16(4))
	f.Fuzz(func(t *testing.T, words []byte, events uint16) {
		d, r := pair(t, 1)
		d.SetEvents(int(events))
		d.Give(0, 0)
		// The reader's words: the slot, then the events area.
		mem := unsafe.Slice((*byte)(r.mem), r.size)
		n := copy(mem[:slotSize], words)
		copy(mem[eventsOffset(1):eventsOffset(1)+eventsStride], words[n:])
		tail, _ := d.TakeBack(0, 100*time.Microsecond)
		if st := own(d, 0) & stateMask; st != Daemon {
			t.Fatalf("taken back, the ring's state is %d", st)
		}
		asked := min(int(events), MaxCountedEvents)
		d.TakeCounts(0, tail, 0, func(i int, g EventCounts) {
			if i < 0 || i >= asked {
				t.Errorf("counts of write index %d taken; %d asked for", i, asked)
			}
		})
		d.TakeEventCounts(0, func(i int, g EventCounts) {
			t.Errorf("write index %d's counts taken twice: %+v", i, g)
		})
		if _, ok := r.Begin(0); ok {
			t.Error("a pass began on a ring taken back")
		}
	})
}
