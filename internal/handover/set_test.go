package handover

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/preload"
	"github.com/uetrace/uetrace/internal/ringcheck"
	"github.com/uetrace/uetrace/internal/shmring"
	"github.com/uetrace/uetrace/internal/stamp"
)

// The events of the tests' sets, by write index: two a session consumes
// (one with a __data_loc string, which Validate checks), one nothing
// consumes.
const (
	idxPlain = iota
	idxLoc
	idxOff
)

var testCommands = []string{"ho_plain u32 seq", "ho_loc u32 seq; __data_loc char[] msg", "ho_off u32 seq"}

// testSampleIDs are the session's sample ids of testCommands' events.
var testSampleIDs = []uint64{wire.SampleID(20), wire.SampleID(21), 0}

// testGrant is the grant of a set of rings rings of this process.
func testGrant(t testing.TB, rings int) Grant {
	t.Helper()
	g := Grant{ID: 7, Rings: rings, PID: int32(os.Getpid()), Comm: "ho-test", LossSince: time.Now()}
	for i, cmd := range testCommands {
		def, err := eventdef.Parse(cmd)
		if err != nil {
			t.Fatal(err)
		}
		g.Events = append(g.Events, Event{SampleID: testSampleIDs[i], Def: def})
	}
	return g
}

// fixture is a producer's set of rings, the daemon's control of it and
// its consumers (to go on where the reader stopped), and the reader's
// Set.
type fixture struct {
	sp     *shmring.SetProducer
	ctl    *Control            // the daemon's
	daemon []*shmring.Consumer // the daemon's drainers' consumers
	set    *Set
	g      Grant
}

func newFixture(t testing.TB, rings, size int) *fixture {
	t.Helper()
	// The records say the thread that wrote them (meta): the test's, the
	// same one throughout.
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	sp, err := shmring.CreateSet(rings, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	ctl, err := CreateControl(rings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	daemon, err := shmring.AttachSet(sp.Fd(), rings)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range daemon {
			c.Close()
		}
	})
	f := &fixture{sp: sp, ctl: ctl, daemon: daemon, g: testGrant(t, rings)}
	ctl.SetEvents(len(f.g.Events))
	f.set, err = OpenSet(f.g, sp.Fd(), ctl.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.set.Close() })
	return f
}

// give hands ring k over at the daemon's consumer's tail.
func (f *fixture) give(k int) { f.ctl.Give(k, f.daemon[k].Tail()) }

// takeBack takes ring k back and has the daemon's consumer go on at the
// tail.
func (f *fixture) takeBack(k int, bound time.Duration) (forced bool) {
	tail, forced := f.ctl.TakeBack(k, bound)
	f.daemon[k].Resume(tail)
	return forced
}

