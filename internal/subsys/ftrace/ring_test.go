package ftrace

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

func TestEventSize(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 8}, {1, 8}, {4, 8}, {5, 16}, {8, 16}, {9, 16}, {12, 16}, {13, 20}, {16, 20},
		{48, 52}, {108, 112}, {109, 116}, {112, 116}, {113, 124}, {116, 124}, {117, 128},
		{508, 516}, {4008, 4016}, {4072, 4080},
	} {
		if got := EventSize(tc.n); got != tc.want {
			t.Errorf("EventSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestPagesFor(t *testing.T) {
	for _, tc := range []struct{ kb, want int }{
		{1, 2}, {4, 2}, {7, 2}, {8, 3}, {11, 3}, {12, 4}, {1408, 354},
	} {
		if got := PagesFor(tc.kb); got != tc.want {
			t.Errorf("PagesFor(%d) = %d, want %d", tc.kb, got, tc.want)
		}
	}
	r := New(Config{NCPU: 2})
	if got := string(r.AppendBufferSizeKB(nil, -1)); got != "7 (expanded: 1408)\n" {
		t.Errorf("boot buffer_size_kb = %q", got)
	}
	if got := string(r.AppendBufferTotalSizeKB(nil)); got != "14 (expanded: 2816)\n" {
		t.Errorf("boot buffer_total_size_kb = %q", got)
	}
	if err := r.Expand(); err != nil {
		t.Fatal(err)
	}
	if got := string(r.AppendBufferSizeKB(nil, -1)); got != "1410\n" {
		t.Errorf("expanded buffer_size_kb = %q", got)
	}
	if err := r.ResizeCPU(1, 8); err != nil {
		t.Fatal(err)
	}
	if got := string(r.AppendBufferSizeKB(nil, -1)) + string(r.AppendBufferSizeKB(nil, 1)); got != "X\n11\n" {
		t.Errorf("after resizing cpu1: %q", got)
	}
	if err := r.Resize(0); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Resize(0) = %v, want EINVAL", err)
	}
}

// writer makes records of an event "w u32 seq" whose payload is the u32
// sequence number followed by padding.
type writer struct {
	ev  *eventdef.Event
	seq uint32
}

func newWriter(t testing.TB) *writer { return &writer{ev: mustParse(t, "w u32 seq")} }

func (w *writer) entry(cpu int, ts uint64, size int) *Entry {
	p := make([]byte, size)
	if size >= 4 {
		binary.NativeEndian.PutUint32(p, w.seq)
	}
	w.seq++
	return &Entry{TS: ts, CPU: cpu, PID: 100 + int32(cpu), Comm: "w", Event: w.ev, Tracepoint: "w", Record: record(1, 0, 0, 100+int32(cpu), p)}
}

func seqOf(e *Entry) uint32 { return binary.NativeEndian.Uint32(e.Record[8:]) }

func TestOverwrite(t *testing.T) {
	// The kernel's numbers (size-4k-40 in the goldens): 352 writes of a
	// 40-byte payload into 2 pages keep 118 and lose 234.
	r := New(Config{NCPU: 1, BufferKB: 4})
	w := newWriter(t)
	for i := range 352 {
		if !r.Write(w.entry(0, uint64(i)*1000, 40)) {
			t.Fatal("write dropped")
		}
	}
	in, written := r.Entries()
	if in != 118 || written != 352 {
		t.Fatalf("entries %d/%d, want 118/352", in, written)
	}
	it := r.NewIter(-1)
	defer it.Close()
	var e Entry
	var seqs []uint32
	for {
		m, ok := it.Next(&e)
		if !ok {
			break
		}
		if m != (Marks{}) {
			t.Errorf("marks %+v", m)
		}
		seqs = append(seqs, seqOf(&e))
	}
	if len(seqs) != 118 || seqs[0] != 234 || seqs[117] != 351 {
		t.Errorf("kept %d records, %d..%d; want 118, 234..351", len(seqs), seqs[0], seqs[len(seqs)-1])
	}
}

func TestDropped(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 8})
	w := newWriter(t)
	if r.Write(w.entry(0, 1, MaxRecordSize-8+1)) {
		t.Error("a record of MaxRecordSize+1 bytes was written")
	}
	if !r.Write(w.entry(0, 2, MaxRecordSize-8)) {
		t.Error("a record of MaxRecordSize bytes was dropped")
	}
	if r.Write(w.entry(2, 3, 4)) || r.Write(w.entry(-1, 3, 4)) {
		t.Error("a record for a CPU out of range was written")
	}
	r.SetTracingOn(false)
	if r.Write(w.entry(1, 4, 4)) || r.WriteNow(w.entry(1, 0, 4)) {
		t.Error("a record was written while tracing was off")
	}
	r.SetTracingOn(true)
	if in, written := r.Entries(); in != 1 || written != 1 {
		t.Errorf("entries %d/%d, want 1/1", in, written)
	}
}

