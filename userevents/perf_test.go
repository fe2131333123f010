package userevents_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// perfConsumer is a perf event open on one tracepoint: on the kernel a
// perf_event_open(PERF_TYPE_TRACEPOINT) per CPU, on uetrace a session.
type perfConsumer interface {
	// payloads returns the payloads (the raw data after the 8-byte common
	// header) of the samples received so far.
	payloads(t *testing.T) [][]byte
	close()
}

// openPerf opens a perf consumer on system/tp of backend b.
func openPerf(t *testing.T, b backend, system, tp string) perfConsumer {
	t.Helper()
	switch b.opts.Backend {
	case userevents.Kernel:
		return openKernelPerf(t, b, system, tp)
	case userevents.Daemon:
		c, err := daemon.Dial(b.opts.Socket, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSession(0, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Attach(system+":"+tp, false); err != nil {
			t.Fatal(err)
		}
		return &daemonPerf{c: c, s: s}
	default:
		sys := b.opts.Subsystem
		ev := sys.Lookup(system, tp)
		if ev == nil {
			t.Fatalf("no event %s:%s", system, tp)
		}
		s := sys.NewSession(subsys.SessionOptions{})
		if err := s.Attach(ev); err != nil {
			t.Fatal(err)
		}
		return &subsysPerf{s: s}
	}
}

type daemonPerf struct {
	c *daemon.Client
	s *daemon.Session
}

func (p *daemonPerf) payloads(t *testing.T) [][]byte {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	recs, _, _, err := p.s.Read(ctx, nil)
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range recs {
		out = append(out, r.Raw[8:])
	}
	return out
}

func (p *daemonPerf) close() { p.s.Close(); p.c.Close() }

type subsysPerf struct{ s *subsys.Session }

func (p *subsysPerf) payloads(t *testing.T) [][]byte {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	buf := make([]byte, 1<<16)
	recs, err := p.s.Read(ctx, buf, nil)
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range recs {
		out = append(out, append([]byte(nil), r.Raw[8:]...))
	}
	return out
}

func (p *subsysPerf) close() { p.s.Close() }

// kernelPerf is one perf event per CPU (pid -1: every task, as root may),
// since Go writes from whichever thread runs the goroutine.
type kernelPerf struct {
	fds   []int
	rings [][]byte
}

const perfRingPages = 1 + 2 // the metadata page and a 2-page data ring

func openKernelPerf(t *testing.T, b backend, system, tp string) perfConsumer {
	t.Helper()
	fs := tracefs(t, b.opts)
	idText, err := fs.ReadFile("events/" + system + "/" + tp + "/id")
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	p := &kernelPerf{}
	for cpu := range runtime.NumCPU() {
		attr := unix.PerfEventAttr{
			Type:        unix.PERF_TYPE_TRACEPOINT,
			Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Config:      id,
			Sample:      1,
			Sample_type: unix.PERF_SAMPLE_RAW,
			Wakeup:      1,
		}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			p.close()
			t.Fatalf("perf_event_open(tracepoint %d, cpu %d): %v", id, cpu, err)
		}
		ring, err := unix.Mmap(fd, 0, perfRingPages*unix.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			p.close()
			t.Fatal(err)
		}
		p.fds = append(p.fds, fd)
		p.rings = append(p.rings, ring)
	}
	return p
}

// payloads reads every ring from the start (the test reads once): records
// are perf_event_header{type u32, misc u16, size u16} and, for
// PERF_RECORD_SAMPLE with only PERF_SAMPLE_RAW, a u32 size and the raw data.
func (p *kernelPerf) payloads(t *testing.T) [][]byte {
	var out [][]byte
	for _, ring := range p.rings {
		end := atomic.LoadUint64((*uint64)(unsafe.Pointer(&ring[1024]))) // data_head
		dataOff := binary.LittleEndian.Uint64(ring[1040:])               // data_offset
		dataSize := binary.LittleEndian.Uint64(ring[1048:])              // data_size
		data := ring[dataOff : dataOff+dataSize]
		if end > dataSize {
			t.Fatalf("perf ring wrapped (%d bytes): the test writes a few records only", end)
		}
		for off := uint64(0); off+8 <= end; {
			typ := binary.LittleEndian.Uint32(data[off:])
			size := uint64(binary.LittleEndian.Uint16(data[off+6:]))
			if size == 0 {
				break
			}
			if typ == unix.PERF_RECORD_SAMPLE {
				n := binary.LittleEndian.Uint32(data[off+8:])
				raw := data[off+12 : off+12+uint64(n)]
				out = append(out, append([]byte(nil), raw[8:]...))
			}
			off += size
		}
	}
	return out
}

func (p *kernelPerf) close() {
	for _, r := range p.rings {
		unix.Munmap(r)
	}
	for _, fd := range p.fds {
		unix.Close(fd)
	}
}

// TestPerfSetsEnableBit is perf_test.c's perf_write: opening a perf event on
// the tracepoint sets the enable bit before perf_event_open returns, the
// status says "Used by perf", a write arrives as a sample with its fields
// at offset 8 of the raw data, and closing the last perf event clears the
// bit again.
func TestPerfSetsEnableBit(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		f := open(t, b.opts)
		fs := tracefs(t, b.opts)
		name := uniq("suite_perf")
		ev := register(t, f, name+" u32 field1; u32 field2", 0)
		if ev.Enabled() {
			t.Fatal("enabled before any consumer")
		}
		p := openPerf(t, b, "user_events", name)
		closed := false
		defer func() {
			if !closed {
				p.close()
			}
		}()
		if !ev.Enabled() {
			t.Fatal("opening a perf event did not set the enable bit")
		}
		if st := status(t, fs); !strings.Contains(st, name+" # Used by perf\n") {
			t.Errorf("status lacks %q:\n%s", name+" # Used by perf", st)
		}
		var payload [8]byte
		binary.LittleEndian.PutUint32(payload[0:], 0xc001)
		binary.LittleEndian.PutUint32(payload[4:], 0xc01a)
		if err := ev.Write(payload[:]); err != nil {
			t.Fatal(err)
		}
		got := p.payloads(t)
		if len(got) != 1 || len(got[0]) < 8 {
			t.Fatalf("perf received %d samples %x, want 1", len(got), got)
		}
		f1, f2 := binary.LittleEndian.Uint32(got[0]), binary.LittleEndian.Uint32(got[0][4:])
		if f1 != 0xc001 || f2 != 0xc01a {
			t.Errorf("sample fields = %#x %#x, want 0xc001 0xc01a", f1, f2)
		}
		p.close()
		closed = true
		if ev.Enabled() {
			t.Error("closing the last perf event did not clear the enable bit")
		}
		if st := status(t, fs); strings.Contains(st, fmt.Sprintf("%s # Used by", name)) {
			t.Errorf("status still says used:\n%s", st)
		}
	})
}