// sharedTail is the tail ring k's header says: what the producer sees.
func (f *fixture) sharedTail(t testing.TB, k int) uint64 {
	t.Helper()
	page, size := unix.Getpagesize(), f.sp.Size()
	mem, err := unix.Mmap(f.sp.Fd(), 0, page+f.sp.Len()*(page+size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	return binary.NativeEndian.Uint64(mem[page+k*(page+size)+128:])
}

// write publishes a record of write index idx into ring k.
func (f *fixture) write(t testing.TB, k int, m shmring.Meta, payload []byte) {
	t.Helper()
	if !f.sp.Ring(k).Write(m, payload) {
		t.Fatalf("ring %d is full", k)
	}
}

// meta is a record's header from this thread on CPU k at time ts.
func meta(idx uint32, k int, ts uint64) shmring.Meta {
	return shmring.Meta{Time: ts, WriteIndex: idx, TID: uint32(unix.Gettid()), CPU: uint32(k)}
}

// seqPayload is a record of testCommands' plain events: its u32 seq.
func seqPayload(seq uint32) []byte { return binary.NativeEndian.AppendUint32(nil, seq) }

// locPayload is a record of ho_loc: seq, then a __data_loc pointing at
// msg and its NUL after the fields (offsets from the record's start,
// header included).
func locPayload(seq uint32, msg string) []byte {
	p := binary.NativeEndian.AppendUint32(nil, seq)
	off := eventdef.HeaderSize + 8
	p = binary.NativeEndian.AppendUint32(p, uint32(len(msg)+1)<<16|uint32(off))
	return append(append(p, msg...), 0)
}

// lossPayload is a loss record's payload: n records of write index idx.
func lossPayload(idx uint32, n uint64) []byte {
	p := wire.LE.AppendUint32(nil, idx)
	p = wire.LE.AppendUint32(p, 0)
	return wire.LE.AppendUint64(p, n)
}

// expect builds a stream's bytes by hand, with wire's layouts.
type expect struct{ b []byte }

func (e *expect) grow(n int) []byte {
	e.b = append(e.b, make([]byte, n)...)
	return e.b[len(e.b)-n:]
}

func (e *expect) sample(id uint64, pid, tid int32, ts uint64, cpu int, payload []byte) {
	raw := eventdef.HeaderSize + len(payload)
	b := e.grow(wire.SampleSize(raw))
	wire.PutSample(b, id, uint32(pid), uint32(tid), ts, uint32(cpu), raw)
	wire.PutRawHeader(b[wire.SampleHeadSize:], wire.TypeID(id), tid)
	copy(b[wire.SampleHeadSize+eventdef.HeaderSize:], payload)
}

func (e *expect) lost(id, n, ts uint64, cpu int) {
	wire.PutLost(e.grow(wire.LostSize), id, n, 0, 0, ts, uint32(cpu))
}

func (e *expect) comm(pid, tid int32, name string, id, ts uint64, cpu int) {
	wire.PutComm(e.grow(wire.CommSize(name)), uint32(pid), uint32(tid), name, id, ts, uint32(cpu))
}

// pass is a pass of ring k that must commit.
func (f *fixture) pass(t testing.TB, k int, out *Stream, most int) int {
	t.Helper()
	n, gone := f.set.Pass(k, out, most)
	if gone {
		t.Fatalf("ring %d gone", k)
	}
	return n
}

// TestPassLayout: what a pass writes for samples, a thread's name, a
// loss record, a record too large for perf, an invalid __data_loc, a
// disabled event, an index the set does not have, a short payload and a
// void record is byte for byte what the session's stream would hold —
// here built by hand with wire's layouts — and is counted as the drainer
// counts it.
func TestPassLayout(t *testing.T) {
	f := newFixture(t, 2, 1<<16)
	const k = 1
	f.give(k)
	pid, tid := int32(os.Getpid()), int32(unix.Gettid())
	ts := stamp.Now() - 1_000_000 // in the past: no record is in the future
	big := make([]byte, wire.MaxPerfRecord)
	recs := []struct {
		idx     uint32
		payload []byte
	}{
		{idxPlain, seqPayload(1)},                         // sample, after the thread's name
		{idxLoc, locPayload(2, "hello")},                  // sample with a string
		{wire.LostIndex, lossPayload(idxLoc, 5)},          // a loss of ho_loc, told before the next sample, on its CPU
		{idxPlain, seqPayload(3)},                         //
		{idxLoc, big},                                     // too large for perf: a lost run, too large
		{idxLoc, big},                                     // a second: the same run
		{idxOff, seqPayload(4)},                           // nothing consumes it: disabled
		{9, seqPayload(5)},                                // no such index: rejected
		{idxPlain, []byte{1, 2}},                          // shorter than its fields: rejected
		{idxLoc, append(seqPayload(6), 0xff, 0xff, 0, 0)}, // __data_loc past the end: rejected after the lost run is told
		{preload.VoidIndex, nil},                          // voided
		{idxPlain, seqPayload(7)},                         //
	}
	for i, r := range recs {
		f.write(t, k, meta(r.idx, k, ts+uint64(i)), r.payload)
	}
	// The loss record's CPU is another's: it is told on the next
	// record's.
	out := NewStream(true)
	if n := f.pass(t, k, out, 100); n != len(recs) {
		t.Fatalf("the pass took %d records, want %d", n, len(recs))
	}
	var e expect
	e.comm(pid, tid, "ho-test", testSampleIDs[idxPlain], ts, k)
	e.sample(testSampleIDs[idxPlain], pid, tid, ts, k, seqPayload(1))
	e.sample(testSampleIDs[idxLoc], pid, tid, ts+1, k, locPayload(2, "hello"))
	e.lost(testSampleIDs[idxLoc], 5, ts+2, k)
	e.sample(testSampleIDs[idxPlain], pid, tid, ts+3, k, seqPayload(3))
	e.lost(testSampleIDs[idxLoc], 2, ts+4, k) // told before the invalid record's sample, which is then cut off
	e.sample(testSampleIDs[idxPlain], pid, tid, ts+11, k, seqPayload(7))
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("the pass wrote\n%x\nwant\n%x", out.Bytes(), e.b)
	}
	want := Counts{Delivered: 6, Rejected: 3, Disabled: 1, Voided: 1, Lost: 5, LostRecords: 1}
	if got := f.ctl.Counts(k); got != want {
		t.Fatalf("counts %+v\nwant %+v", got, want)
	}
	if got := out.TooLarge(); got != 2 {
		t.Fatalf("TooLarge() = %d, want the 2 records too large for perf", got)
	}
	// Nothing more: an empty pass commits, writes nothing.
	out.Reset()
	if n := f.pass(t, k, out, 100); n != 0 || len(out.Bytes()) != 0 {
		t.Fatalf("an empty pass: %d records, %d bytes", n, len(out.Bytes()))
	}
}

// TestPassLossesWait: loss records wait for the ring's next record, whose
// CPU they are told on, across passes (a pass that ends on them while
// the next record is reserved keeps them); an empty ring has them told on
// their own CPUs; past ringcheck.MaxLosses they are told at once, on
// theirs; runs of the same event merge, and stop merging past
// wire.MaxLostNotes. Losses of an event nothing consumes, or of no
// index, are counted and told nowhere.
func TestPassLossesWait(t *testing.T) {
	f := newFixture(t, 1, 1<<16)
	f.give(0)
	pid, tid := int32(os.Getpid()), int32(unix.Gettid())
	ts := stamp.Now() - 1_000_000
	idPlain, idLoc := testSampleIDs[idxPlain], testSampleIDs[idxLoc]
	out := NewStream(false)

	// A loss on another CPU, then a record reserved and not committed:
	// the pass ends with the loss waiting.
	lm := meta(wire.LostIndex, 0, ts)
	lm.CPU = 3
	lossCPU := ringcheck.CPU(lm.CPU)
	f.write(t, 0, lm, lossPayload(idxPlain, 4))
	res, ok := f.sp.Ring(0).Reserve(meta(idxLoc, 0, ts+1), len(locPayload(1, "x")))
	if !ok {
		t.Fatal("reserve")
	}
	f.pass(t, 0, out, 100)
	if len(out.Bytes()) != 0 {
		t.Fatalf("a loss told before the record that follows it was read: %x", out.Bytes())
	}
	copy(res.Payload(), locPayload(1, "x"))
	res.Commit()
	f.pass(t, 0, out, 100)
	var e expect
	e.lost(idPlain, 4, ts, 0) // on the next record's CPU
	e.sample(idLoc, pid, tid, ts+1, 0, locPayload(1, "x"))
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("wrote\n%x\nwant\n%x", out.Bytes(), e.b)
	}

	// Losses then an empty ring: told on their own CPUs, before the next
	// sample, whenever it comes. Two of one event merge into one run.
	out.Reset()
	e = expect{}
	lm.Time = ts + 2
	f.write(t, 0, lm, lossPayload(idxLoc, 1))
	lm.Time = ts + 3
	f.write(t, 0, lm, lossPayload(idxLoc, 2))
	lm.Time = ts + 4
	f.write(t, 0, lm, lossPayload(idxOff, 50)) // nothing consumes it
	lm.Time = ts + 5
	f.write(t, 0, lm, lossPayload(99, 60)) // no such index
	f.pass(t, 0, out, 100)
	if len(out.Bytes()) != 0 {
		t.Fatalf("losses told before a sample: %x", out.Bytes())
	}
	f.write(t, 0, meta(idxPlain, 0, ts+6), seqPayload(2))
	f.pass(t, 0, out, 100)
	e.lost(idLoc, 3, ts+2, lossCPU)
	e.sample(idPlain, pid, tid, ts+6, 0, seqPayload(2))
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("wrote\n%x\nwant\n%x", out.Bytes(), e.b)
	}

	// More loss records than a ring keeps waiting, alternating events so
	// that each is a run of its own: past MaxLosses those waiting are
	// told on their own CPUs; past MaxLostNotes runs merge into the last
	// of their kind.
	out.Reset()
	e = expect{}
	for i := range ringcheck.MaxLosses + 1 {
		lm.Time = ts + 10 + uint64(i)
		f.write(t, 0, lm, lossPayload(uint32(i%2), 1))
	}
	f.write(t, 0, meta(idxPlain, 0, ts+100), seqPayload(3))
	f.pass(t, 0, out, 1000)
	for i := range wire.MaxLostNotes - 1 {
		e.lost(testSampleIDs[i%2], 1, ts+10+uint64(i), lossCPU)
	}
	// The 16th run takes every later loss of the first MaxLosses (on
	// their own CPU) and the last one (told on the record's CPU, merged all the
	// same).
	e.lost(testSampleIDs[(wire.MaxLostNotes-1)%2], uint64(ringcheck.MaxLosses+1-(wire.MaxLostNotes-1)), ts+10+wire.MaxLostNotes-1, lossCPU)
	e.sample(idPlain, pid, tid, ts+100, 0, seqPayload(3))
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("wrote\n%x\nwant\n%x", out.Bytes(), e.b)
	}
	want := Counts{Delivered: 3, Rejected: 1, Lost: 4 + 3 + 50 + ringcheck.MaxLosses + 1, LostRecords: 4 + ringcheck.MaxLosses + 1}
	if got := f.ctl.Counts(0); got != want {
		t.Fatalf("counts %+v\nwant %+v", got, want)
	}
}

