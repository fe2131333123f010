package record_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/daemon"
	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/record"
	"github.com/uetrace/uetrace/userevents"
)

// TestRecordEventFilter records with a filter on one selection (perf record
// -e A --filter F -e B): A's records that fail F are not delivered, B's
// all are.
func TestRecordEventFilter(t *testing.T) {
	forEach(t, func(t *testing.T, tg target) {
		f, err := userevents.Open(tg.opts)
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
	f, err := userevents.Open(userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := uniq("fltbad")
	if _, err := f.Register(name+" u32 n", 0); err != nil {
		t.Fatal(err)
	}
	c, err := daemon.Dial(sock, nil)
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
