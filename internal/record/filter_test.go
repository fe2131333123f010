package record_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/userevents"
)

// writeSeeker is w as the recorders take it: a nil *os.File is no file at
// all (a recording that only counts), not an interface holding nil.
func writeSeeker(w *os.File) io.WriteSeeker {
	if w == nil {
		return nil
	}
	return w
}

// producer is the uetrace binary under another name, so that its records
// come from another process with a name of its own.
func producer(t *testing.T) string {
	t.Helper()
	bin := testutil.Uetrace(t)
	p := filepath.Join(t.TempDir(), "ueprodx")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// emit writes one record of cmd from the producer process and returns its
// pid.
func emit(t *testing.T, prod string, tg target, cmd string) int {
	t.Helper()
	args := []string{"--backend", "kernel"}
	if tg.opts.Backend == userevents.Daemon {
		args = []string{"--backend", "daemon", "--socket", tg.opts.Socket}
	}
	c := exec.Command(prod, append(args, "emit", cmd, "--field", "i=7")...)
	out, err := c.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Fatalf("%s emit: %v\n%s", prod, err, out)
	}
	return c.Process.Pid
}

// runFor starts rec and returns a stop function that ends it and fails the
// test on an error.
func runFor(t *testing.T, rec *record.Recorder) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// waitSamples waits until the recording has seen n samples and left out
// filtered (counting both, as Stats does).
func waitSamples(t *testing.T, rec *record.Recorder, n, filtered uint64) record.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := rec.Stats()
		if st.Samples == n && st.Filtered == filtered {
			return st
		}
		if time.Now().After(deadline) || st.Samples > n || st.Filtered > filtered {
			t.Fatalf("%d samples, %d filtered; want %d, %d", st.Samples, st.Filtered, n, filtered)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// --pid keeps this process's samples and --comm the producer's; the file
// holds exactly those.
func TestRecordFilter(t *testing.T) {
	prod := producer(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "filt", "u32 i")
		cmd := name + " u32 i"
		me := os.Getpid()
		for _, c := range []struct {
			what string
			opts record.Options
			mine bool // this process's samples kept, else the producer's
		}{
			{"pid", record.Options{PIDs: []int{me}}, true},
			{"comm", record.Options{Comms: []string{"ueprodx"}}, false},
			{"pid and comm", record.Options{PIDs: []int{me}, Comms: []string{"ueprodx"}}, false},
		} {
			path := filepath.Join(t.TempDir(), "perf.data")
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			c.opts.Events = []string{name}
			c.opts.NoFollow = true
			rec := tg.start(t, out, c.opts)
			stop := runFor(t, rec)
			waitEnabled(t, ev, time.Second)
			for i := range 5 {
				if err := ev.Write(le32(uint32(i))); err != nil {
					t.Fatal(err)
				}
			}
			prodPIDs := []int{emit(t, prod, tg, cmd), emit(t, prod, tg, cmd)}
			var want, filtered uint64 = 5, 2
			switch {
			case c.what == "comm":
				want, filtered = 2, 5
			case c.what == "pid and comm":
				want, filtered = 0, 7
			}
			st := waitSamples(t, rec, want, filtered)
			stop()
			out.Close()
			got, _ := reportJSON(t, path)
			if uint64(len(got)) != st.Samples {
				t.Errorf("%s: the file has %d samples, the stats %d", c.what, len(got), st.Samples)
			}
			for _, s := range got {
				ok := int(s.PID) == me
				if !c.mine {
					ok = slices.Contains(prodPIDs, int(s.PID)) && s.Comm == "ueprodx"
				}
				if !ok {
					t.Errorf("%s: sample of pid %d (%s) kept; this process is %d, the producer's %v", c.what, s.PID, s.Comm, me, prodPIDs)
				}
			}
		}
	})
}

// A recording without a file counts samples per event and per process, as
// uetrace top shows them; on the kernel it knows each event's lost count.
func TestRecordCountOnly(t *testing.T) {
	prod := producer(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "cnt", "u32 i")
		cmd := name + " u32 i"
		rec := tg.start(t, nil, record.Options{Events: []string{name}, ByProcess: true})
		stop := runFor(t, rec)
		waitEnabled(t, ev, time.Second)
		for i := range 9 {
			if err := ev.Write(le32(uint32(i))); err != nil {
				t.Fatal(err)
			}
		}
		pp := emit(t, prod, tg, cmd)
		waitSamples(t, rec, 10, 0)
		stop()
		// After the end: a task's name can be in a ring read after its
		// sample's, and the last drain has read every ring.
		st := rec.Stats()
		if len(st.Events) != 1 || st.Events[0].Samples != 10 || st.Events[0].Lost != 0 {
			t.Errorf("events: %+v", st.Events)
		}
		if want := tg.name == "kernel"; st.LostByEvent != want {
			t.Errorf("LostByEvent %v on the %s", st.LostByEvent, tg.name)
		}
		byPID := map[uint32]record.ProcessStats{}
		for _, p := range st.Processes {
			byPID[p.PID] = p
		}
		me := byPID[uint32(os.Getpid())]
		other := byPID[uint32(pp)]
		if len(byPID) != 2 || me.Samples != 9 || other.Samples != 1 || other.Comm != "ueprodx" || me.Comm == "" {
			t.Errorf("processes: %+v; want %d with 9 samples, %d (ueprodx) with 1", st.Processes, os.Getpid(), pp)
		}
		if st.Bytes != 0 {
			t.Errorf("%d bytes written without a file", st.Bytes)
		}
		t.Logf("processes: %+v, this is %d", st.Processes, os.Getpid())
	})
}

// On the kernel each event's lost samples are its own (PERF_FORMAT_LOST),
// and they add up to the recording's lost count; the daemon's session
// counts its losses only in total.
func TestRecordLostByEvent(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		name := uniq("evlost")
		busy, err := f.Register(name+"_busy u64 i; char[32] pad", 0)
		if err != nil {
			t.Fatal(err)
		}
		quiet, err := f.Register(name+"_quiet u32 i", 0)
		if err != nil {
			t.Fatal(err)
		}
		// The daemon's path: the 4 KiB are the session's streams, which a
		// ring set handed over would not go through (TestRecordCountsLost).
		rec := tg.start(t, nil, record.Options{Events: []string{name + "_*"}, BufferKB: 4, NoHandOver: true})
		stop := runFor(t, rec)
		waitEnabled(t, busy, time.Second)
		waitEnabled(t, quiet, time.Second)
		if err := quiet.Write(le32(1)); err != nil {
			t.Fatal(err)
		}
		payload := make([]byte, 8+32)
		for range 20000 {
			if err := busy.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		stop()
		st := rec.Stats()
		if st.Lost == 0 {
			t.Fatalf("nothing lost with a 4 KiB buffer: the test tests nothing")
		}
		var sum uint64
		for _, e := range st.Events {
			sum += e.Lost
			if !st.LostByEvent && e.Lost != 0 {
				t.Errorf("%s: %d lost, but the %s does not count per event", e.Name, e.Lost, tg.name)
			}
		}
		if st.LostByEvent != (tg.name == "kernel") {
			t.Errorf("LostByEvent %v on the %s", st.LostByEvent, tg.name)
		}
		if st.LostByEvent && sum != st.Lost {
			t.Errorf("events' lost counts add up to %d, the recording lost %d: %+v", sum, st.Lost, st.Events)
		}
		t.Logf("lost %d: %+v", st.Lost, st.Events)
	})
}
