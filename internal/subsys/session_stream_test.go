package subsys

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/wire"
	"github.com/uetrace/uetrace/internal/shmring"
)

// streamSession makes a session that delivers into a new set of n
// streams of size bytes each, and returns the readers' side.
func streamSession(t testing.TB, s *Subsystem, n, size int, opts SessionOptions) (*Session, []*shmring.StreamReader) {
	t.Helper()
	set, err := shmring.CreateStreamSet(n, size)
	if err != nil {
		t.Fatal(err)
	}
	ss := s.NewSession(opts)
	if err := ss.DeliverToStreams(set); err != nil {
		t.Fatal(err)
	}
	st, err := shmring.AttachStreams(set.Fd(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rs := make([]*shmring.StreamReader, n)
	for k := range rs {
		rs[k] = st.Reader(k)
	}
	return ss, rs
}

// sessRec is a session's record decoded, from a stream or a ring.
type sessRec struct {
	kind     string // "sample", "comm", "lost"
	ts       uint64
	pid, tid uint32
	cpu      uint32
	typ      int    // the event's type id; -1: none
	data     string // a sample's raw record, padded as perf pads it; a comm's name
	lost     uint64
}

// decodeStream walks the perf.data records of a stream's bytes.
func decodeStream(t testing.TB, b []byte) []sessRec {
	t.Helper()
	ne := binary.NativeEndian
	var out []sessRec
	for len(b) > 0 {
		if len(b) < 8 {
			t.Fatalf("%d bytes left, no record header", len(b))
		}
		typ, size := ne.Uint32(b), int(ne.Uint16(b[6:]))
		if size < 8 || size%8 != 0 || size > len(b) {
			t.Fatalf("record of type %d: size %d of %d bytes left", typ, size, len(b))
		}
		r, tr := b[:size], b[size-32:size]
		typeOf := func(id uint64) int { return int(id) - 1 }
		switch typ {
		case 9: // PERF_RECORD_SAMPLE
			raw := int(ne.Uint32(r[40:]))
			if wire.SampleHeadSize+raw != size {
				t.Fatalf("sample of %d bytes with %d raw", size, raw)
			}
			out = append(out, sessRec{kind: "sample", typ: typeOf(ne.Uint64(r[8:])), pid: ne.Uint32(r[16:]), tid: ne.Uint32(r[20:]),
				ts: ne.Uint64(r[24:]), cpu: ne.Uint32(r[32:]), data: string(r[44:])})
		case 2: // PERF_RECORD_LOST
			out = append(out, sessRec{kind: "lost", typ: typeOf(ne.Uint64(r[8:])), lost: ne.Uint64(r[16:]),
				pid: ne.Uint32(tr), tid: ne.Uint32(tr[4:]), ts: ne.Uint64(tr[8:]), cpu: ne.Uint32(tr[16:])})
		case 3: // PERF_RECORD_COMM
			name := r[16 : size-32]
			name = name[:bytes.IndexByte(name, 0)]
			out = append(out, sessRec{kind: "comm", typ: typeOf(ne.Uint64(tr[24:])), pid: ne.Uint32(r[8:]), tid: ne.Uint32(r[12:]),
				ts: ne.Uint64(tr[8:]), cpu: ne.Uint32(tr[16:]), data: string(name)})
		default:
			t.Fatalf("record type %d in a stream", typ)
		}
		b = b[size:]
	}
	return out
}

// readStreams takes every stream's records, freeing them.
func readStreams(t testing.TB, rs []*shmring.StreamReader) [][]sessRec {
	t.Helper()
	out := make([][]sessRec, len(rs))
	for k, r := range rs {
		a := r.Available()
		out[k] = decodeStream(t, a)
		r.Consume(len(a))
	}
	return out
}

// bufferRecs reads what a session holds in its buffer, as sessRecs.
func bufferRecs(t testing.TB, ss *Session) []sessRec {
	t.Helper()
	buf := make([]byte, 4<<20)
	recs, err := ss.Read(context.Background(), buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []sessRec
	for _, r := range recs {
		sr := sessRec{kind: "sample", ts: r.TS, pid: uint32(r.PID), tid: uint32(r.TID), cpu: uint32(r.CPU), typ: r.ID, data: string(r.Raw)}
		if name, ok := r.Comm(); ok {
			sr.kind, sr.typ, sr.data = "comm", -1, name
		}
		out = append(out, sr)
	}
	return out
}

// samplesOf are the samples among recs.
func samplesOf(recs []sessRec) []sessRec {
	return slices.DeleteFunc(slices.Clone(recs), func(r sessRec) bool { return r.kind != "sample" })
}

// readPipe reads trace_pipe until it has nothing more.
func readPipe(t testing.TB, s *Subsystem) string {
	t.Helper()
	h, err := s.FS().Open(FileTracePipe, os.O_RDONLY|unix.O_NONBLOCK, root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var out []byte
	buf := make([]byte, 1<<16)
	for {
		n, err := h.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil || n == 0 {
			return string(out)
		}
	}
}

// deliverEnv is one subsystem of the equivalence test: two events, a
// session, the trace buffer.
type deliverEnv struct {
	*tenv
	f      *File
	idx    [2]uint32
	now    uint64
	stream []*shmring.StreamReader
	ss     *Session
}

// newDeliverEnv makes a subsystem with events __da (validated: a
// __data_loc string) and __db (not), a session on both — into streams, or
// with buffered into its in-memory buffer, as read by Read — and the
// trace buffer small enough to overwrite.
func newDeliverEnv(t *testing.T, buffered bool) *deliverEnv {
	d := &deliverEnv{now: 1_000_000_000}
	d.tenv = newTraceEnv(t, &d.now)
	d.f = d.s.Open()
	t.Cleanup(func() { d.f.Close() })
	for i, cmd := range []string{"__da u32 a; __data_loc char[] s", "__db u64 x"} {
		idx, err := d.reg(d.f, cmd, uint8(30-i), 0)
		if err != nil {
			t.Fatal(err)
		}
		d.idx[i] = idx
	}
	if buffered {
		d.ss = d.s.NewSession(SessionOptions{Comm: true, BufferBytes: 1 << 20})
		t.Cleanup(func() { d.ss.Close() })
	} else {
		d.ss, d.stream = streamSession(t, d.s, 3, 1<<16, SessionOptions{Comm: true})
	}
	for _, name := range []string{"__da", "__db"} {
		if err := d.ss.Attach(d.s.Lookup("user_events", name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.write(FileBufferSizeKB, "8"); err != nil {
		t.Fatal(err)
	}
	return d
}

// deliverCase is one record of the equivalence test.
type deliverCase struct {
	w       Writer
	ev      int    // 0: __da, 1: __db, 2: an index the file does not have
	payload []byte // after the index
}

// deliverCases are records of the two events from threads on CPUs 0 to
// 4: valid, a string not terminated (EFAULT), too short (EINVAL), an
// unknown index (ENOENT).
func deliverCases() []deliverCase {
	var cs []deliverCase
	for i := range 400 {
		w := Writer{PID: int32(200 + i%3), TGID: 200, Comm: fmt.Sprintf("worker-%d", i%3), CPU: i % 5}
		if i%97 == 0 {
			w.Comm = "renamed" // a thread's name changes
		}
		switch i % 7 {
		case 0, 1, 2:
			s := strings.Repeat("x", i%13)
			p := append(le32(uint32(i)), le32(uint32(len(s)+1)<<16|8)...)
			p = append(append(p, s...), 0)
			cs = append(cs, deliverCase{w: w, ev: 0, payload: p})
		case 3, 4:
			cs = append(cs, deliverCase{w: w, ev: 1, payload: binary.NativeEndian.AppendUint64(nil, uint64(i))})
		case 5:
			p := append(le32(uint32(i)), le32(3<<16|8)...)
			cs = append(cs, deliverCase{w: w, ev: 0, payload: append(p, "ab!"...)}) // not terminated
		case 6:
			if i%2 == 0 {
				cs = append(cs, deliverCase{w: w, ev: 1, payload: []byte{1, 2, 3}}) // too short
			} else {
				cs = append(cs, deliverCase{w: w, ev: 2, payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
			}
		}
	}
	return cs
}

// TestDeliverSameAsWriteStamped: the same records handed over through
// WriteStamped (a copy out of the ring, then the write path) and through
// Deliver (read in place, one copy into each consumer) give the same
// answers, the same trace and trace_pipe text, the same per-CPU stats and
// event counts, and byte for byte the same session streams — with the
// session the only consumer (the sample assembled in its stream), with
// the trace buffer too, and with a filter (through a scratch copy); and
// the streams hold the samples a session of today's ring format holds,
// each in the stream of its CPU (the in-memory buffer's records, which
// Read gives). Deliver with a Batch — flushed every few
// records, as a drainer's merge does — gives the same again.
func TestDeliverSameAsWriteStamped(t *testing.T) {
	stamped, deliver, old, batched := newDeliverEnv(t, false), newDeliverEnv(t, false), newDeliverEnv(t, true), newDeliverEnv(t, false)
	envs := []*deliverEnv{stamped, deliver, old, batched}
	var bt Batch
	p, c := ringPair(t)
	cases := deliverCases()
	for i, cs := range cases {
		switch i {
		case 100: // the trace buffer too: two consumers
			for _, d := range envs {
				d.enable("__da", true)
				d.enable("__db", true)
			}
		case 200: // a filter on the trace buffer's __da
			for _, d := range envs {
				if err := d.write("events/user_events/__da/filter", "a < 150 || a > 250"); err != nil {
					t.Fatal(err)
				}
			}
		case 300: // tracing off: the session alone again
			for _, d := range envs {
				if err := d.write(FileTracingOn, "0"); err != nil {
					t.Fatal(err)
				}
			}
		}
		ts := uint64(1_000_000_000 + i*1000)
		idx := uint32(77)
		if cs.ev < 2 {
			idx = stamped.idx[cs.ev]
		}
		_, errS := stamped.f.WriteStamped(cs.w, ts, idx, cs.payload)
		_, errO := old.f.WriteStamped(cs.w, ts, idx, cs.payload)
		if !p.Write(shmring.Meta{Time: ts, WriteIndex: idx}, cs.payload) {
			t.Fatal("the test's ring is full")
		}
		v, err := c.Peek()
		if err != nil {
			t.Fatal(err)
		}
		_, errD := deliver.f.Deliver(cs.w, ts, &v, nil)
		_, errB := batched.f.Deliver(cs.w, ts, &v, &bt)
		c.Advance(&v)
		if i%11 == 10 {
			bt.Flush()
		}
		if !errors.Is(errD, errnoOf(errS)) || !errors.Is(errO, errnoOf(errS)) || (errS == nil) != (errD == nil) || !errors.Is(errB, errnoOf(errS)) || (errS == nil) != (errB == nil) {
			t.Fatalf("record %d: WriteStamped %v, Deliver %v, with a Batch %v, a buffered session %v", i, errS, errD, errB, errO)
		}
	}
	bt.Flush()
	for _, f := range []string{FileTrace, FileCounts, FileStatus} {
		want := stamped.read(f)
		for _, d := range envs[1:] {
			if got := d.read(f); got != want {
				t.Errorf("%s differs:\n%s\nwant:\n%s", f, got, want)
			}
		}
	}
	for cpu := range 2 {
		want := string(stamped.s.trace.ring.AppendTrace(nil, cpu)) + fmt.Sprint(stamped.s.trace.ring.Stats(cpu))
		for _, d := range envs[1:] {
			if got := string(d.s.trace.ring.AppendTrace(nil, cpu)) + fmt.Sprint(d.s.trace.ring.Stats(cpu)); got != want {
				t.Errorf("CPU %d's trace and stats differ:\n%s\nwant:\n%s", cpu, got, want)
			}
		}
	}
	if want := readPipe(t, stamped.s); readPipe(t, deliver.s) != want || readPipe(t, old.s) != want || readPipe(t, batched.s) != want {
		t.Error("trace_pipe differs")
	}
	a, b := readStreams(t, stamped.stream), readStreams(t, deliver.stream)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatalf("the streams differ:\n%v\n%v", a, b)
	}
	if bb := readStreams(t, batched.stream); !slices.EqualFunc(a, bb, slices.Equal) {
		t.Fatalf("the streams delivered with a Batch differ:\n%v\n%v", a, bb)
	}
	// The session's buffer: the same samples, each CPU's in its stream.
	today := samplesOf(bufferRecs(t, old.ss))
	n := 0
	for k, recs := range a {
		var want []sessRec
		for _, r := range today {
			if int(r.cpu)%len(a) == k {
				want = append(want, r)
			}
		}
		if got := samplesOf(recs); !slices.Equal(got, want) {
			t.Fatalf("stream %d: samples\n%v\nwant the buffer's\n%v", k, got, want)
		}
		n += len(want)
		// Each thread's name before its first sample in each stream,
		// and again after it changed.
		names := map[uint32]string{}
		for _, r := range recs {
			switch r.kind {
			case "comm":
				names[r.tid] = r.data
			case "sample":
				if _, ok := names[r.tid]; !ok {
					t.Fatalf("stream %d: a sample of thread %d before its name", k, r.tid)
				}
			}
		}
	}
	if n == 0 || stamped.ss.Lost() != 0 {
		t.Fatalf("%d samples, %d lost", n, stamped.ss.Lost())
	}
}

// errnoOf is the errno err wraps, 0 for none.
func errnoOf(err error) error {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// ringPair is a shmring ring a test publishes into and reads in place.
func ringPair(t testing.TB) (*shmring.Producer, *shmring.Consumer) {
	t.Helper()
	p, err := shmring.Create(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	c, err := shmring.Attach(p.Fd())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		p.Close()
	})
	return p, c
}

// TestStreamLost: records that find their stream full are counted —
// the event's dropped count, the session's Lost — and told in a
// PERF_RECORD_LOST in that stream before the next record that fits, with
// the time and CPU of the first of them; other streams are not touched.
// An invalid record that finds no room is EFAULT, not lost, as
// user_event_perf validates before perf_output_begin fails.
func TestStreamLost(t *testing.T) {
	e, f, iov := benchWriteSetup(t)
	ev := e.s.Lookup("user_events", "bench")
	ss, rs := streamSession(t, e.s, 2, 4096, SessionOptions{})
	if err := ss.Attach(ev); err != nil {
		t.Fatal(err)
	}
	idx := binary.NativeEndian.Uint32(iov[0])
	w := Writer{PID: 11, TGID: 10, Comm: "w", CPU: 1}
	sample := wire.SampleSize(8 + len(iov[1]))
	fit := 4096 / sample
	for i := range fit + 5 {
		if _, err := f.WriteStamped(w, uint64(100+i), idx, iov[1]); err != nil {
			t.Fatal(err)
		}
	}
	bad := append([]byte(nil), iov[1]...)
	bad[len(bad)-1] = '!' // the __rel_loc string's NUL
	if _, err := f.WriteStamped(w, 999, idx, bad); !errors.Is(err, unix.EFAULT) {
		t.Fatalf("an invalid record with its stream full: %v, want EFAULT", err)
	}
	if ss.Lost() != 5 {
		t.Fatalf("Lost %d, want 5", ss.Lost())
	}
	if wr, dr := ev.Counts(); dr != 5 || wr != uint64(fit+5) {
		t.Fatalf("event counts %d written, %d dropped; want %d, 5", wr, dr, fit+5)
	}
	got := readStreams(t, rs)
	if len(got[0]) != 0 || len(got[1]) != fit {
		t.Fatalf("streams hold %d and %d records, want 0 and %d", len(got[0]), len(got[1]), fit)
	}
	if _, err := f.WriteStamped(w, 2000, idx, iov[1]); err != nil {
		t.Fatal(err)
	}
	got = readStreams(t, rs)
	if len(got[1]) != 2 || got[1][0].kind != "lost" || got[1][0].lost != 5 || got[1][0].ts != uint64(100+fit) ||
		got[1][0].cpu != 1 || got[1][0].typ != ev.ID() || got[1][1].kind != "sample" || got[1][1].ts != 2000 {
		t.Fatalf("after the reader made room: %+v", got[1])
	}
	// TakeLost hands over what does not fit.
	for i := range fit + 3 {
		f.WriteStamped(w, uint64(3000+i), idx, iov[1])
	}
	for range fit {
		f.WriteStamped(Writer{PID: 11, TGID: 10, Comm: "w", CPU: 0}, 4000, idx, iov[1])
	}
	if n, big := ss.TakeLost(); n != 3 || big != 0 {
		t.Fatalf("TakeLost %d, %d with stream 1 full: want 3, 0", n, big)
	}
	if n, _ := ss.TakeLost(); n != 0 {
		t.Fatalf("TakeLost a second time: %d", n)
	}
}

// TestStreamFilterBeforeSpace: a record the session's filter rejects
// takes no room in its stream and is not lost: a stream that the matching
// records filled still takes none of the others, and one the reader
// emptied takes the next matching record.
func TestStreamFilterBeforeSpace(t *testing.T) {
	d := newDeliverEnv(t, false)
	ev := d.s.Lookup("user_events", "__db")
	if err := d.ss.SetFilter(ev, "x >= 1000"); err != nil {
		t.Fatal(err)
	}
	w := Writer{PID: 5, TGID: 5, Comm: "f", CPU: 0}
	readStreams(t, d.stream)
	var taken int
	for i := range 20000 {
		x := uint64(i % 2000) // half rejected
		if _, err := d.f.WriteStamped(w, uint64(i), d.idx[1], binary.NativeEndian.AppendUint64(nil, x)); err != nil {
			t.Fatal(err)
		}
		if x >= 1000 && d.ss.Lost() == 0 {
			taken++
		}
	}
	recs := readStreams(t, d.stream)
	samples := samplesOf(recs[0])
	if len(samples) != taken {
		t.Fatalf("%d samples, %d matching records delivered before the first loss", len(samples), taken)
	}
	for _, r := range samples {
		if binary.NativeEndian.Uint64([]byte(r.data[8:])) < 1000 {
			t.Fatalf("a rejected record in the stream: %+v", r)
		}
	}
	lost := d.ss.Lost()
	if lost != 10000-uint64(taken) {
		t.Fatalf("lost %d: the rejected records were counted (%d matching, %d taken)", lost, 10000, taken)
	}
	if _, err := d.f.WriteStamped(w, 1<<40, d.idx[1], binary.NativeEndian.AppendUint64(nil, 5000)); err != nil {
		t.Fatal(err)
	}
	recs = readStreams(t, d.stream)
	if len(recs[0]) < 2 || recs[0][0].kind != "lost" || recs[0][0].lost != lost || recs[0][len(recs[0])-1].ts != 1<<40 {
		t.Fatalf("after the reader emptied the stream: %+v", recs[0])
	}
}

// TestDeliverWhileResizing: records delivered in place while tracing_on
// flips and buffer_size_kb changes, from another goroutine (run with
// -race): no fault, no race, and the trace and the streams stay readable
// and consistent.
func TestDeliverWhileResizing(t *testing.T) {
	d := newDeliverEnv(t, false)
	d.enable("__da", true)
	p, c := ringPair(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			d.write(FileTracingOn, fmt.Sprint(i%2))
			d.write(FileBufferSizeKB, fmt.Sprint(4+i%16))
		}
	}()
	w := Writer{PID: 9, TGID: 9, Comm: "r", CPU: 0}
	pl := append(le32(1), le32(2<<16|8)...)
	pl = append(pl, "z\x00"...)
	for i := range 20000 {
		w.CPU = i % 4
		p.Write(shmring.Meta{Time: uint64(i), WriteIndex: d.idx[0]}, pl)
		v, err := c.Peek()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.f.Deliver(w, uint64(i), &v, nil); err != nil {
			t.Fatal(err)
		}
		c.Advance(&v)
		if i%1000 == 0 {
			readStreams(t, d.stream)
		}
	}
	stop.Store(true)
	wg.Wait()
	d.read(FileTrace)
	readStreams(t, d.stream)
}

// TestDeliverNoAllocs: a record delivered in place into a session's
// stream, and into the trace buffer, allocates nothing.
func TestDeliverNoAllocs(t *testing.T) {
	for _, ftraceToo := range []bool{false, true} {
		d := newDeliverEnv(t, false)
		if ftraceToo {
			d.enable("__db", true)
		}
		p, c := ringPair(t)
		w := Writer{PID: 9, TGID: 9, Comm: "r", CPU: 1}
		pl := binary.NativeEndian.AppendUint64(nil, 7)
		if n := testing.AllocsPerRun(1000, func() {
			p.Write(shmring.Meta{WriteIndex: d.idx[1]}, pl)
			v, _ := c.Peek()
			d.f.Deliver(w, 1, &v, nil)
			c.Advance(&v)
			d.stream[1].Consume(len(d.stream[1].Available()))
		}); n != 0 {
			t.Errorf("ftrace too %v: %v allocations", ftraceToo, n)
		}
	}
}

// FuzzDeliver hands Deliver records of any index, length and payload
// while another goroutine rewrites the ring's bytes under the copy, as a
// hostile producer can: it must not panic, and every record a consumer
// received is one of the file's own events, valid as received — copied
// once and validated in the copy — whatever the ring held a moment later.
func FuzzDeliver(f *testing.F) {
	f.Add(uint32(0), []byte("\x01\x00\x00\x00\x03\x00\x08\x00ab\x00"), uint8(0), false)
	f.Add(uint32(1), []byte("12345678"), uint8(3), true)
	f.Add(uint32(2), []byte{}, uint8(1), false)
	f.Add(uint32(1<<31), []byte("xxxx"), uint8(2), true)
	f.Fuzz(func(t *testing.T, idx uint32, pl []byte, cpu uint8, scribble bool) {
		if len(pl) > 4000 {
			pl = pl[:4000]
		}
		e := newFuzzDeliverEnv(t)
		if idx < 2 {
			idx = e.idx[idx]
		}
		if !e.p.Write(shmring.Meta{Time: 5, WriteIndex: idx}, pl) {
			t.Skip("payload longer than the ring")
		}
		v, err := e.c.Peek()
		if err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		if scribble {
			// The producer's own mapping of the payload, rewritten.
			words := unsafe.Slice((*uint64)(e.base), 1<<20/8)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := uint64(0); !stop.Load(); i++ {
					atomic.StoreUint64(&words[(4+i%8)%uint64(len(words))], i*0x9e3779b97f4a7c15)
				}
			}()
		}
		w := Writer{PID: 3, TGID: 3, Comm: "fz", CPU: int(cpu)}
		e.f.Deliver(w, 5, &v, nil)
		stop.Store(true)
		wg.Wait()
		e.c.Advance(&v)
		for _, recs := range readStreams(t, e.rs) {
			for _, r := range recs {
				if r.kind != "sample" {
					continue
				}
				var ev *Event
				for _, name := range []string{"__fa", "__fb"} {
					if x := e.s.Lookup("user_events", name); x != nil && x.ID() == r.typ {
						ev = x
					}
				}
				if ev == nil {
					t.Fatalf("a sample of type %d: not the file's events", r.typ)
				}
				raw := []byte(r.data)[:8+len(pl)]
				if err := ev.def.Validate(raw); err != nil {
					t.Fatalf("a sample that fails validation reached the stream: %v", err)
				}
			}
		}
		text := e.read(FileTrace)
		if strings.Contains(text, "Unknown type") {
			t.Fatalf("trace:\n%s", text)
		}
	})
}

// fuzzDeliverEnv is FuzzDeliver's subsystem: two events of one file, a
// second file's event (whose index no record may reach), a session with
// streams and the trace buffer on both, and the ring.
type fuzzDeliverEnv struct {
	*tenv
	f    *File
	idx  [2]uint32
	rs   []*shmring.StreamReader
	p    *shmring.Producer
	c    *shmring.Consumer
	base unsafe.Pointer // the producer's mapping of the ring's data
}

func newFuzzDeliverEnv(t *testing.T) *fuzzDeliverEnv {
	now := uint64(1)
	e := &fuzzDeliverEnv{tenv: newTraceEnv(t, &now)}
	e.f = e.s.Open()
	t.Cleanup(func() { e.f.Close() })
	other := e.s.Open()
	t.Cleanup(func() { other.Close() })
	for i, cmd := range []string{"__fa u32 a; __data_loc char[] s", "__fb u64 x"} {
		idx, err := e.reg(e.f, cmd, uint8(30-i), 0)
		if err != nil {
			t.Fatal(err)
		}
		e.idx[i] = idx
	}
	if _, err := e.reg(other, "__fc u8 y", 20, 0); err != nil {
		t.Fatal(err)
	}
	var ss *Session
	ss, e.rs = streamSession(t, e.s, 2, 1<<16, SessionOptions{Comm: true})
	for _, name := range []string{"__fa", "__fb", "__fc"} {
		if err := ss.Attach(e.s.Lookup("user_events", name)); err != nil {
			t.Fatal(err)
		}
	}
	e.enable("__fa", true)
	e.p, e.c = ringPair(t)
	// The producer's mapping of the ring's data, as a hostile producer
	// has it.
	data, err := unix.Mmap(e.p.Fd(), int64(unix.Getpagesize()), 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(data) })
	e.base = unsafe.Pointer(&data[0])
	return e
}

// TestStreamProducerLossesAndTooLarge: records a producer's ring dropped
// (WriteLost) and records too large for perf reach the stream of their CPU
// as PERF_RECORD_LOST — too large ones counted apart in TooLarge — written
// there before its next record, or when the reader asks (TakeLost).
func TestStreamProducerLossesAndTooLarge(t *testing.T) {
	d := newDeliverEnv(t, false)
	w := Writer{PID: 4, TGID: 4, Comm: "p", CPU: 5} // stream 5 mod 3 = 2
	if err := d.f.WriteLost(w, 70, d.idx[1], 7); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 9000)
	if _, err := d.f.WriteStamped(w, 80, d.idx[1], big); err != nil {
		t.Fatal(err)
	}
	if d.ss.Lost() != 7 || d.ss.TooLarge() != 1 {
		t.Fatalf("Lost %d, TooLarge %d; want 7, 1", d.ss.Lost(), d.ss.TooLarge())
	}
	if n, big := d.ss.TakeLost(); n != 0 || big != 0 {
		t.Fatalf("TakeLost with room: %d, %d handed over; want them written", n, big)
	}
	recs := readStreams(t, d.stream)
	if len(recs[0])+len(recs[1]) != 0 || len(recs[2]) != 2 {
		t.Fatalf("streams %+v", recs)
	}
	typ := d.s.Lookup("user_events", "__db").ID()
	if r := recs[2][0]; r.kind != "lost" || r.lost != 7 || r.ts != 70 || r.cpu != 5 || r.typ != typ {
		t.Fatalf("first LOST %+v", r)
	}
	if r := recs[2][1]; r.kind != "lost" || r.lost != 1 || r.ts != 80 || r.typ != typ {
		t.Fatalf("second LOST %+v", r)
	}
}

// TestBatchBesideOtherWriters: while a deliverer's Batch holds a stream
// across its runs, another goroutine's writes into the same stream wait
// for the run's end and none is lost or torn: every record of both is in
// the stream once, each writer's in its order (run with -race).
func TestBatchBesideOtherWriters(t *testing.T) {
	var now uint64 = 1
	e := newTraceEnv(t, &now)
	f := e.s.Open()
	t.Cleanup(func() { f.Close() })
	idx, err := e.reg(f, "__dbb u64 x", 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	ss, rs := streamSession(t, e.s, 2, 4<<20, SessionOptions{})
	if err := ss.Attach(e.s.Lookup("user_events", "__dbb")); err != nil {
		t.Fatal(err)
	}
	p, c := ringPair(t)
	const n = 5000
	w := Writer{PID: 7, TGID: 7, Comm: "t", CPU: 1}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			if _, err := f.WriteStamped(w, uint64(i+1), idx, binary.NativeEndian.AppendUint64(nil, uint64(n+i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var bt Batch
	for i := range n {
		for !p.Write(shmring.Meta{Time: uint64(i + 1), WriteIndex: idx}, binary.NativeEndian.AppendUint64(nil, uint64(i))) {
			t.Fatal("the test's ring is full")
		}
		v, err := c.Peek()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Deliver(w, v.Time, &v, &bt); err != nil {
			t.Fatal(err)
		}
		c.Advance(&v)
		if i%64 == 63 {
			bt.Flush()
		}
	}
	bt.Flush()
	wg.Wait()
	streams := readStreams(t, rs)
	if len(streams[0]) != 0 {
		t.Fatalf("stream 0 has %d records; every writer was on CPU 1", len(streams[0]))
	}
	next := [2]uint64{0, n}
	for _, r := range streams[1] {
		if r.kind != "sample" {
			t.Fatalf("a %s record", r.kind)
		}
		x := binary.NativeEndian.Uint64([]byte(r.data[eventdef.HeaderSize:]))
		k := 0
		if x >= n {
			k = 1
		}
		if x != next[k] {
			t.Fatalf("writer %d's record %d where %d was next", k, x, next[k])
		}
		next[k]++
	}
	if next != [2]uint64{n, 2 * n} {
		t.Fatalf("records up to %v, want %d and %d", next, n, 2*n)
	}
}

// TestStreamLostRuns: losses of many events, more runs than a stream
// keeps, still add up exactly, each kind (too large or not) apart, and
// each in the stream of its CPU.
func TestStreamLostRuns(t *testing.T) {
	e := newEnv(t)
	ss, rs := streamSession(t, e.s, 2, 1<<16, SessionOptions{})
	for i := range 40 {
		ss.noteLost(&Event{id: 1000 + i}, uint64(i), 0, uint64(i+1))
		if i%10 == 9 {
			ss.noteLostFlags(&Event{id: 2000 + i}, uint64(i), 1, 2, lostTooLarge)
		}
	}
	if lost, big := ss.TakeLost(); lost != 0 || big != 0 {
		t.Fatalf("TakeLost with room: %d, %d", lost, big)
	}
	streams := readStreams(t, rs)
	var lost [2]uint64
	for k, recs := range streams {
		if len(recs) > wire.MaxLostNotes {
			t.Errorf("stream %d: %d lost records, more than %d", k, len(recs), wire.MaxLostNotes)
		}
		for _, r := range recs {
			if r.kind != "lost" || r.cpu != uint32(k) {
				t.Fatalf("stream %d: %+v", k, r)
			}
			lost[k] += r.lost
		}
	}
	if lost != [2]uint64{40 * 41 / 2, 8} {
		t.Errorf("the streams tell %v lost, want %d and 8", lost, 40*41/2)
	}
	if r := streams[0][0]; r.typ != 1000 || r.ts != 0 || r.lost != 1 {
		t.Errorf("first lost record %+v, want 1 of event 1000 at 0", r)
	}
	if ss.Lost() != 40*41/2 || ss.TooLarge() != 8 {
		t.Errorf("Lost %d, TooLarge %d", ss.Lost(), ss.TooLarge())
	}
}
