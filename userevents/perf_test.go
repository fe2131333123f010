package userevents_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/subsys"
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
		c, err := client.Dial(b.opts.Socket, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSession(client.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Attach(system+":"+tp, false); err != nil {
			t.Fatal(err)
		}
		return &daemonPerf{c: c, s: s}
	default:
		k, _ := kernels.Load(b.opts)
		sys := k.(*inproc.Kernel).Subsystem()
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
	c *client.Conn
	s *client.Session
}

// payloads takes what the daemon holds: a write's record is in the session
// before the write returns, so Poll, which asks without waiting, sees every
// one (a Read with a timeout would miss them when the machine is slow).
func (p *daemonPerf) payloads(t *testing.T) [][]byte {
	var out [][]byte
	for {
		recs, _, _, err := p.s.Poll(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		for _, r := range recs {
			out = append(out, r.Raw[8:])
		}
	}
}

func (p *daemonPerf) close() { p.s.Close(); p.c.Close() }

type subsysPerf struct{ s *subsys.Session }

// payloads takes what the session holds: writes deliver before they return,
// so a done context makes Read take them all without waiting for more.
func (p *subsysPerf) payloads(t *testing.T) [][]byte {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	buf := make([]byte, 1<<16)
	recs, err := p.s.Read(done, buf, nil)
	if err != nil && done.Err() == nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range recs {
		out = append(out, append([]byte(nil), r.Raw[8:]...))
	}
	return out
}

func (p *subsysPerf) close() { p.s.Close() }

// kernelPerf is one perf event per online CPU (pid -1: every task, as root
// may), since Go writes from whichever thread runs the goroutine.
type kernelPerf struct {
	rings []*perfring.Ring
}

const perfRingPages = 2 // data pages of each ring

func openKernelPerf(t *testing.T, b backend, system, tp string) perfConsumer {
	t.Helper()
	fs := openTracefs(t, b.opts)
	idText, err := fs.ReadFile("events/" + system + "/" + tp + "/id")
	if err != nil {
		t.Fatal(err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	p := &kernelPerf{}
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{
			Type:        unix.PERF_TYPE_TRACEPOINT,
			Config:      id,
			Sample:      1,
			Sample_type: unix.PERF_SAMPLE_TIME | unix.PERF_SAMPLE_RAW,
			Wakeup:      1,
		}
		fd, err := perfring.Open(&attr, -1, cpu)
		if err != nil {
			p.close()
			t.Fatal(err)
		}
		ring, err := perfring.NewRing(fd, perfRingPages)
		if err != nil {
			unix.Close(fd)
			p.close()
			t.Fatal(err)
		}
		p.rings = append(p.rings, ring)
	}
	return p
}

// payloads reads what every ring holds, in the order the records were
// written: a goroutine may move to another CPU between two writes, and each
// CPU's ring holds only its own, so the rings' records are merged by time
// (as perf's ordered events do). For PERF_RECORD_SAMPLE with
// PERF_SAMPLE_TIME|PERF_SAMPLE_RAW: perf_event_header{type u32, misc u16,
// size u16}, the u64 time, a u32 size and the raw data.
func (p *kernelPerf) payloads(t *testing.T) [][]byte {
	type sample struct {
		time    uint64
		payload []byte
	}
	var got []sample
	for _, r := range p.rings {
		r.Read(func(rec []byte) {
			switch binary.NativeEndian.Uint32(rec) {
			case unix.PERF_RECORD_SAMPLE:
				var n uint64
				if len(rec) >= 20 {
					n = uint64(binary.NativeEndian.Uint32(rec[16:]))
				}
				if n < 8 || 20+n > uint64(len(rec)) {
					t.Fatalf("sample of %d bytes with %d bytes of raw data", len(rec), n)
				}
				got = append(got, sample{binary.NativeEndian.Uint64(rec[8:]), slices.Clone(rec[28 : 20+n])})
			case unix.PERF_RECORD_LOST:
				t.Fatalf("perf lost %d records: the test writes a few only", binary.NativeEndian.Uint64(rec[16:]))
			}
		})
	}
	slices.SortStableFunc(got, func(a, b sample) int { return cmp.Compare(a.time, b.time) })
	out := make([][]byte, len(got))
	for i, s := range got {
		out[i] = s.payload
	}
	return out
}

func (p *kernelPerf) close() {
	for _, r := range p.rings {
		r.Close()
	}
	p.rings = nil
}

// TestPerfSetsEnableBit is perf_test.c's perf_write: opening a perf event on
// the tracepoint sets the enable bit before perf_event_open returns, the
// status says "Used by perf", a write arrives as a sample with its fields
// at offset 8 of the raw data, and closing the last perf event clears the
// bit again.
func TestPerfSetsEnableBit(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		f := open(t, b.opts)
		fs := openTracefs(t, b.opts)
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
