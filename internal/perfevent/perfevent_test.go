package perfevent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/perfdata"
)

// rawAttr lays out a of size bytes as the caller's memory holds it: zeros
// past the struct perfdata knows.
func rawAttr(a perfdata.Attr, size int) []byte {
	b := perfdata.AppendAttr(nil, &a, min(size, perfdata.AttrSizeVer8))
	b = append(b, make([]byte, max(0, size-len(b)))...)
	ne.PutUint32(b[4:], uint32(size))
	return b
}

var tpAttr = perfdata.Attr{Type: perfdata.TypeTracepoint, Config: 65535, SamplePeriod: 1,
	SampleType: perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU | perfdata.SamplePeriod | perfdata.SampleRaw | perfdata.SampleIdentifier}

// TestCheck: perf_event_open's checks of the attr and arguments, with the
// kernel's errno, and EOPNOTSUPP for what uetrace cannot give.
func TestCheck(t *testing.T) {
	withFlags := func(f uint64) perfdata.Attr { a := tpAttr; a.Flags = f; return a }
	withST := func(st uint64) perfdata.Attr { a := tpAttr; a.SampleType = st; return a }
	tail := rawAttr(tpAttr, 200)
	tail[150] = 1
	reserved2 := rawAttr(tpAttr, perfdata.AttrSizeVer8)
	reserved2[110] = 1
	for _, c := range []struct {
		name     string
		raw      []byte
		pid, cpu int
		flags    int
		want     error
	}{
		{"ver8", rawAttr(tpAttr, perfdata.AttrSizeVer8), 0, -1, 0, nil},
		{"ver0", rawAttr(tpAttr, perfdata.AttrSizeVer0), 0, -1, FlagFDCloexec, nil},
		{"larger, zero tail", rawAttr(tpAttr, 300), 0, -1, 0, nil},
		{"too small", rawAttr(tpAttr, perfdata.AttrSizeVer8)[:32], 0, -1, 0, unix.E2BIG},
		{"too large", make([]byte, MaxAttrSize+1), 0, -1, 0, unix.E2BIG},
		{"non-zero tail", tail, 0, -1, 0, unix.E2BIG},
		{"bad flags", rawAttr(tpAttr, 128), 0, -1, 1 << 8, unix.EINVAL},
		{"reserved flag", rawAttr(withFlags(1<<40), 128), 0, -1, 0, unix.EINVAL},
		{"reserved_2", reserved2, 0, -1, 0, unix.EINVAL},
		{"unknown sample bit", rawAttr(withST(1<<30), 128), 0, -1, 0, unix.EINVAL},
		{"weight and weight_struct", rawAttr(withST(perfdata.SampleWeight|perfdata.SampleWeightStruct), 128), 0, -1, 0, unix.EINVAL},
		{"pid and cpu -1", rawAttr(tpAttr, 128), -1, -1, 0, unix.EINVAL},
		{"cpu out of range", rawAttr(tpAttr, 128), 0, 64, 0, unix.EINVAL},
		{"system-wide on a cpu", rawAttr(tpAttr, 128), -1, 1, 0, nil},
		{"callchain", rawAttr(withST(perfdata.SampleCallchain), 128), 0, -1, 0, unix.EOPNOTSUPP},
		{"freq", rawAttr(withFlags(perfdata.AttrFreq), 128), 0, -1, 0, unix.EOPNOTSUPP},
		{"cgroup", rawAttr(tpAttr, 128), 3, 0, FlagPIDCgroup, unix.EOPNOTSUPP},
		{"not a tracepoint", rawAttr(perfdata.Attr{Type: 1}, 128), 0, -1, 0, unix.EINVAL},
		{"clock realtime", rawAttr(perfdata.Attr{Type: 2, Flags: perfdata.AttrUseClockID, ClockID: unix.CLOCK_REALTIME}, 128), 0, -1, 0, nil},
		{"clock unknown", rawAttr(perfdata.Attr{Type: 2, Flags: perfdata.AttrUseClockID, ClockID: 3}, 128), 0, -1, 0, unix.EINVAL},
	} {
		_, err := Check(c.raw, c.pid, c.cpu, c.flags, 8)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	_, err := Check(rawAttr(withST(perfdata.SampleCallchain|perfdata.SampleRegsUser), 128), 0, -1, 0, 8)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("sample_type CALLCHAIN|REGS_USER (uetrace fills")) {
		t.Errorf("unsupported sample_type said %v", err)
	}
}

