package record_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/internal/testutil"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// TestRecordEventFilter records with a filter on one selection (perf record
// -e A --filter F -e B): A's records that fail F are not delivered, B's
// all are.
func TestRecordEventFilter(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		prefix := uniq("flt")
		a, err := f.Register(prefix+"_a u32 n; __rel_loc char[] msg", 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := f.Register(prefix+"_b u32 n", 0)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "perf.data")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		rec := tg.start(t, out, record.Options{
			Events:  []string{prefix + "_a", prefix + "_b"},
			Filters: []string{`n & 1 && msg ~ "odd*"`},
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rec.Run(ctx) }()
		waitEnabled(t, a, waitLimit)
		waitEnabled(t, b, waitLimit)
		var enc eventdef.Encoder
		buf := make([]byte, 0, 64)
		for i := range 10 {
			msg := "even"
			if i%3 != 0 {
				msg = "odd"
			}
			if err := a.Encode(&enc, buf, func(e *eventdef.Encoder) { e.Uint(uint64(i)); e.String(msg) }); err != nil {
				t.Fatal(err)
			}
			if err := b.Encode(&enc, buf, func(e *eventdef.Encoder) { e.Uint(uint64(i)) }); err != nil {
				t.Fatal(err)
			}
		}
		// Wait for the 13 samples that pass (more would show in the
		// report), then stop.
		deadline := time.Now().Add(waitLimit)
		for rec.Stats().Samples < 13 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		samples, _ := reportJSON(t, path)
		var gotA []string
		nb := 0
		for _, s := range samples {
			switch s.Name {
			case prefix + "_a":
				gotA = append(gotA, fmt.Sprint(s.Fields["n"], s.Fields["msg"]))
			case prefix + "_b":
				nb++
			}
		}
		// n odd and i%3 != 0: 1, 5, 7.
		if want := []string{"1odd", "5odd", "7odd"}; fmt.Sprint(gotA) != fmt.Sprint(want) || nb != 10 {
			t.Errorf("recorded %v of _a (want %v) and %d of _b (want 10)", gotA, want, nb)
		}
	})
}

// TestRecordEventFilterRefused: a filter the kernel refuses fails the start with
// its errno.
func TestRecordEventFilterRefused(t *testing.T) {
	sock := startDaemon(t)
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := uniq("fltbad")
	if _, err := f.Register(name+" u32 n", 0); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = record.Daemon(c, nil, record.Options{Events: []string{name}, Filters: []string{"n =="}})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("refused filter: %v, want EINVAL", err)
	}
	_, err = record.Daemon(c, nil, record.Options{Filters: []string{"n == 1"}})
	if !errors.Is(err, unix.EINVAL) {
		t.Errorf("a filter without -e: %v, want EINVAL", err)
	}
}

// TestTraceFilterCommand: uetrace trace -e EVENT --filter EXPR sets the
// event's filter file for the trace, so the buffer takes only what passes,
// and sets it back; a refused filter fails with the kernel's error text.
func TestTraceFilterCommand(t *testing.T) {
	bin := testutil.Uetrace(t)
	forEach(t, func(t *testing.T, tg target) {
		_, name, ev := openEvent(t, tg, "trf", "u32 i")
		fs, err := tracefs.Open(&tg.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		filter := func() string {
			b, err := fs.ReadFile("events/user_events/" + name + "/filter")
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		// The buffer is the machine's: earlier tests' records stay in it,
		// and a deleted event's id is the next event's, so its records
		// would print under this event's name. Start with it empty.
		if err := fs.WriteFile("trace", nil, os.O_TRUNC); err != nil {
			t.Fatal(err)
		}
		tr := exec.Command(bin, append(backendArgs(tg), "trace", "-e", name, "--filter", "i >= 5")...)
		var out, errs testutil.Buffer
		tr.Stdout, tr.Stderr = &out, &errs
		if err := tr.Start(); err != nil {
			t.Fatal(err)
		}
		defer tr.Process.Kill()
		testutil.Wait(t, "trace to enable the event", func() bool {
			return strings.Contains(errs.String(), "enabled user_events:"+name+" until the trace ends")
		})
		if f := filter(); f != "i >= 5\n" {
			t.Errorf("filter %q during the trace", f)
		}
		if err := ev.Write(le32(1)); err != nil {
			t.Fatal(err)
		}
		last := time.Now()
		testutil.Wait(t, "the passing record", func() bool {
			if strings.Contains(out.String(), name+": i=0x7 (7)") {
				return true
			}
			if time.Since(last) > 50*time.Millisecond {
				last = time.Now()
				if err := ev.Write(le32(7)); err != nil {
					t.Fatal(err)
				}
			}
			return false
		})
		tr.Process.Signal(syscall.SIGTERM)
		if err := tr.Wait(); err != nil {
			t.Errorf("trace after SIGTERM: %v\n%s", err, errs.String())
		}
		if strings.Contains(out.String(), "i=0x1 ") {
			t.Errorf("the filtered record is in the trace:\n%s", out.String())
		}
		if f := filter(); f != "none\n" {
			t.Errorf("filter %q after the trace", f)
		}
		bad, err := exec.Command(bin, append(backendArgs(tg), "trace", "-e", name, "--filter", "j == 1")...).CombinedOutput()
		if err == nil || !strings.Contains(string(bad), "j == 1\n  ^\nparse_error: Field not found") || !strings.Contains(string(bad), "(EINVAL)") {
			t.Errorf("refused filter: %v\n%s", err, bad)
		}
		if f := filter(); f != "none\n" {
			t.Errorf("filter %q after the refused one", f)
		}
	})
}