// TestPassChecks: a thread id of another process's live thread is
// delivered under the producer's process id (forged); a CPU that cannot
// exist is taken modulo the possible CPUs; a record stamped after the
// reader's clock gets the clock's time (future); a loss record that is
// not one, or claims more than the producer could have dropped, is
// rejected or cut (capped); a record longer than a ring record may be is
// skipped (too long).
func TestPassChecks(t *testing.T) {
	f := newFixture(t, 1, 1<<17)
	f.give(0)
	pid := int32(os.Getpid())
	ts := stamp.Now() - 1_000_000
	out := NewStream(false)
	m := meta(idxPlain, 0, ts)
	m.TID = 1 // init: a live thread of another process
	f.write(t, 0, m, seqPayload(1))
	m = meta(idxPlain, 0, ts+1)
	m.CPU = 1<<31 + 5
	f.write(t, 0, m, seqPayload(2))
	before := stamp.Now()
	f.write(t, 0, meta(idxPlain, 0, 1<<62), seqPayload(3))
	f.write(t, 0, meta(wire.LostIndex, 0, ts+3), []byte{1, 2, 3})                                                // not a loss record
	f.write(t, 0, meta(wire.LostIndex, 0, ts+4), append(lossPayload(idxPlain, 1)[:4], make([]byte, 12)...)[:16]) // zero claim
	bad := lossPayload(idxPlain, 1)
	bad[4] = 1 // the reserved word
	f.write(t, 0, meta(wire.LostIndex, 0, ts+5), bad)
	f.write(t, 0, meta(wire.LostIndex, 0, ts+6), lossPayload(idxPlain, 1<<63)) // more than could be
	f.write(t, 0, meta(idxPlain, 0, ts+7), make([]byte, ringcheck.MaxRecord))  // longer than a ring record may be
	f.write(t, 0, meta(idxPlain, 0, ts+8), seqPayload(4))
	f.pass(t, 0, out, 100)
	after := stamp.Now()

	recs := parseStream(t, out.Bytes())
	if len(recs) != 5 {
		t.Fatalf("%d records, want 4 samples and a lost run: %+v", len(recs), recs)
	}
	if recs[0].tid != pid {
		t.Errorf("a forged thread id delivered as %d, want the process's %d", recs[0].tid, pid)
	}
	if want := int(m.CPU % uint32(ringcheck.PossibleCPUs)); recs[1].cpu != uint32(want) {
		t.Errorf("CPU %d delivered as %d, want %d", m.CPU, recs[1].cpu, want)
	}
	if recs[2].time < before || recs[2].time > after {
		t.Errorf("a record from the future delivered at %d, want the reader's clock in [%d, %d]", recs[2].time, before, after)
	}
	if recs[3].typ != 2 || recs[3].n == 0 || recs[3].n > uint64(time.Since(f.g.LossSince))*uint64(ringcheck.PossibleCPUs) {
		t.Errorf("an excessive claim told as %+v", recs[3])
	}
	c := f.ctl.Counts(0)
	if c.ForgedTID != 1 || c.Future != 1 || c.Rejected != 2 || c.LostCapped != 1 || c.LostRecords != 2 || c.TooLong != 1 || c.Delivered != 4 {
		t.Errorf("counts %+v", c)
	}
	if c.Discarded == 0 {
		t.Errorf("the skipped record's bytes are not counted discarded: %+v", c)
	}
}