func TestTimeExtendAndBackwards(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 8})
	w := newWriter(t)
	r.Write(w.entry(0, 1000, 4))                 // 16 bytes, starts the page
	r.Write(w.entry(0, 1000+1<<27, 4))           // delta 2^27: 8-byte time extend
	r.Write(w.entry(0, 1000+1<<27+(1<<27-1), 4)) // delta 2^27-1: none
	r.Write(w.entry(0, 500, 4))                  // backwards: extend, stored at the previous time
	r.Write(w.entry(0, 600, 4))                  // 100 ns after the backwards write
	if got, want := r.Stats(0).Bytes, uint64(5*16+2*8); got != want {
		t.Errorf("bytes %d, want %d", got, want)
	}
	want := []uint64{1000, 1000 + 1<<27, 1000 + 1<<27 + 1<<27 - 1, 1000 + 1<<27 + 1<<27 - 1, 1000 + 1<<27 + 1<<27 - 1 + 100}
	it := r.NewIter(-1)
	defer it.Close()
	var e Entry
	for i := 0; ; i++ {
		if _, ok := it.Next(&e); !ok {
			if i != len(want) {
				t.Errorf("%d entries, want %d", i, len(want))
			}
			break
		}
		if e.TS != want[i] {
			t.Errorf("entry %d: ts %d, want %d", i, e.TS, want[i])
		}
	}
}

func TestMergeOrder(t *testing.T) {
	r := New(Config{NCPU: 3, BufferKB: 8})
	w := newWriter(t)
	// Equal times go to the lower CPU first.
	r.Write(w.entry(2, 10, 4)) // seq 0
	r.Write(w.entry(1, 10, 4)) // seq 1
	r.Write(w.entry(0, 20, 4)) // seq 2
	r.Write(w.entry(2, 30, 4)) // seq 3
	r.Write(w.entry(0, 25, 4)) // seq 4
	var got []uint32
	it := r.NewIter(-1)
	var e Entry
	for {
		if _, ok := it.Next(&e); !ok {
			break
		}
		got = append(got, seqOf(&e))
	}
	it.Close()
	if want := []uint32{1, 0, 2, 4, 3}; !equal(got, want) {
		t.Errorf("trace order %v, want %v", got, want)
	}
	got = got[:0]
	for {
		if _, ok := r.Consume(&e, -1); !ok {
			break
		}
		got = append(got, seqOf(&e))
	}
	if want := []uint32{1, 0, 2, 4, 3}; !equal(got, want) {
		t.Errorf("consume order %v, want %v", got, want)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLookup(t *testing.T) {
	ev := mustParse(t, "old u32 x")
	e := &Entry{TS: 1e9, PID: 7, Comm: "c", Event: ev, Tracepoint: "old", Record: record(5, 0, 0, 7, []byte{42, 0, 0, 0})}
	// Without Lookup a record prints with the event it was written with.
	r := New(Config{NCPU: 1, BufferKB: 4})
	r.Write(e)
	if got := string(r.AppendTrace(nil, -1)); !strings.HasSuffix(got, "1.000000: old: x=0x2a (42)\n") {
		t.Errorf("trace without Lookup:\n%s", got)
	}
	// With it, as the kernel: unknown, then whatever has the id now.
	var now *eventdef.Event
	r = New(Config{NCPU: 1, BufferKB: 4, Lookup: func(typ uint16) (*eventdef.Event, string, bool) {
		if typ == 5 && now != nil {
			return now, "new", true
		}
		return nil, "", false
	}})
	r.Write(e)
	if got := string(r.AppendTrace(nil, -1)); !strings.HasSuffix(got, "1.000000: Unknown type 5\n") {
		t.Errorf("trace after delete:\n%s", got)
	}
	now = mustParse(t, "new u32 y")
	if got := string(r.AppendTrace(nil, -1)); !strings.HasSuffix(got, "1.000000: new: y=0x2a (42)\n") {
		t.Errorf("trace after the id was reused:\n%s", got)
	}
}

func TestResizeBusy(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 4})
	it := r.NewIter(-1)
	if err := r.Resize(8); !errors.Is(err, unix.EBUSY) {
		t.Errorf("Resize with trace open: %v, want EBUSY", err)
	}
	it.Close()
	if err := r.Resize(8); err != nil {
		t.Errorf("Resize: %v", err)
	}
	it = r.NewIter(1)
	if err := r.ResizeCPU(0, 4); err != nil {
		t.Errorf("ResizeCPU(0) with cpu1's trace open: %v", err)
	}
	it.Close()
}

