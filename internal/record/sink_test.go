package record_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
)

// TestRecordSink: Options.Sink is given every sample the file gets, with
// its event, task, raw record and time — CLOCK_MONOTONIC with
// ClockMonotonic, between the write's start and end, and its wall-clock
// time — and the process's name.
func TestRecordSink(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "sink", "u32 n; __rel_loc char[] msg")
		type got struct {
			system, name  string
			pid, tid      uint32
			time, wall    uint64
			comm, process string
			raw           []byte
		}
		var (
			mu   sync.Mutex
			gots []got
		)
		path := filepath.Join(t.TempDir(), "perf.data")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		rec := tg.start(t, out, record.Options{
			Events: []string{name}, ClockMonotonic: true,
			Sink: func(s *perfdata.Sample) {
				mu.Lock()
				gots = append(gots, got{s.Event.System, s.Event.Name, s.PID, s.TID, s.Time, s.Wall, s.Comm, s.ProcessComm, bytes.Clone(s.Raw)})
				mu.Unlock()
			},
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		waitEnabled(t, ev, waitLimit)
		const n = 50
		var enc eventdef.Encoder
		var spans [n][2]uint64
		now := func() uint64 {
			var ts unix.Timespec
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
			return uint64(ts.Nano())
		}
		wallStart := time.Now().UnixNano()
		for i := range n {
			spans[i][0] = now()
			if err := ev.Encode(&enc, nil, func(e *eventdef.Encoder) { e.Uint(uint64(i)); e.String("m") }); err != nil {
				t.Fatal(err)
			}
			spans[i][1] = now()
		}
		wallEnd := time.Now().UnixNano()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(gots) != n {
			t.Fatalf("the sink got %d samples, want %d", len(gots), n)
		}
		comm, _ := os.ReadFile("/proc/self/comm")
		comm = bytes.TrimSpace(comm)
		def, _ := eventdef.Parse(name + " u32 n; __rel_loc char[] msg")
		for _, g := range gots {
			if g.system != eventdef.System || g.name != name || g.pid != uint32(os.Getpid()) || g.process != string(comm) {
				t.Fatalf("sample of %s:%s by %d (%q), want %s:%s by %d (%q)", g.system, g.name, g.pid, g.process,
					eventdef.System, name, os.Getpid(), comm)
			}
			vals := def.Decode(nil, g.raw)
			i := vals[0].Uint()
			if i >= n || string(vals[1].Text()) != "m" {
				t.Fatalf("sample's record %x", g.raw)
			}
			if g.time < spans[i][0] || g.time > spans[i][1] {
				t.Errorf("sample %d at %d, not within its write's %d..%d (CLOCK_MONOTONIC)", i, g.time, spans[i][0], spans[i][1])
			}
			// Wall is the time by the offset the recording read when made.
			if w := int64(g.wall); w < wallStart-5e6 || w > wallEnd+5e6 {
				t.Errorf("sample %d's wall-clock time %d is outside the writes' %d..%d", i, w, wallStart, wallEnd)
			}
		}
		// The file has the same samples.
		r, err := perfdata.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		// ClockMonotonic's file has the clock data perf record -k
		// writes: its times become wall-clock times.
		clock, ok := r.ClockData()
		if !ok || clock.ClockID != unix.CLOCK_MONOTONIC {
			t.Fatalf("clock data %+v, %v: want CLOCK_MONOTONIC's", clock, ok)
		}
		for _, a := range r.Attrs() {
			if a.Flags&perfdata.AttrUseClockID == 0 || a.ClockID != unix.CLOCK_MONOTONIC {
				t.Errorf("attr %s: flags %#x clockid %d, want use_clockid CLOCK_MONOTONIC", a.Name, a.Flags, a.ClockID)
			}
		}
		for _, g := range gots {
			if w := clock.Wall(g.time); w < wallStart-5e6 || w > wallEnd+5e6 {
				t.Errorf("a sample's wall-clock time %d is outside the writes' %d..%d", w, wallStart, wallEnd)
			}
		}
		var inFile int
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			if rec.Type == perfdata.RecordSample {
				if !bytes.Equal(rec.Sample.Raw[:len(gots[inFile].raw)], gots[inFile].raw) || rec.Sample.Time != gots[inFile].time {
					t.Fatalf("file sample %d differs from the sink's", inFile)
				}
				inFile++
			}
		}
		if inFile != n {
			t.Errorf("the file has %d samples, the sink %d", inFile, n)
		}
	})
}

// TestRecordSinkLatency: with Options.SinkLatency a daemon recording's
// Sink still gets every sample while the recording runs, and the
// recording waits on a timer while its streams fill slowly — a write at a
// time — and on the streams (a wake at their watermark) once bursts fill
// them; without it, always on the streams (watermark 1).
func TestRecordSinkLatency(t *testing.T) {
	tg := targets(t)[0] // the daemon
	for _, latency := range []time.Duration{0, 5 * time.Millisecond} {
		t.Run(fmt.Sprint(latency), func(t *testing.T) {
			_, name, ev := openEvent(t, tg, "sinklat", "u64 seq; char[56] pad")
			c, err := client.Dial(tg.opts.Socket, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var got atomic.Uint64
			rec, err := record.Daemon(c, nil, record.Options{Events: []string{name}, BufferKB: 256, SinkLatency: latency,
				Sink: func(*perfdata.Sample) { got.Add(1) }})
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Streams() {
				t.Skip("the daemon gave no streams")
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- rec.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			waitEnabled(t, ev, waitLimit)
			payload := make([]byte, 64)
			written := uint64(0)
			write := func() {
				binary.NativeEndian.PutUint64(payload, written)
				if err := ev.Write(payload); err != nil {
					t.Fatal(err)
				}
				written++
			}
			// taken waits until every sample written is given to the Sink
			// or counted lost, while the recording runs.
			taken := func() {
				t.Helper()
				deadline := time.Now().Add(waitLimit)
				for st := rec.Stats(); got.Load()+st.Lost != written; st = rec.Stats() {
					if time.Now().After(deadline) {
						t.Fatalf("after %v the sink has %d samples and %d were lost, of %d written", waitLimit, got.Load(), st.Lost, written)
					}
					time.Sleep(time.Millisecond)
				}
			}
			// Slowly: each write taken before the next.
			const slow = 20
			for range slow {
				write()
				taken()
			}
			timer, streams := rec.StreamWaits()
			switch {
			case latency == 0 && timer != 0:
				t.Fatalf("%d waits on the timer without a latency", timer)
			case latency > 0 && timer < slow:
				t.Fatalf("%d waits on the timer for %d writes taken one at a time; want one each at least", timer, slow)
			}
			// Bursts, each more than a stream holds, until the recording
			// waits on the streams for one.
			deadline := time.Now().Add(waitLimit)
			for _, waited := rec.StreamWaits(); waited == streams; _, waited = rec.StreamWaits() {
				if time.Now().After(deadline) {
					t.Fatalf("after %v of bursts no wait on the streams: %d written", waitLimit, written)
				}
				for range 5000 {
					write()
				}
				taken()
			}
			timer, streams = rec.StreamWaits()
			t.Logf("waits: %d on the timer, %d on the streams; %d written, %d lost", timer, streams, written, rec.Stats().Lost)
			if latency == 0 && timer != 0 {
				t.Errorf("%d waits on the timer without a latency", timer)
			}
		})
	}
}