// TestPassGone: a ring the daemon has gives no pass, and the reader's
// waiting losses are told when it finds the ring taken back: the daemon
// goes on after them.
func TestPassGone(t *testing.T) {
	f := newFixture(t, 2, 1<<16)
	out := NewStream(false)
	if n, gone := f.set.Pass(0, out, 10); !gone || n != 0 {
		t.Fatalf("a ring never given: %d, gone %v", n, gone)
	}
	if !f.set.Gone(0) || f.set.Pending(0) != 0 || !f.set.SleepAt(0, 1) {
		t.Fatal("a ring let go of still looks like the reader's")
	}
	f.give(1)
	ts := stamp.Now() - 1_000_000
	f.write(t, 1, meta(wire.LostIndex, 1, ts), lossPayload(idxPlain, 3))
	f.pass(t, 1, out, 10)
	if f.takeBack(1, time.Second) {
		t.Fatal("an idle ring forced back")
	}
	f.write(t, 1, meta(idxPlain, 1, ts+1), seqPayload(1))
	if n, gone := f.set.Pass(1, out, 10); !gone || n != 0 {
		t.Fatalf("a ring taken back: %d, gone %v", n, gone)
	}
	var e expect
	e.lost(testSampleIDs[idxPlain], 3, ts, 1)
	out.FlushLost()
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("wrote\n%x\nwant\n%x", out.Bytes(), e.b)
	}
	// The daemon's consumer goes on at the record after the loss.
	buf := make([]byte, 64)
	rec, err := f.daemon[1].Next(buf)
	if err != nil || rec.WriteIndex != idxPlain || rec.Time != ts+1 {
		t.Fatalf("the daemon's next record: %+v, %v", rec.Meta, err)
	}
}

