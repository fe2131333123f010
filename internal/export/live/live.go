// Package live takes trace events as they happen, from the kernel's perf
// events or from a uetrace daemon's session (package record), and gives
// them as perfdata.Samples with wall-clock times: the live source of
// `uetrace export` and of the Collector's userevents receiver. It also
// opens the recordings of `uetrace record` and `uetrace top`, so that all
// of them choose their source the same way.
//
// It does not map or send anything: package export does.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/record"
	"github.com/uetrace/uetrace/perfdata"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// Where says where events come from: Kernel (perf events on the
// kernel's tracefs), Daemon (a session of the uetrace daemon at Socket) or
// Auto (the kernel when it has user_events, else the daemon).
type Where struct {
	Source  userevents.Backend
	Socket  string // the daemon's socket; "": wire.DefaultSocket()
	Tracefs string // the kernel's tracefs; "": where it is usually mounted
}

// OpenRecorder starts a recording from where w says (as uetrace record
// does): with out nil it only counts and calls opts.Sink. The returned
// func closes the connection to the daemon, after the recording.
func OpenRecorder(w Where, out io.WriteSeeker, opts record.Options) (*record.Recorder, func(), error) {
	switch w.Source {
	case userevents.Other:
		return nil, nil, fmt.Errorf("record: there are no events of other processes to record but the kernel's or the daemon's: use kernel or daemon: %w", unix.EINVAL)
	case userevents.Kernel:
		// perf records any tracepoint: the kernel need not have user_events.
		root, err := TracefsRoot(w.Tracefs)
		if err != nil {
			return nil, nil, err
		}
		r, err := record.Kernel(root, out, opts)
		return r, func() {}, err
	case userevents.Auto:
		if t, err := tracefs.Open(&userevents.Options{Backend: userevents.Kernel, Tracefs: w.Tracefs}); err == nil {
			root := t.Root()
			t.Close()
			r, err := record.Kernel(root, out, opts)
			return r, func() {}, err
		}
	}
	c, err := client.Dial(w.Socket, nil)
	if pe, ie := (*client.PermissionError)(nil), (*client.IdentityError)(nil); errors.As(err, &pe) || errors.As(err, &ie) {
		return nil, nil, err // a daemon is there: the error says whom to ask, or whom it runs as
	}
	if err != nil {
		return nil, nil, fmt.Errorf("no kernel user_events and no daemon: %w", err)
	}
	r, err := record.Daemon(c, out, opts)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return r, func() { c.Close() }, nil
}

// TracefsRoot finds the kernel's tracefs: root if given, else where it is
// usually mounted.
func TracefsRoot(root string) (string, error) {
	cands := []string{root}
	if root == "" {
		cands = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}
	}
	for _, c := range cands {
		if st, err := os.Stat(c + "/events"); err == nil && st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("no tracefs at %s (mount -t tracefs nodev /sys/kernel/tracing): %w", strings.Join(cands, " or "), unix.ENOENT)
}

// A Source gives the samples of a live recording to a function.
type Source struct {
	rec   *record.Recorder
	close func()
}

// Open opens a live source: from where w says, the events opts selects
// (its Sink and ClockMonotonic are Open's). sink is called with each
// sample, on Run's goroutine; the sample and its Raw are valid only
// during the call. notify, when set, hears what the user should know (an
// event whose format does not parse: its samples go on undecoded), unless
// opts.Notify is set.
//
// Times: the daemon's samples are CLOCK_MONOTONIC, and the kernel's are
// made so (use_clockid); a sample's Wall is its wall-clock time, by the
// clocks' offset read when the recording is made (record.Options).
func Open(w Where, opts record.Options, sink func(*perfdata.Sample), notify func(string)) (*Source, error) {
	opts.ClockMonotonic = true
	if opts.Notify == nil {
		opts.Notify = notify
	}
	opts.Sink = sink
	rec, closeBackend, err := OpenRecorder(w, nil, opts)
	if err != nil {
		return nil, err
	}
	return &Source{rec: rec, close: closeBackend}, nil
}

// Run takes events until ctx is done, then closes the source.
func (s *Source) Run(ctx context.Context) error {
	defer s.close()
	return s.rec.Run(ctx)
}

// Stats are the recording's counts: samples, lost records, events.
func (s *Source) Stats() record.Stats { return s.rec.Stats() }

// Name says where the events come from: "kernel" or "daemon" and more.
func (s *Source) Name() string { return s.rec.Source() }