func TestPipeOpen(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 4})
	p0, err := r.OpenPipe(0, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []int{-1, 0} {
		if _, err := r.OpenPipe(cpu, true); !errors.Is(err, unix.EBUSY) {
			t.Errorf("OpenPipe(%d) with cpu0's open: %v, want EBUSY", cpu, err)
		}
	}
	p1, err := r.OpenPipe(1, true)
	if err != nil {
		t.Fatal(err)
	}
	p0.Close()
	p1.Close()
	pa, err := r.OpenPipe(-1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.OpenPipe(1, false); !errors.Is(err, unix.EBUSY) {
		t.Errorf("OpenPipe(1) with trace_pipe open: %v, want EBUSY", err)
	}
	pa.Close()
	if _, err := pa.Read(context.Background(), make([]byte, 10)); !errors.Is(err, unix.EBADF) {
		t.Errorf("Read after Close: %v, want EBADF", err)
	}
}

func TestPipeBlocking(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 4})
	w := newWriter(t)
	p, err := r.OpenPipe(-1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// Nothing there: it waits until ctx is done.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Read(ctx, make([]byte, 100)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read of an empty pipe: %v", err)
	}

	// A write wakes it.
	done := make(chan string)
	go func() {
		b := make([]byte, 4096)
		n, err := p.Read(context.Background(), b)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(b[:n])
	}()
	time.Sleep(10 * time.Millisecond)
	r.Write(w.entry(1, 3e9, 4))
	select {
	case got := <-done:
		if want := "               w-101     [001] .....     3.000000: w: seq=0x0 (0)\n"; got != want {
			t.Errorf("read %q, want %q", got, want)
		}
	case <-time.After(time.Minute): // generous: a loaded machine can stall a goroutine
		t.Fatal("Read did not wake up")
	}

	// Tracing off and empty after a read: end of file, at once.
	go func() {
		_, err := p.Read(context.Background(), make([]byte, 100))
		if err == nil {
			err = errors.New("no error")
		}
		done <- err.Error()
	}()
	time.Sleep(10 * time.Millisecond)
	r.SetTracingOn(false)
	select {
	case got := <-done:
		if got != io.EOF.Error() {
			t.Errorf("Read with tracing off: %s, want EOF", got)
		}
	case <-time.After(time.Minute): // generous: a loaded machine can stall a goroutine
		t.Fatal("Read did not return when tracing went off")
	}

	// A pipe that has read nothing waits even with tracing off.
	r.SetTracingOn(true)
	p.Close()
	p2, _ := r.OpenPipe(-1, true)
	r.SetTracingOn(false)
	if _, err := p2.Read(context.Background(), make([]byte, 100)); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("nonblocking Read of an empty pipe: %v, want EAGAIN", err)
	}
	p2.Close()
}

func TestPipeLineTooBig(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 8})
	w := newWriter(t)
	small := w.entry(0, 1e9, 4)
	big := w.entry(0, 2e9, 4)
	big.Tracepoint = strings.Repeat("x", TraceSeqSize)
	r.Write(small)
	r.Write(big)
	r.Write(w.entry(0, 3e9, 4))
	text, chunks, err := readPipe(r, -1, 65536, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text, "\n")
	if len(chunks) != 3 || len(lines) != 4 || lines[1] != "[LINE TOO BIG]" {
		t.Errorf("chunks %v, text:\n%.300s", chunks, text)
	}
	if in, _ := r.Entries(); in != 0 {
		t.Errorf("%d records left", in)
	}
}

// TestConcurrent writes from many goroutines on every CPU while consumers
// and trace readers run. Every record is consumed exactly once or counted
// as an overrun.
func TestConcurrent(t *testing.T) {
	const (
		ncpu      = 4
		writers   = 8
		perWriter = 5000
		consumers = 3
	)
	r := New(Config{NCPU: ncpu, BufferKB: 16})
	ev := mustParse(t, "c u32 writer; u32 seq")
	var wg sync.WaitGroup
	for wi := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 8)
			e := Entry{CPU: wi % ncpu, PID: int32(wi), Comm: "c", Event: ev, Tracepoint: "c"}
			for i := range perWriter {
				binary.NativeEndian.PutUint32(p, uint32(wi))
				binary.NativeEndian.PutUint32(p[4:], uint32(i))
				e.Record = record(1, 0, 0, int32(wi), p)
				r.WriteNow(&e)
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[[2]uint32]int{}
	var lost uint64
	var cwg sync.WaitGroup
	for range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			var e Entry
			for {
				l, err := r.ConsumeWait(ctx, &e, -1)
				if err != nil {
					return
				}
				k := [2]uint32{binary.NativeEndian.Uint32(e.Record[8:]), binary.NativeEndian.Uint32(e.Record[12:])}
				mu.Lock()
				seen[k]++
				lost += l
				mu.Unlock()
			}
		}()
	}
	// Readers of trace at the same time.
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for ctx.Err() == nil {
			_ = r.AppendTrace(nil, -1)
			_ = r.Stats(0)
		}
	}()
	wg.Wait()
	for !r.Empty(-1) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	cwg.Wait()
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("record %v consumed %d times", k, n)
		}
	}
	in, written := r.Entries()
	overruns := r.Overruns()
	t.Logf("consumed %d, lost %d (overruns %d), in buffer %d, written %d", len(seen), lost, overruns, in, written)
	if uint64(len(seen))+overruns != writers*perWriter {
		t.Errorf("consumed %d + overrun %d != written %d", len(seen), overruns, writers*perWriter)
	}
	if lost > overruns {
		t.Errorf("reported lost %d > overruns %d", lost, overruns)
	}
}