// testEvent is an event of attr with a ring of one metadata and dataPages
// data pages mapped as a reader maps it (perfring), a clock that advances
// 10 ns a read, and a count of wakeups.
func testEvent(t testing.TB, attr perfdata.Attr, dataPages int, writable bool) (*Event, *perfring.Ring, *atomic.Int32) {
	t.Helper()
	var clock atomic.Uint64
	wakes := new(atomic.Int32)
	e, err := New(attr, -1, func() uint64 { return clock.Add(10) }, func() { wakes.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	pg := os.Getpagesize()
	if err := e.Mmap((1+dataPages)*pg, 0, writable); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Dup(e.Memfd())
	if err != nil {
		t.Fatal(err)
	}
	r, err := perfring.NewRing(fd, dataPages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return e, r, wakes
}

// rawRecord is a tracepoint record: the common header and a u32 payload.
func rawRecord(n uint32) []byte {
	b := make([]byte, 12)
	ne.PutUint16(b, 65535)
	ne.PutUint32(b[4:], 42)
	ne.PutUint32(b[8:], n)
	return b
}

func add(e *Event, n uint32) {
	e.Add(&Record{PID: 40, TID: 42, CPU: 1, Time: 1000 + uint64(n), Comm: "writer", Raw: rawRecord(n)})
}

// decoded is what the tests look at of a ring's records.
type decoded struct {
	typ  uint32
	id   uint64
	n    uint32 // a sample's payload, a LOST record's count, a COMM's tid
	comm string
}

func drain(r *perfring.Ring, st uint64) []decoded {
	var out []decoded
	r.Read(func(rec []byte) {
		typ := binary.NativeEndian.Uint32(rec)
		d := decoded{typ: typ}
		switch typ {
		case perfdata.RecordSample:
			d.id = ne.Uint64(rec[8:])                 // IDENTIFIER first
			raw := rec[perfdata.SampleSize(st, 0)-8:] // the raw size word: SampleSize counts 8 for an empty one
			d.n = ne.Uint32(raw[4+8:])
		case perfdata.RecordLost:
			d.id, d.n = ne.Uint64(rec[8:]), uint32(ne.Uint64(rec[16:]))
		case perfdata.RecordComm:
			d.n = ne.Uint32(rec[12:])
			name, _, _ := bytes.Cut(rec[16:], []byte{0})
			d.comm = string(name)
		}
		out = append(out, d)
	})
	return out
}

// TestRingSamples: samples in the ring as the kernel lays them out, read by
// perf's way of reading (perfring), across the ring's wrap.
func TestRingSamples(t *testing.T) {
	e, r, _ := testEvent(t, tpAttr, 1, true)
	size := perfdata.SampleSize(tpAttr.SampleType, 12)
	if size != 64 {
		t.Fatalf("a sample of a 12-byte record is %d bytes, want 64 (the kernel's raw size 12)", size)
	}
	total := 0
	for round := range 5 {
		for i := range 40 { // 2560 bytes: wraps the 4096-byte page every other round
			add(e, uint32(round*100+i))
		}
		got := drain(r, tpAttr.SampleType)
		if len(got) != 40 {
			t.Fatalf("round %d: read %d records, want 40", round, len(got))
		}
		for i, d := range got {
			if d.typ != perfdata.RecordSample || d.id != e.ID || d.n != uint32(round*100+i) {
				t.Fatalf("round %d record %d: %+v", round, i, d)
			}
		}
		total += 40
	}
	if c, lost := e.Counts(); c != uint64(total) || lost != 0 {
		t.Errorf("count %d lost %d, want %d and 0", c, lost, total)
	}
}

// TestRingLost: what does not fit is counted, and a PERF_RECORD_LOST with
// the count comes before the next sample that fits, once the reader has
// made room; the kernel's CIRC_SPACE keeps one byte free, so a page holds
// 63 samples of 64 bytes, not 64.
func TestRingLost(t *testing.T) {
	e, r, _ := testEvent(t, tpAttr, 1, true)
	for i := range 70 {
		add(e, uint32(i))
	}
	got := drain(r, tpAttr.SampleType)
	if len(got) != 63 {
		t.Fatalf("read %d samples of 70 into a 4096-byte ring, want 63", len(got))
	}
	add(e, 1000)
	got = drain(r, tpAttr.SampleType)
	want := []decoded{{typ: perfdata.RecordLost, id: e.ID, n: 7}, {typ: perfdata.RecordSample, id: e.ID, n: 1000}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the reader made room: %+v, want %+v", got, want)
	}
	var b [40]byte
	e.Attr.ReadFormat = perfdata.FormatLost
	if n, err := e.Read(b[:]); err != nil || n != 16 || ne.Uint64(b[:]) != 71 || ne.Uint64(b[8:]) != 7 {
		t.Errorf("read: %d %v % x, want count 71 lost 7", n, err, b[:n])
	}
}

// TestRingHostileTail: a reader's data_tail outside [the tail believed
// last, head] is not believed: the writer neither writes over unread
// records nor past the ring; its records are lost, and counted.
func TestRingHostileTail(t *testing.T) {
	e, _, _ := testEvent(t, tpAttr, 1, true)
	pg := os.Getpagesize()
	mem, err := unix.Mmap(e.Memfd(), 0, 2*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	tail := (*uint64)(unsafe.Pointer(&mem[pgDataTail]))
	head := (*uint64)(unsafe.Pointer(&mem[pgDataHead]))
	for _, bad := range []uint64{1 << 62, ^uint64(0), 4096 * 3} {
		atomic.StoreUint64(tail, bad)
		for i := range 100 {
			add(e, uint32(i))
		}
		if h := atomic.LoadUint64(head); h > 63*64 {
			t.Fatalf("tail %#x: head went to %d, past a ring nobody read", bad, h)
		}
	}
	if _, lost := e.Counts(); lost != 300-63 {
		t.Errorf("lost %d, want %d", lost, 300-63)
	}
}

// TestRingOverwrite: a ring mapped read-only is overwritten, as the kernel's
// without VM_WRITE: nothing is lost, the head runs on.
func TestRingOverwrite(t *testing.T) {
	e, _, _ := testEvent(t, tpAttr, 1, false)
	for i := range 1000 {
		add(e, uint32(i))
	}
	if c, lost := e.Counts(); c != 1000 || lost != 0 {
		t.Errorf("count %d lost %d, want 1000 and 0", c, lost)
	}
	e.mu.Lock()
	head := e.ring.head
	e.mu.Unlock()
	if head != 64000 {
		t.Errorf("head %d, want 64000", head)
	}
}

// TestWakeups: wakeup_events wakes the pollers every so many samples and
// poll answers POLLIN once per wakeup; without it, the watermark (half the
// ring by default) does.
func TestWakeups(t *testing.T) {
	a := tpAttr
	a.Wakeup = 3
	e, r, wakes := testEvent(t, a, 1, true)
	if got := e.Poll(); got != 0 {
		t.Errorf("poll before any sample: %#x", got)
	}
	add(e, 1)
	add(e, 2)
	if wakes.Load() != 0 || e.Poll() != 0 {
		t.Errorf("woken after 2 samples of 3")
	}
	add(e, 3)
	if wakes.Load() != 1 || e.Poll() != unix.POLLIN || e.Poll() != 0 {
		t.Errorf("after 3 samples: %d wakes; poll should say POLLIN once", wakes.Load())
	}
	drain(r, a.SampleType)

	e2, _, wakes2 := testEvent(t, tpAttr, 1, true)
	for i := range 32 { // 2048 bytes: the watermark
		add(e2, uint32(i))
	}
	if wakes2.Load() != 0 {
		t.Errorf("woken at the watermark, want past it")
	}
	add(e2, 32)
	if wakes2.Load() != 1 || e2.Poll() != unix.POLLIN {
		t.Errorf("not woken past half the ring: %d", wakes2.Load())
	}
	e2.HangUp()
	if e2.Poll() != unix.POLLHUP {
		t.Errorf("poll of an event whose task is gone: not POLLHUP")
	}
}

// TestRead: read(2)'s layouts, disabled time, and ENOSPC.
func TestRead(t *testing.T) {
	a := tpAttr
	a.Flags = perfdata.AttrDisabled
	a.SamplePeriod = 0
	var clock uint64
	e, err := New(a, -1, func() uint64 { clock += 100; return clock }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	add(e, 1) // disabled: not counted
	e.Enable()
	add(e, 2)
	add(e, 3)
	e.Disable()
	add(e, 4)
	var b [64]byte
	for _, c := range []struct {
		rf   uint64
		want []uint64
	}{
		{0, []uint64{2}},
		{perfdata.FormatTotalTimeEnabled | perfdata.FormatTotalTimeRunning, []uint64{2, 100, 100}},
		{perfdata.FormatID | perfdata.FormatLost, []uint64{2, e.ID, 0}},
		{perfdata.FormatGroup | perfdata.FormatID, []uint64{1, 2, e.ID}},
		{perfdata.FormatGroup | perfdata.FormatTotalTimeEnabled, []uint64{1, 100, 2}},
	} {
		e.Attr.ReadFormat = c.rf
		n, err := e.Read(b[:])
		var got []uint64
		for i := 0; i+8 <= n; i += 8 {
			got = append(got, ne.Uint64(b[i:]))
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("read_format %#x: %v %v, want %v", c.rf, got, err, c.want)
		}
		if _, err := e.Read(b[:n-1]); !errors.Is(err, unix.ENOSPC) {
			t.Errorf("read_format %#x: read of %d bytes: %v, want ENOSPC", c.rf, n-1, err)
		}
	}
}

// TestSetOutput: an event's samples go to another's ring, with its own id;
// the kernel's refusals.
func TestSetOutput(t *testing.T) {
	o, r, wakes := testEvent(t, tpAttr, 1, true)
	e, err := New(tpAttr, -1, func() uint64 { return 1 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.SetOutput(e); !errors.Is(err, unix.EINVAL) {
		t.Errorf("to itself: %v", err)
	}
	if err := o.SetOutput(e); !errors.Is(err, unix.EBUSY) {
		t.Errorf("of a mapped event: %v", err)
	}
	if err := e.SetOutput(o); err != nil {
		t.Fatal(err)
	}
	if err := e.Mmap(2*os.Getpagesize(), 0, true); !errors.Is(err, unix.EINVAL) {
		t.Errorf("mmap of a redirected event: %v", err)
	}
	add(e, 5)
	add(o, 6)
	got := drain(r, tpAttr.SampleType)
	want := []decoded{{typ: perfdata.RecordSample, id: e.ID, n: 5}, {typ: perfdata.RecordSample, id: o.ID, n: 6}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the output ring: %+v, want %+v", got, want)
	}
	other, err := New(tpAttr, 3, func() uint64 { return 1 }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.SetOutput(o); err != nil {
		t.Errorf("a CPU event into an any-CPU ring: %v", err)
	}
	cpu1, _ := New(tpAttr, 1, func() uint64 { return 1 }, nil)
	defer cpu1.Close()
	if err := cpu1.SetOutput(other); !errors.Is(err, unix.EINVAL) {
		t.Errorf("into another CPU's: %v", err)
	}
	_ = wakes
}

// TestComm: with attr.comm, a thread's name comes before its first sample
// and again when it changes.
func TestComm(t *testing.T) {
	a := tpAttr
	a.Flags = perfdata.AttrComm | perfdata.AttrSampleIDAll
	e, r, _ := testEvent(t, a, 1, true)
	add(e, 1)
	add(e, 2)
	e.Add(&Record{PID: 40, TID: 42, Time: 5, Comm: "renamed-to-a-long-name", Raw: rawRecord(3)})
	got := drain(r, a.SampleType)
	want := []decoded{
		{typ: perfdata.RecordComm, n: 42, comm: "writer"},
		{typ: perfdata.RecordSample, id: e.ID, n: 1},
		{typ: perfdata.RecordSample, id: e.ID, n: 2},
		{typ: perfdata.RecordComm, n: 42, comm: "renamed-to-a-lo"},
		{typ: perfdata.RecordSample, id: e.ID, n: 3},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ring:\n%+v\nwant\n%+v", got, want)
	}
}

// TestClock: with use_clockid, a sample's time is in that clock.
func TestClock(t *testing.T) {
	var m, r unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &m)
	unix.ClockGettime(unix.CLOCK_REALTIME, &r)
	a := tpAttr
	a.Flags = perfdata.AttrUseClockID
	a.ClockID = unix.CLOCK_REALTIME
	got := recordTime(&a, uint64(m.Nano()))
	if d := int64(got) - r.Nano(); d < -int64(time.Second) || d > int64(time.Second) {
		t.Errorf("a CLOCK_MONOTONIC time now in CLOCK_REALTIME is %d, now is %d", got, r.Nano())
	}
	a.ClockID = unix.CLOCK_MONOTONIC
	if recordTime(&a, 5) != 5 || recordTime(&tpAttr, 5) != 5 {
		t.Error("a CLOCK_MONOTONIC time changed")
	}
}

// TestRingLayout: perf_mmap's rules for a mapping's length.
func TestRingLayout(t *testing.T) {
	pg := 4096
	for _, c := range []struct {
		length int
		want   error
	}{
		{pg, nil}, {2 * pg, nil}, {5 * pg, nil}, {3 * pg, nil},
		{4 * pg, unix.EINVAL}, {pg + 1, unix.EINVAL}, {0, unix.EINVAL},
		{pg + MaxRingBytes*2, unix.EPERM},
	} {
		if _, err := ringLayout(c.length, pg); c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("length %d: %v, want %v", c.length, err, c.want)
		}
	}
}

// TestControl: requests and replies round-trip; malformed ones are EINVAL.
func TestControl(t *testing.T) {
	for _, r := range []Request{
		{Op: OpOpen, PID: -1, CPU: 3, Flags: FlagFDCloexec, Caller: 77, Attr: rawAttr(tpAttr, 128)},
		{Op: OpMmap, Event: 1<<32 + 5, Length: 8192, Offset: 4096, Prot: 3},
		{Op: OpExec, Caller: 9},
	} {
		got, err := DecodeRequest(r.Encode())
		if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
			t.Errorf("%+v: decoded %+v, %v", r, got, err)
		}
	}
	for _, b := range [][]byte{nil, {1, 0, 0, 0}, {9, 0, 0, 0}, append((&Request{Op: OpMmap}).Encode(), 0)} {
		if _, err := DecodeRequest(b); !errors.Is(err, unix.EINVAL) {
			t.Errorf("% x: %v, want EINVAL", b, err)
		}
	}
	rep := ReplyOf(0, fmt.Errorf("perf_event_open: no: %w", unix.EOPNOTSUPP))
	got, err := DecodeReply(rep.Encode())
	if err != nil || !errors.Is(got.Err(), unix.EOPNOTSUPP) || got.Err().Error() != "perf_event_open: no: operation not supported" {
		t.Errorf("reply: %+v %v", got, err)
	}
	for _, p := range []struct {
		path string
		id   uint64
		ok   bool
	}{
		{"/sys/kernel/tracing/" + Path(12), 12, true},
		{Path(7), 7, true},
		{"/x/not" + Dir + "/3", 0, false},
		{"/x/" + Dir + "/ctl", 0, false},
	} {
		if id, ok := IDOfPath(p.path); id != p.id || ok != p.ok {
			t.Errorf("IDOfPath(%q) = %d, %v", p.path, id, ok)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add((&Request{Op: OpOpen, PID: 0, CPU: -1, Attr: rawAttr(tpAttr, 128)}).Encode())
	f.Add((&Request{Op: OpMmap, Event: 3, Length: 8192}).Encode())
	f.Add((&Request{Op: OpExec, Caller: 1}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			if !errors.Is(err, unix.EINVAL) {
				t.Fatalf("error %v does not wrap EINVAL", err)
			}
			return
		}
		if !bytes.Equal(r.Encode(), b) {
			t.Fatalf("%+v re-encodes to % x, not % x", r, r.Encode(), b)
		}
		if r.Op == OpOpen {
			if _, err := Check(r.Attr, int(r.PID), int(r.CPU), int(r.Flags), 64); err != nil {
				var e unix.Errno
				if !errors.As(err, &e) {
					t.Fatalf("Check: %v wraps no errno", err)
				}
			}
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add((&Reply{Value: 5}).Encode())
	f.Add((&Reply{Errno: unix.EINVAL, Why: "no"}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReply(b)
		if err == nil && !bytes.Equal(r.Encode(), b) {
			t.Fatalf("%+v re-encodes otherwise", r)
		}
	})
}

// BenchmarkAdd is a record counted and sampled into a ring its reader
// drains: the daemon's cost per record delivered to a perf event.
func BenchmarkAdd(b *testing.B) {
	e, r, _ := testEvent(b, tpAttr, 8, true)
	rec := Record{PID: 40, TID: 42, CPU: 1, Time: 1000, Comm: "writer", Raw: rawRecord(1)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Add(&rec)
		if i++; i%256 == 0 {
			r.Read(func([]byte) {})
		}
	}
	if _, lost := e.Counts(); lost != 0 {
		b.Fatalf("%d lost", lost)
	}
}
