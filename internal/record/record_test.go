package record_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// target is where a test records: the kernel's user_events (in the VM) or
// a daemon this test starts.
type target struct {
	name string
	opts userevents.Options
	// start begins a recording into w.
	start func(t *testing.T, w *os.File, o record.Options) *record.Recorder
}

func targets(t *testing.T) []target {
	sock := startDaemon(t)
	out := []target{{
		name: "daemon",
		opts: userevents.Options{Backend: userevents.Daemon, Socket: sock},
		start: func(t *testing.T, w *os.File, o record.Options) *record.Recorder {
			c, err := client.Dial(sock, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			r, err := record.Daemon(c, writeSeeker(w), o)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}}
	if f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel}); err == nil {
		f.Close()
		out = append(out, target{
			name: "kernel",
			opts: userevents.Options{Backend: userevents.Kernel},
			start: func(t *testing.T, w *os.File, o record.Options) *record.Recorder {
				r, err := record.Kernel("/sys/kernel/tracing", writeSeeker(w), o)
				if err != nil {
					t.Fatal(err)
				}
				return r
			},
		})
	} else {
		t.Logf("kernel not tested: %v", err)
	}
	return out
}

func startDaemon(t *testing.T) string {
	t.Helper()
	return daemontest.Start(t, daemon.Config{Subsystem: subsys.New(subsys.Options{NumCPU: 2}), Cred: daemontest.Perfmon})
}

func forEach(t *testing.T, fn func(t *testing.T, tg target)) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg) })
	}
}

func uniq(base string) string {
	return fmt.Sprintf("%s_%d", base, time.Now().UnixNano()%1_000_000_007)
}

// openEvent opens user_events on tg for the rest of the test and registers
// a new event named uniq(base) with fields; it returns the file, the name
// and the event.
func openEvent(t *testing.T, tg target, base, fields string) (*userevents.File, string, *userevents.Event) {
	t.Helper()
	f, err := userevents.Open(&tg.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	name := uniq(base)
	ev, err := f.Register(name+" "+fields, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f, name, ev
}

// backendArgs are the uetrace options that select tg.
func backendArgs(tg target) []string {
	args := []string{"--backend", tg.opts.Backend.String()}
	if tg.opts.Socket != "" {
		args = append(args, "--socket", tg.opts.Socket)
	}
	return args
}

// jsonSample is a line of report's JSON.
type jsonSample struct {
	Time   uint64         `json:"time"`
	CPU    uint32         `json:"cpu"`
	PID    int32          `json:"pid"`
	TID    int32          `json:"tid"`
	Comm   string         `json:"comm"`
	System string         `json:"system"`
	Name   string         `json:"name"`
	Fields map[string]any `json:"fields"`
	// Event and Meta are an EventHeader event's name and metadata.
	Event string         `json:"event"`
	Meta  map[string]any `json:"meta"`
}

// reportJSON reads a recorded file back through report's JSON.
func reportJSON(t *testing.T, path string) ([]jsonSample, report.Summary) {
	t.Helper()
	r, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var buf bytes.Buffer
	sum, err := report.Write(&buf, r, report.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var out []jsonSample
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s jsonSample
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("report line %q: %v", sc.Bytes(), err)
		}
		out = append(out, s)
	}
	return out, sum
}

// waitEnabled waits for the recording to have set the event's bit.
func waitEnabled(t *testing.T, ev *userevents.Event, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ev.Enabled() {
		if time.Now().After(deadline) {
			t.Fatalf("%s not enabled %v after the recording started", ev.Name(), within)
		}
		time.Sleep(time.Millisecond)
	}
}

// The report holds exactly the events written, with exactly their values,
// also those of an event registered while the recording ran and deleted
// before the report was made.
func TestRecordExactValues(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		prefix := uniq("rec")
		a, err := f.Register(prefix+"_a u32 n; s64 v; char[8] tag; __rel_loc char[] msg; u8 flag", 0)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "perf.data")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		notes := make(chan string, 10)
		rec := tg.start(t, out, record.Options{
			Events: []string{prefix + "_*"},
			Notify: func(s string) { notes <- s },
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()

		waitEnabled(t, a, waitLimit)
		const n = 300
		var enc eventdef.Encoder
		buf := make([]byte, 0, 256)
		type want struct {
			name   string
			fields map[string]any
		}
		var wants []want
		for i := range n {
			msg := fmt.Sprintf("message %d \"quoted\" ü", i)
			err := a.Encode(&enc, buf, func(e *eventdef.Encoder) {
				e.Uint(uint64(i))
				e.Int(-int64(i) * 1_000_000_007)
				e.String("t" + fmt.Sprint(i%7))
				e.String(msg)
				e.Uint(uint64(i % 256))
			})
			if err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{prefix + "_a", map[string]any{
				"n": json.Number(fmt.Sprint(i)), "v": json.Number(fmt.Sprint(-int64(i) * 1_000_000_007)),
				"tag": "t" + fmt.Sprint(i%7), "msg": msg, "flag": json.Number(fmt.Sprint(i % 256)),
			}})
			if i%50 == 49 {
				time.Sleep(2 * time.Millisecond) // a modest rate
			}
		}
		// An event registered now is picked up, written, then deleted.
		late, err := f.Register(prefix+"_late u64 x", 0)
		if err != nil {
			t.Fatal(err)
		}
		// On the kernel the bit is set when the first CPU's perf event
		// opens, before every CPU's is enabled; the notice says when all are.
		select {
		case note := <-notes:
			if !strings.Contains(note, prefix+"_late, registered after the recording started") {
				t.Fatalf("notice %q", note)
			}
		case <-time.After(waitLimit):
			t.Fatalf("no notice of the late event %v after it was registered", waitLimit)
		}
		if !late.Enabled() {
			t.Fatal("the late event is recorded but not enabled")
		}
		for i := range 10 {
			if err := late.Write(le64(uint64(i) << 40)); err != nil {
				t.Fatal(err)
			}
			wants = append(wants, want{prefix + "_late", map[string]any{"x": json.Number(fmt.Sprint(uint64(i) << 40))}})
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		st := rec.Stats()
		// Closing the file drops the last reference: both events are
		// deleted before the report is made, which decodes them anyway.
		f.Close()
		waitDeleted(t, tg.opts, prefix+"_a", prefix+"_late")
		if st.Lost != 0 || st.Samples != n+10 {
			t.Errorf("stats: %d samples, %d lost; want %d, 0", st.Samples, st.Lost, n+10)
		}
		got, sum := reportJSON(t, path)
		if sum.Lost != 0 || sum.Undecoded != 0 {
			t.Errorf("report summary %+v", sum)
		}
		var gotWants []want
		pid := int32(os.Getpid())
		for _, s := range got {
			gotWants = append(gotWants, want{s.Name, s.Fields})
			if s.PID != pid || s.System != "user_events" || s.Comm == "" {
				t.Errorf("sample %+v: want pid %d, system user_events and a comm", s, pid)
			}
		}
		if d := cmp.Diff(wants, gotWants, cmp.AllowUnexported(want{})); d != "" {
			t.Errorf("report differs from what was written (-want +got):\n%s", d)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Time < got[i-1].Time {
				t.Fatalf("sample %d at %d before sample %d at %d", i, got[i].Time, i-1, got[i-1].Time)
			}
		}
	})
}

