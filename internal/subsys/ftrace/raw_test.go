package ftrace

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawEntry is a record of n payload bytes (after the 8-byte header) by
// thread pid on cpu at ts.
func rawEntry(cpu int, ts uint64, pid int32, n int) *Entry {
	return &Entry{TS: ts, CPU: cpu, PID: pid, TGID: 1, Comm: "w" + strconv.Itoa(int(pid)), Record: make([]byte, 8+n)}
}

func commitOf(page []byte) uint64 { return binary.LittleEndian.Uint64(page[8:]) }

// A read(2) of trace_pipe_raw shorter than a page gets the events that
// fit (ring_buffer_read_page's len): too short for the header or the next
// event, nothing, and nothing consumed.
func TestReadRawShort(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 16})
	for i := range 3 {
		r.Write(rawEntry(0, uint64(1000+i), 7, 8)) // 4+16 bytes each
	}
	for _, n := range []int{0, PageHeaderSize, PageHeaderSize + 19} {
		if _, ok := r.ReadRaw(nil, 0, n); ok {
			t.Errorf("ReadRaw of %d bytes read a page", n)
		}
	}
	if s := r.Stats(0); s.ReadEvents != 0 || s.Entries != 3 {
		t.Fatalf("the short reads consumed: %+v", s)
	}
	page, ok := r.ReadRaw(nil, 0, PageHeaderSize+45)
	if !ok || len(page) != PageSize || commitOf(page) != 40 {
		t.Fatalf("ReadRaw of 61 bytes: ok %v, %d bytes, commit %d; want two 20-byte events", ok, len(page), commitOf(page))
	}
	if ts := binary.LittleEndian.Uint64(page); ts != 999 && ts != 1000 && ts != 0 {
		t.Errorf("page time stamp %d", ts)
	}
	page, ok = r.ReadRaw(nil, 0, PageSize)
	if !ok || commitOf(page) != 20 {
		t.Fatalf("the rest: ok %v commit %d, want the third event", ok, commitOf(page))
	}
	if s := r.Stats(0); s.ReadEvents != 3 || s.Entries != 0 {
		t.Errorf("after reading all: %+v", s)
	}
}

// trace_pipe_raw polls readable at the buffer_percent watermark: with 0,
// when anything is there; with more, once the writer has left the reader's
// page and that share of the ring's pages is filled, the writer's counting
// (rb_watermark_hit, full_hit).
func TestRawReady(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 16})
	pages := r.Pages(0)
	if pages != 5 {
		t.Fatalf("%d pages for 16 KiB, want 5", pages)
	}
	if r.RawReady(0, 0) || r.RawReady(0, 50) {
		t.Fatal("empty buffer ready")
	}
	// Records of 1012 bytes take 1020 in the page: four fill one.
	const payload = 1004
	if EventSize(8+payload)*4 != PageCapacity {
		t.Fatalf("EventSize(%d) = %d", 8+payload, EventSize(8+payload))
	}
	ts := uint64(1)
	write := func() { r.Write(rawEntry(0, ts, 7, payload)); ts++ }
	write()
	if !r.RawReady(0, 0) {
		t.Error("a record, buffer_percent 0: not ready")
	}
	for r.Stats(0).Entries < 8 {
		write()
	}
	// Two pages filled, the writer on the second still: one dirty.
	if r.RawReady(0, 50) {
		t.Errorf("ready at 50%% with the writer on page 2 of %d", pages)
	}
	write()
	// The writer on the third: two dirty, and (2+1)*100 >= 50*5.
	if !r.RawReady(0, 50) {
		t.Errorf("not ready at 50%% with two of %d pages filled and left", pages)
	}
	if r.RawReady(0, 100) {
		t.Error("ready at 100% with the buffer half full")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.WaitRawReady(ctx, 0, func() int { return 100 }) }()
	for range 2 * pages * 4 {
		r.Write(rawEntry(0, ts, 7, 1008))
		ts++
	}
	if err := <-done; err != nil {
		t.Errorf("WaitRawReady at 100%% after filling the buffer: %v", err)
	}
}

// WaitRaw waits for a record, and gives up with its context.
func TestWaitRaw(t *testing.T) {
	r := New(Config{NCPU: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.WaitRaw(ctx, 1) }()
	r.Write(rawEntry(0, 1, 7, 4)) // another CPU's
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitRaw of an empty CPU: %v, want canceled", err)
	}
	go func() { done <- r.WaitRaw(context.Background(), 1) }()
	r.Write(rawEntry(1, 2, 7, 4))
	if err := <-done; err != nil {
		t.Errorf("WaitRaw after a record: %v", err)
	}
}