// TestIterOvertaken: a writer that laps the trace reader makes it start
// its page again and report "[LOST EVENTS]", and the reader goes on from
// there, as the kernel's iterator does (rb_iter_head_event).
func TestIterOvertaken(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 8}) // 3 pages of 78 records
	w := newWriter(t)
	ts := uint64(0)
	write := func(n int) {
		for range n {
			ts += 1000
			r.Write(w.entry(0, ts, 40))
		}
	}
	write(200) // pages: 0-77, 78-155, 156-199
	it := r.NewIter(-1)
	defer it.Close()
	var e Entry
	var seqs []uint32
	for i := 0; ; i++ {
		m, ok := it.Next(&e)
		if !ok {
			break
		}
		if m.Lost == LostUnknown {
			seqs = append(seqs, 1e9) // marks the loss
		}
		seqs = append(seqs, seqOf(&e))
		if i == 10 {
			// Fill the third page, overwrite the first (the reader's)
			// with 234-311 and the second with 312-331.
			write(132)
		}
	}
	var want []uint32
	for s := uint32(0); s <= 10; s++ {
		want = append(want, s)
	}
	want = append(want, 1e9)
	for s := uint32(234); s <= 331; s++ {
		want = append(want, s)
	}
	if !equal(seqs, want) {
		t.Errorf("read %v,\nwant %v", seqs, want)
	}
	var buf []byte
	it2 := r.NewIter(-1)
	defer it2.Close()
	n := 0
	for {
		var ok bool
		if buf, ok = it2.AppendNext(buf, &e); !ok {
			break
		}
		n++
	}
	if n != 176 || !strings.HasPrefix(string(buf), "               w-100     [000] .....     0.000157: w: seq=0x9c (156)\n") {
		t.Errorf("%d lines after the writer stopped:\n%.200s", n, buf)
	}
}

func TestPipeCloseWakesRead(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 4})
	p, err := r.OpenPipe(-1, false)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := p.Read(context.Background(), make([]byte, 10))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	p.Close()
	select {
	case err := <-done:
		if !errors.Is(err, unix.EBADF) {
			t.Errorf("Read after Close: %v, want EBADF", err)
		}
	case <-time.After(time.Minute): // generous: a loaded machine can stall a goroutine
		t.Fatal("Close did not wake Read")
	}
}

func TestPipePoll(t *testing.T) {
	r := New(Config{NCPU: 2, BufferKB: 4})
	w := newWriter(t)
	p, err := r.OpenPipe(-1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Poll(nil) {
		t.Fatal("an empty pipe polls ready")
	}
	woken := make(chan int, 4)
	// Polling again before anything arrives replaces the callback: one
	// wake-up, the last poll's.
	for i := 0; i < 3; i++ {
		if p.Poll(func() { woken <- i }) {
			t.Fatal("an empty pipe polls ready")
		}
	}
	r.Write(w.entry(1, 3e9, 4))
	select {
	case i := <-woken:
		if i != 2 {
			t.Errorf("woke poll %d, want the last one, 2", i)
		}
	case <-time.After(time.Minute): // generous: a loaded machine can stall a goroutine
		t.Fatal("a write did not wake the poller")
	}
	if !p.Poll(nil) {
		t.Error("a pipe with a record polls not ready")
	}
	if _, err := p.Read(context.Background(), make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if p.Poll(nil) {
		t.Error("a drained pipe polls ready")
	}
	// Closing wakes a poller too.
	if p.Poll(func() { woken <- 9 }) {
		t.Fatal("ready")
	}
	p.Close()
	select {
	case i := <-woken:
		if i != 9 {
			t.Errorf("woke %d", i)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not wake the poller")
	}
	select {
	case i := <-woken:
		t.Errorf("a second wake-up (%d)", i)
	default:
	}
}