// waitDeleted waits for events to leave tracefs (the kernel deletes them
// after an RCU grace period).
func waitDeleted(t *testing.T, o userevents.Options, names ...string) {
	t.Helper()
	fs, err := tracefs.Open(&o)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	deadline := time.Now().Add(waitLimit)
	for _, name := range names {
		for {
			_, err := fs.ReadFile("events/user_events/" + name + "/id")
			if err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still exists %v after its last reference went", name, waitLimit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func le64(x uint64) []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(x >> (8 * i))
	}
	return b[:]
}

// A buffer too small for a burst loses records, and every one is counted:
// samples + lost = written. On the daemon the buffer is the session's
// streams, so the producer is kept on the daemon's path (NoHandOver): a
// ring set handed over is read from the producer's rings, which the
// session's buffer does not bound, and whether those lose a burst is the
// machine's timing (TestRecordHandOver counts their losses).
func TestRecordCountsLost(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "lost", "u64 i; char[32] pad")
		path := filepath.Join(t.TempDir(), "perf.data")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		rec := tg.start(t, out, record.Options{Events: []string{name}, BufferKB: 4, NoHandOver: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		waitEnabled(t, ev, waitLimit)
		const n = 20000
		payload := make([]byte, 8+32)
		for i := range n {
			payload[0] = byte(i)
			if err := ev.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		st := rec.Stats()
		if st.Lost == 0 {
			t.Errorf("nothing lost with a 4 KiB buffer for %d records", n)
		}
		if st.Samples+st.Lost != n {
			t.Errorf("%d samples + %d lost = %d, want %d written", st.Samples, st.Lost, st.Samples+st.Lost, n)
		}
		got, sum := reportJSON(t, path)
		if uint64(len(got)) != st.Samples || sum.Lost != st.Lost {
			t.Errorf("report: %d samples, %d lost; recorder: %d, %d", len(got), sum.Lost, st.Samples, st.Lost)
		}
		t.Logf("%d written: %d recorded, %d lost", n, st.Samples, st.Lost)
	})
}