// saved_cmdlines keeps SavedCmdlines writers, a slot each, handed out in
// turn from the oldest; a pid whose low 15 bits are another's takes its
// slot (trace_save_cmdline). saved_tgids has the writers' processes while
// record-tgid is on, by pid.
func TestSavedTasks(t *testing.T) {
	r := New(Config{NCPU: 1})
	r.Write(rawEntry(0, 1, 100, 4))
	r.Write(rawEntry(0, 2, 100, 4)) // the same writer: nothing new
	r.Write(rawEntry(0, 3, 101, 4))
	if got := string(r.AppendSavedCmdlines(nil)); got != "100 w100\n101 w101\n" {
		t.Errorf("saved_cmdlines %q", got)
	}
	if got := string(r.AppendSavedTGIDs(nil)); got != "" {
		t.Errorf("saved_tgids with record-tgid off %q", got)
	}
	r.SetRecordTGID(true)
	r.Write(rawEntry(0, 4, 101, 4))
	r.Write(rawEntry(0, 5, 50, 4))
	if got := string(r.AppendSavedTGIDs(nil)); got != "50 1\n101 1\n" {
		t.Errorf("saved_tgids %q", got)
	}
	// 100+32768 has 100's low bits: it takes 100's slot.
	r.Write(rawEntry(0, 6, 100+pidMaxDefault, 4))
	if got := string(r.AppendSavedCmdlines(nil)); got != "32868 w32868\n101 w101\n50 w50\n" {
		t.Errorf("saved_cmdlines after a pid of the same low bits %q", got)
	}
	r.SetRecordCmd(false)
	r.Write(rawEntry(0, 7, 60, 4))
	if strings.Contains(string(r.AppendSavedCmdlines(nil)), "60 ") {
		t.Error("saved with record-cmd off")
	}
	r.SetRecordCmd(true)
	// The table is full at SavedCmdlines: the next writer takes the
	// oldest slot.
	for pid := range int32(SavedCmdlines) {
		r.Write(rawEntry(0, uint64(10+pid), 1000+pid, 4))
	}
	lines := strings.Split(strings.TrimSuffix(string(r.AppendSavedCmdlines(nil)), "\n"), "\n")
	if len(lines) != SavedCmdlines || lines[0] != strconv.Itoa(1000+SavedCmdlines-3)+" w"+strconv.Itoa(1000+SavedCmdlines-3) {
		t.Errorf("after %d writers: %d lines, the first %q", SavedCmdlines+3, len(lines), lines[0])
	}
}

// tracing_cpumask prints and parses as the kernel's bitmaps do, and a CPU
// out of it takes no record.
func TestCPUMask(t *testing.T) {
	mask := func(n int, cpus ...int) []bool {
		m := make([]bool, n)
		for _, c := range cpus {
			m[c] = true
		}
		return m
	}
	for _, tc := range []struct {
		mask []bool
		text string
	}{
		{mask(2, 0, 1), "3\n"}, {mask(2), "0\n"}, {mask(6, 0), "01\n"}, {mask(4, 0, 1, 2, 3), "f\n"},
		{mask(40, 0, 39), "80,00000001\n"}, {mask(32, 31), "80000000\n"}, {mask(33, 32), "1,00000000\n"},
	} {
		if got := string(AppendCPUMask(nil, tc.mask)); got != tc.text {
			t.Errorf("AppendCPUMask(%v) = %q, want %q", tc.mask, got, tc.text)
		}
		if got, err := ParseCPUMask([]byte(tc.text), len(tc.mask)); err != nil || !slices.Equal(got, tc.mask) {
			t.Errorf("ParseCPUMask(%q) = %v, %v", tc.text, got, err)
		}
	}
	for _, tc := range []struct {
		text string
		n    int
		want error
	}{
		{"ff", 2, unix.EOVERFLOW}, {"1,1", 2, unix.EOVERFLOW}, {"g", 2, unix.EINVAL}, {"000000002", 2, unix.EOVERFLOW},
		{"1 2", 40, nil}, {"", 2, nil}, {"1\nff", 2, nil}, {"1\x00ff", 2, nil}, {"100,0", 40, unix.EOVERFLOW},
	} {
		if _, err := ParseCPUMask([]byte(tc.text), tc.n); !errors.Is(err, tc.want) && (err != nil || tc.want != nil) {
			t.Errorf("ParseCPUMask(%q, %d): %v, want %v", tc.text, tc.n, err, tc.want)
		}
	}
	r := New(Config{NCPU: 2})
	r.SetCPUMask(mask(2, 0))
	if !r.Write(rawEntry(0, 1, 7, 4)) || r.Write(rawEntry(1, 1, 7, 4)) || r.WriteNow(rawEntry(1, 0, 7, 4)) {
		t.Error("CPU 1 out of the mask took a record, or CPU 0 did not")
	}
	var res Reservation
	if r.Reserve(&res, 1, 2, 12) {
		res.Discard()
		t.Error("CPU 1 out of the mask reserved")
	}
	if s := r.Stats(1); s.Entries != 0 || s.DroppedEvents != 0 {
		t.Errorf("CPU 1's stats %+v: a record refused for the mask counts nowhere", s)
	}
	if got := string(AppendCPUMask(nil, r.CPUMask())); got != "1\n" || r.Traced(1) || !r.Traced(0) {
		t.Errorf("mask %q", got)
	}
}

// splice takes whole pages the writer has left: none while it is on the
// only page with records, then each page it leaves.
func TestSpliceRaw(t *testing.T) {
	r := New(Config{NCPU: 1, BufferKB: 16})
	const payload = 1004 // four to a page
	for ts := range uint64(3) {
		r.Write(rawEntry(0, ts+1, 7, payload))
	}
	if _, ok := r.SpliceRaw(nil, 0); ok {
		t.Fatal("spliced the page the writer is on")
	}
	for ts := range uint64(3) {
		r.Write(rawEntry(0, ts+4, 7, payload))
	}
	page, ok := r.SpliceRaw(nil, 0)
	if !ok || commitOf(page) != PageCapacity {
		t.Fatalf("the first page, left by the writer: ok %v commit %d", ok, commitOf(page))
	}
	if _, ok := r.SpliceRaw(nil, 0); ok {
		t.Error("spliced the second page, which the writer is on")
	}
	if page, ok := r.ReadRaw(nil, 0, PageSize); !ok || commitOf(page) != 2*1020 {
		t.Errorf("read(2) takes what the writer's page has: ok %v commit %d", ok, commitOf(page))
	}
}
