package live_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon"
	"github.com/uetrace/uetrace/internal/daemon/daemontest"
	"github.com/uetrace/uetrace/internal/export/live"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/userevents"
)

// TestOpenErrors: a source that cannot be is an error saying why, with
// its errno.
func TestOpenErrors(t *testing.T) {
	sink := func(*perfdata.Sample) {}
	if _, err := live.Open(live.Where{Source: userevents.Other}, record.Options{}, sink, nil); !errors.Is(err, unix.EINVAL) {
		t.Errorf("inprocess: %v, want EINVAL", err)
	}
	if _, err := live.Open(live.Where{Source: userevents.Kernel, Tracefs: t.TempDir()}, record.Options{}, sink, nil); !errors.Is(err, unix.ENOENT) {
		t.Errorf("kernel on a directory that is no tracefs: %v, want ENOENT", err)
	}
	if _, err := live.Open(live.Where{Source: userevents.Daemon, Socket: filepath.Join(t.TempDir(), "none")}, record.Options{}, sink, nil); err == nil {
		t.Errorf("daemon on a socket nobody serves: no error")
	}
}

// TestDaemonSamples: a daemon's events come as perfdata.Samples with the
// event's format, the writer's pid and a wall-clock time.
func TestDaemonSamples(t *testing.T) {
	sock := daemontest.Start(t, daemon.Config{})
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Daemon, Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ev, err := f.Register("live_test u32 n", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	var (
		mu  sync.Mutex
		got []perfdata.Sample
	)
	before := uint64(time.Now().UnixNano())
	src, err := live.Open(live.Where{Source: userevents.Daemon, Socket: sock}, record.Options{Events: []string{"live_test"}},
		func(s *perfdata.Sample) {
			mu.Lock()
			c := *s
			c.Raw = append([]byte(nil), s.Raw...)
			got = append(got, c)
			mu.Unlock()
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if src.Name() == "" {
		t.Error("the source has no name")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !ev.Enabled() {
		if time.Now().After(deadline) {
			t.Fatal("the event is not enabled after a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ev.Write([]byte{7, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sample after a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s := got[0]
	if s.Event.System != "user_events" || s.Event.Name != "live_test" || s.Event.Format == nil || s.PID != uint32(unix.Getpid()) || s.Wall < before {
		t.Errorf("sample: event %s:%s (format %v) pid %d wall-clock time %d (before %d); want user_events:live_test with its format, pid %d, a wall-clock time",
			s.Event.System, s.Event.Name, s.Event.Format != nil, s.PID, s.Wall, before, unix.Getpid())
	}
}