// TestPassDiscarded: a pass during which the daemon forced the ring back
// leaves its output as before it, its losses as they were (and told,
// since the reader committed them), its tail unpublished; the daemon
// goes on from the pass's start.
func TestPassDiscarded(t *testing.T) {
	f := newFixture(t, 1, 1<<16)
	f.give(0)
	pid, tid := int32(os.Getpid()), int32(unix.Gettid())
	ts := stamp.Now() - 1_000_000
	out := NewStream(true)
	f.write(t, 0, meta(idxPlain, 0, ts), seqPayload(1))
	f.write(t, 0, meta(wire.LostIndex, 0, ts+1), lossPayload(idxPlain, 2))
	res, _ := f.sp.Ring(0).Reserve(meta(idxPlain, 0, ts+2), 4) // the losses wait for it
	f.pass(t, 0, out, 10)
	committed := append([]byte(nil), out.Bytes()...)
	copy(res.Payload(), seqPayload(2))
	res.Commit()
	big := make([]byte, wire.MaxPerfRecord) // too large for perf: counted, unless discarded
	copy(big, seqPayload(99))
	f.write(t, 0, meta(idxPlain, 0, ts+3), big)
	f.write(t, 0, meta(idxPlain, 0, ts+4), seqPayload(3))

	// The pass is stalled between its records and its commit — as a
	// stopped reader's — while the daemon forces the ring back.
	const k = 0
	tail := own(f.ctl, k) &^ stateMask
	passHook = func(int) {
		if _, forced := f.ctl.TakeBack(k, 0); !forced {
			t.Error("not forced")
		}
	}
	n, gone := f.set.Pass(k, out, 10)
	passHook = nil
	if !gone || n != 0 {
		t.Fatalf("a discarded pass: %d, gone %v", n, gone)
	}
	if got := out.TooLarge(); got != 0 {
		t.Fatalf("TooLarge() = %d after the discarded pass, want 0: the daemon delivers that record", got)
	}
	out.FlushLost()
	var e expect
	e.b = committed
	e.lost(testSampleIDs[idxPlain], 2, ts+1, 0) // the committed loss, told on its own CPU
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("after the discarded pass\n%x\nwant\n%x", out.Bytes(), e.b)
	}
	// The reader published only its committed pass; the daemon resumes
	// at its tail and reads the records of the discarded pass.
	if got := f.sharedTail(t, 0); got != tail {
		t.Fatalf("shared tail %d, want the committed %d", got, tail)
	}
	f.daemon[0].Resume(tail)
	buf := make([]byte, 1<<16) // the ring's size: any record
	for _, want := range []uint32{2, 99, 3} {
		rec, err := f.daemon[0].Next(buf)
		if err != nil || binary.NativeEndian.Uint32(rec.Payload) != want {
			t.Fatalf("the daemon's next record: %+v %x, %v; want seq %d", rec.Meta, rec.Payload, err, want)
		}
	}
	// A name the stream forgot is given again.
	out.Reset()
	f.write(t, 0, meta(idxPlain, 0, ts+5), seqPayload(4))
	f.daemon[0].PublishTail()
	f.give(0)
	set2, err := OpenSet(f.g, f.sp.Fd(), f.ctl.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Close()
	if _, gone := set2.Pass(0, out, 10); gone {
		t.Fatal("given again: gone")
	}
	e = expect{}
	e.comm(pid, tid, "ho-test", testSampleIDs[idxPlain], ts+5, 0)
	e.sample(testSampleIDs[idxPlain], pid, tid, ts+5, 0, seqPayload(4))
	if !bytes.Equal(out.Bytes(), e.b) {
		t.Fatalf("given again\n%x\nwant\n%x", out.Bytes(), e.b)
	}
}

