package perfring

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A kernel tracepoint that fires on its own: sched_switch on CPU 0, read
// through a ring small enough to wrap.
func TestRingReadsKernelSamples(t *testing.T) {
	idText, err := os.ReadFile("/sys/kernel/tracing/events/sched/sched_switch/id")
	if err != nil {
		t.Skipf("no tracefs sched_switch here: %v", err)
	}
	id, _ := strconv.Atoi(strings.TrimSpace(string(idText)))
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Config:      uint64(id),
		Sample:      1,
		Sample_type: unix.PERF_SAMPLE_IDENTIFIER | unix.PERF_SAMPLE_RAW,
		Wakeup:      1,
	}
	fd, err := Open(&attr, -1, 0)
	if err != nil {
		t.Skipf("cannot open a system-wide tracepoint event here: %v", err)
	}
	sid, err := ID(fd)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRing(fd, 1)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := NewRing(fd, 3); !errors.Is(err, unix.EINVAL) {
		t.Errorf("NewRing of 3 pages = %v, want EINVAL", err)
	}
	samples := 0
	// The loop ends at 200 samples; the minute is for a loaded machine,
	// where CPU 0 may switch tasks rarely.
	deadline := time.Now().Add(time.Minute)
	for samples < 200 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // each sleep is a context switch
		r.Read(func(rec []byte) {
			typ := binary.NativeEndian.Uint32(rec)
			if typ != unix.PERF_RECORD_SAMPLE {
				return
			}
			if got := binary.NativeEndian.Uint64(rec[8:]); got != sid {
				t.Fatalf("sample id %d, want %d", got, sid)
			}
			n := binary.NativeEndian.Uint32(rec[16:])
			raw := rec[20 : 20+n]
			if got := binary.NativeEndian.Uint16(raw); int(got) != id {
				t.Fatalf("common_type %d, want %d", got, id)
			}
			samples++
		})
	}
	if samples < 200 {
		t.Fatalf("%d samples in a minute", samples)
	}
	if r.Pending() != 0 {
		t.Logf("%d bytes pending after the last read", r.Pending())
	}
}