// streamRecord is a record of a stream as the tests read it back.
type streamRecord struct {
	typ      uint32
	id       uint64
	pid, tid int32
	time     uint64
	cpu      uint32
	n        uint64 // a LOST's count
	raw      []byte // a sample's raw data
	name     string // a COMM's
}

// parseStream reads a stream's records back, failing the test on any
// that is not well formed: a size that is not the record's, a raw size
// that does not end on the record, an id that is no event's of the set's
// (0 for none), a name without its NUL.
func parseStream(t testing.TB, b []byte) []streamRecord {
	t.Helper()
	recs, err := readStream(b)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func readStream(b []byte) ([]streamRecord, error) {
	ne := binary.NativeEndian
	var recs []streamRecord
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, errors.New("a record shorter than its header")
		}
		typ, size := ne.Uint32(b), int(ne.Uint16(b[6:]))
		if size < 8 || size%8 != 0 || size > len(b) || ne.Uint16(b[4:]) != 0 {
			return nil, errors.New("a record size that does not fit")
		}
		r := streamRecord{typ: typ}
		rec := b[:size]
		b = b[size:]
		switch typ {
		case 9: // SAMPLE
			if size < wire.SampleHeadSize+eventdef.HeaderSize {
				return nil, errors.New("a sample shorter than its fields")
			}
			r.id, r.pid, r.tid, r.time, r.cpu = ne.Uint64(rec[8:]), int32(ne.Uint32(rec[16:])), int32(ne.Uint32(rec[20:])), ne.Uint64(rec[24:]), ne.Uint32(rec[32:])
			raw := int(ne.Uint32(rec[40:]))
			if wire.SampleHeadSize+raw != size || raw%8 != 4 {
				return nil, errors.New("a raw size that does not end on the record")
			}
			r.raw = rec[wire.SampleHeadSize:]
			if got := ne.Uint16(r.raw); int(got) != wire.TypeID(r.id) {
				return nil, errors.New("a raw type that is not the sample id's")
			}
			if int32(ne.Uint32(r.raw[4:])) != r.tid {
				return nil, errors.New("a common_pid that is not the sample's tid")
			}
		case 2: // LOST
			if size != wire.LostSize {
				return nil, errors.New("a LOST of the wrong size")
			}
			r.id, r.n = ne.Uint64(rec[8:]), ne.Uint64(rec[16:])
			r.time, r.cpu = ne.Uint64(rec[32:]), ne.Uint32(rec[40:])
			if r.n == 0 || ne.Uint64(rec[48:]) != r.id {
				return nil, errors.New("a LOST of nothing, or whose trailer is another's")
			}
		case 3: // COMM
			r.pid, r.tid = int32(ne.Uint32(rec[8:])), int32(ne.Uint32(rec[12:]))
			name := rec[16 : size-32]
			i := bytes.IndexByte(name, 0)
			if i < 0 {
				return nil, errors.New("a name without its NUL")
			}
			r.name = string(name[:i])
			r.id = ne.Uint64(rec[size-8:])
		default:
			return nil, errors.New("a record of an unknown type")
		}
		recs = append(recs, r)
	}
	return recs, nil
}
